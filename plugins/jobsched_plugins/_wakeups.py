"""What the shared stores' wake-ups have in common.

A shared store's kernel sets four callbacks on the store (``on_cancel``,
``on_work``, ``on_resync``, ``on_worker_request``) and waits on it
(``wait``, ``wait_finished``); each store hears about other processes its
own way (PostgreSQL's LISTEN, SQLite's poll) but keeps the callbacks and
events the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Callable


class WakeupEvents:
    """The callbacks the kernel sets and the events waiters wait on."""

    def __init__(self) -> None:
        #: Called with a job id when any process asks to cancel it (loop thread).
        self.on_cancel: Callable[[str], None] | None = None
        #: Called when new work may be due (loop thread).
        self.on_work: Callable[[], None] | None = None
        #: Called when notifications may have been missed (after a reconnect).
        self.on_resync: Callable[[], None] | None = None
        #: Called with a worker id when an operator asked something of it.
        self.on_worker_request: Callable[[str], None] | None = None
        self.work_event = asyncio.Event()
        self.finished_event = asyncio.Event()
        #: Set on any change another process or this one made (live views).
        self.changed_event = asyncio.Event()

    async def wait(self, timeout: float) -> bool:
        """Wait until new work may be due or `timeout`; True if woken."""
        return await wait_event(self.work_event, timeout)

    async def wait_finished(self, timeout: float) -> bool:
        """Wait until some job may have finished, or `timeout`; True if woken."""
        return await wait_event(self.finished_event, timeout)

    async def wait_changed(self, timeout: float) -> bool:
        """Wait until some job may have changed, or `timeout`; True if woken."""
        return await wait_event(self.changed_event, timeout)


class DelegatedWakeups:
    """A store whose callbacks and waits are those of its `wakeups`."""

    wakeups: WakeupEvents

    @property
    def on_cancel(self) -> Callable[[str], None] | None:
        """Called with a job id when any process asks to cancel it."""
        return self.wakeups.on_cancel

    @on_cancel.setter
    def on_cancel(self, callback: Callable[[str], None] | None) -> None:
        self.wakeups.on_cancel = callback

    @property
    def on_work(self) -> Callable[[], None] | None:
        """Called when new work may be due."""
        return self.wakeups.on_work

    @on_work.setter
    def on_work(self, callback: Callable[[], None] | None) -> None:
        self.wakeups.on_work = callback

    @property
    def on_resync(self) -> Callable[[], None] | None:
        """Called when notifications may have been missed (after a reconnect)."""
        return self.wakeups.on_resync

    @on_resync.setter
    def on_resync(self, callback: Callable[[], None] | None) -> None:
        self.wakeups.on_resync = callback

    @property
    def on_worker_request(self) -> Callable[[str], None] | None:
        """Called with a worker id when an operator asked something of it."""
        return self.wakeups.on_worker_request

    @on_worker_request.setter
    def on_worker_request(self, callback: Callable[[str], None] | None) -> None:
        self.wakeups.on_worker_request = callback

    async def wait(self, timeout: float) -> bool:
        """Wait until new work may be due or `timeout`; True if woken."""
        return await self.wakeups.wait(timeout)

    async def wait_finished(self, timeout: float) -> bool:
        """Wait until some job may have finished, or `timeout`; True if woken."""
        return await self.wakeups.wait_finished(timeout)

    async def wait_changed(self, timeout: float) -> bool:
        """Wait until some job may have changed (submitted, finished, retried,
        progressed), or `timeout`; True if woken."""
        return await self.wakeups.wait_changed(timeout)


async def wait_event(event: asyncio.Event, timeout: float) -> bool:
    """Wait for `event` at most `timeout` seconds (inf: no limit); clear it; True if it was set."""
    if not event.is_set() and timeout > 0 and math.isfinite(timeout):
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(event.wait(), timeout)
    elif not event.is_set() and timeout > 0:
        await event.wait()
    notified = event.is_set()
    event.clear()
    return notified
