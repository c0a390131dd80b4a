"""Time as the kernel sees it: a monotonic `now`, wall time, and one-shot timers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Protocol


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    """What the kernel needs to know about time.

    Every delay, backoff, timeout and schedule goes through one clock, so
    `jobsched.testing` can swap in a clock that is advanced by hand.
    """

    def now(self) -> float:
        """Monotonic seconds: run times, timeouts and intervals use this."""

    def time(self) -> float:
        """Wall-clock seconds since the epoch: cron and date triggers use this."""

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle:
        """Call `callback` on the loop thread once `now()` reaches `when`."""


class SystemClock:
    """The real clocks, with timers on the running event loop."""

    now = staticmethod(time.monotonic)
    time = staticmethod(time.time)

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle:
        loop = asyncio.get_running_loop()
        # loop.time() is time.monotonic() for asyncio's loops, but not
        # necessarily for others: convert through a relative delay.
        return loop.call_later(max(0.0, when - time.monotonic()), callback)
