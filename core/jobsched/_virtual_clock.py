"""A clock advanced by hand, for tests: see `jobsched.testing`."""

from __future__ import annotations

import asyncio
import datetime as dt
import heapq
import itertools
from collections.abc import Callable
from typing import Any


class VirtualTimer:
    """A timer on a `VirtualClock`; `cancel()` it like an asyncio handle."""

    __slots__ = ("_callback", "cancelled", "when")

    def __init__(self, when: float, callback: Callable[[], None]) -> None:
        self.when = when
        self._callback: Callable[[], None] | None = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True
        self._callback = None  # drop references held by a cancelled timer

    def __repr__(self) -> str:
        state = " cancelled" if self.cancelled else ""
        return f"<VirtualTimer at {self.when}{state}>"


class VirtualClock:
    """A `jobsched.contracts.Clock` that only moves when a test moves it.

    ``now()`` starts at `start` (monotonic seconds); ``time()`` is the wall
    clock, `wall` (epoch seconds, or an aware `datetime`) at `start`, moving
    with ``now()``. Timers set with ``call_at`` ring only inside `advance`,
    `advance_to` or `jump`, in time order, with the event loop run to
    quiescence between them, so everything a timer sets off happens before the
    next one rings. Use `sleep` in async test jobs that must "take time".

    Example::

        clock = VirtualClock()
        scheduler = JobScheduler(clock=clock)
        scheduler.schedule_recurring(make_job, 60)
        async with scheduler:
            await clock.advance(600)   # ten minutes, in microseconds
    """

    def __init__(self, start: float = 0.0, *, wall: float | dt.datetime = 1_767_225_600.0) -> None:
        # Default wall time: 2026-01-01T00:00:00Z, fixed so tests are reproducible.
        if isinstance(wall, dt.datetime):
            if wall.tzinfo is None:
                raise ValueError(f"wall must be an aware datetime, got naive {wall!r}")
            wall = wall.timestamp()
        self._now = float(start)
        self._wall_offset = float(wall) - self._now
        self._timers: list[tuple[float, int, VirtualTimer]] = []
        self._seq = itertools.count()
        #: Loop passes allowed per `settle` before giving up (a job that never stops yielding).
        self.max_settle_passes = 100_000

    # ── the Clock protocol ─────────────────────────────────────────────
    def now(self) -> float:
        """Virtual monotonic seconds."""
        return self._now

    def time(self) -> float:
        """Virtual wall-clock seconds since the epoch."""
        return self._now + self._wall_offset

    def call_at(self, when: float, callback: Callable[[], None]) -> VirtualTimer:
        """Ring `callback` once the clock reaches `when` (at the next advance if already due)."""
        timer = VirtualTimer(when, callback)
        heapq.heappush(self._timers, (when, next(self._seq), timer))
        return timer

    # ── driving it ─────────────────────────────────────────────────────
    def datetime(self, tz: Any = dt.timezone.utc) -> dt.datetime:
        """The virtual wall time as an aware datetime."""
        return dt.datetime.fromtimestamp(self.time(), tz)

    def set_wall(self, wall: float | dt.datetime) -> None:
        """Step the wall clock (as NTP or a user might) without moving monotonic time."""
        if isinstance(wall, dt.datetime):
            wall = wall.timestamp()
        self._wall_offset = float(wall) - self._now

    @property
    def pending(self) -> int:
        """Timers not yet rung or cancelled."""
        return sum(1 for _, _, t in self._timers if not t.cancelled)

    def timer_times(self) -> list[float]:
        """When each live timer rings, earliest first: what a test checks is armed."""
        return sorted(t.when for _, _, t in self._timers if not t.cancelled)

    def next_timer(self) -> float | None:
        """When the earliest live timer rings; None when there is none."""
        timers = self._timers
        while timers and timers[0][2].cancelled:
            heapq.heappop(timers)
        return timers[0][0] if timers else None

    async def settle(self) -> None:
        """Run the event loop until nothing is ready to run (work on threads excepted)."""
        loop = asyncio.get_running_loop()
        ready = getattr(loop, "_ready", None)  # CPython's run queue: empty means idle
        for _ in range(self.max_settle_passes if ready is not None else 100):
            await asyncio.sleep(0)
            if ready is not None and not ready:
                # Once more: a callback that just ran may have scheduled a task step.
                await asyncio.sleep(0)
                if not ready:
                    return
        if ready is not None:
            raise RuntimeError(
                f"the event loop did not settle after {self.max_settle_passes} passes: "
                "a task keeps yielding without waiting for the clock"
            )

    async def advance_to(self, when: float) -> None:
        """Move to monotonic time `when`, ringing every timer due on the way, in order."""
        if when < self._now:
            raise ValueError(f"a clock cannot go back: now is {self._now}, asked for {when}")
        await self.settle()
        while True:
            nxt = self.next_timer()
            if nxt is None or nxt > when:
                break
            if nxt > self._now:
                self._now = nxt
            self._ring_next()
            await self.settle()
        self._now = max(self._now, when)
        await self.settle()

    async def advance(self, seconds: float) -> None:
        """Move `seconds` forward, ringing due timers in order (see `advance_to`)."""
        if seconds < 0:
            raise ValueError(f"advance() needs seconds >= 0, got {seconds!r}")
        await self.advance_to(self._now + seconds)

    async def jump(self, seconds: float) -> None:
        """Move `seconds` forward *without* ringing timers on the way, then ring the overdue.

        Models a process that was paused or suspended: every timer that came
        due meanwhile rings late, at the new time, in order.
        """
        if seconds < 0:
            raise ValueError(f"jump() needs seconds >= 0, got {seconds!r}")
        self._now += seconds
        await self.advance_to(self._now)

    def jump_nowait(self, seconds: float) -> int:
        """Move `seconds` forward and ring the overdue timers *now*, without running the loop.

        Like `jump`, every timer due by the new time rings at the new time, in
        order; unlike it, no task runs before, between or after them, so a test
        sees the instant a timer fired and before anyone reacted (a watchdog
        that fired but whose cancel the attempt has not yet seen, say). Call it
        on the loop's thread; then ``await clock.settle()`` to let tasks react.
        Returns how many timers rang.
        """
        if seconds < 0:
            raise ValueError(f"jump_nowait() needs seconds >= 0, got {seconds!r}")
        self._now += seconds
        rang = 0
        while (nxt := self.next_timer()) is not None and nxt <= self._now:
            self._ring_next()
            rang += 1
        return rang

    def _ring_next(self) -> None:
        """Pop the earliest live timer and ring it (the caller checked it is due)."""
        _, _, timer = heapq.heappop(self._timers)
        callback = timer._callback
        timer.cancel()
        if callback is not None:
            callback()

    async def sleep(self, seconds: float) -> None:
        """Wait `seconds` of virtual time (for async jobs that must take time)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()

        def wake() -> None:
            if not future.done():
                future.set_result(None)

        timer = self.call_at(self._now + seconds, wake)
        try:
            await future
        finally:
            timer.cancel()

    def __repr__(self) -> str:
        return f"VirtualClock(now={self._now}, pending={self.pending})"
