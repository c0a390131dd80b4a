"""How a `Client` waits on a shared store: for jobs, a schedule, any change.

A `Client` holds one `Waits`. One task consumes the store's "a job
finished" wake-up and counts it, and another (started by the first
`wait_for_change`) its "something changed" wake-up, so that any number of
waiters each see every notification; a waiter also looks again after a
safety poll, in case a notification was lost while the store reconnected.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Coroutine, Iterable
from typing import Any

from ._errors import UnknownJobError
from ._options import check_job_id, id_list
from ._records import JobInfo
from ._status import JobStatus
from .backends.schedules import ended
from .store import SharedStore


class Waits:
    """The waits of one `Client` (its methods of the same names, which
    check that the client is open and delegate here, carry the contracts).

    `is_open` says whether the client is still open (the watching tasks end
    when it is not); `spawn(coro, name)` runs a task the client cancels when
    it closes; `safety_poll` is the longest a waiter sleeps without a
    notification before it looks again anyway.
    """

    def __init__(
        self,
        store: SharedStore,
        *,
        is_open: Callable[[], bool],
        spawn: Callable[[Coroutine[Any, Any, Any], str], None],
        safety_poll: float,
    ) -> None:
        self.store = store
        self._is_open = is_open
        self._spawn = spawn
        self._safety_poll = safety_poll
        self._finished = 0  # "some job finished" notifications seen
        self._finished_event: asyncio.Event | None = None
        self._changed_event: asyncio.Event | None = None

    def start(self) -> None:
        """Begin counting "a job finished" notifications (the client is open)."""
        self._finished_event = asyncio.Event()
        self._spawn(self._watch_finished(), "jobsched-client-finished")

    async def wait_many(self, job_ids: Iterable[str], timeout: float | None) -> list[JobInfo]:
        """`Client.wait_many`."""
        given = [check_job_id(job_id) for job_id in id_list(job_ids, "wait_many")]
        ids = list(dict.fromkeys(given))
        deadline = None if timeout is None else time.monotonic() + timeout
        done: dict[str, JobInfo] = {}
        while True:
            seen = self._finished
            todo = [job_id for job_id in ids if job_id not in done]
            rows = {row.job_id: row for row in await self.store.jobs(todo)}
            unknown = [job_id for job_id in todo if job_id not in rows]
            if unknown:
                raise UnknownJobError(f"unknown jobs {unknown} in {self.store.url}")
            for row in rows.values():
                if JobStatus(row.status).is_terminal:
                    done[row.job_id] = JobInfo.from_row(row)
            if len(done) == len(ids):
                return [done[job_id] for job_id in given]
            left = self._safety_poll if deadline is None else deadline - time.monotonic()
            if left <= 0:
                pending = [job_id for job_id in ids if job_id not in done]
                raise TimeoutError(f"jobs {pending} did not finish within {timeout} s")
            await self._next_finished(seen, min(left, self._safety_poll))

    async def _watch_finished(self) -> None:
        # One task consumes the store's "finished" wake-up and counts it, so
        # every waiter sees every notification (several waiters reading the
        # store's one event would take it from each other).
        # The loop also ends once the client is not open (`close` says so
        # before cancelling this task): Python 3.11's wait_for loses a
        # cancellation that arrives as the awaited event is set (a store poll
        # seeing our own write), and `close` would wait for this task forever.
        assert self._finished_event is not None
        while self._is_open():
            await self.store.wait_finished(self._safety_poll)
            self._finished += 1
            self._finished_event.set()
            self._finished_event = asyncio.Event()

    async def _next_finished(self, seen: int, timeout: float) -> None:
        """Return once a notification newer than `seen` arrived, or after `timeout`."""
        if self._finished != seen or self._finished_event is None:
            return
        with contextlib.suppress(TimeoutError, asyncio.TimeoutError):
            await asyncio.wait_for(self._finished_event.wait(), timeout)

    async def wait_schedule(self, schedule_id: str, timeout: float | None) -> None:
        """`Client.wait_schedule`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            seen = self._finished
            if ended(await self.store.get_schedule(schedule_id)):
                return
            left = self._safety_poll if deadline is None else deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"schedule {schedule_id} did not end within {timeout} s")
            # Its last run ends it: a finished job is the moment to look again.
            await self._next_finished(seen, min(left, self._safety_poll, 0.25))

    async def changed(self, seconds: float) -> bool:
        """`Client.wait_for_change`, its `timeout` checked: `seconds`."""
        if self._changed_event is None:
            self._changed_event = asyncio.Event()
            self._spawn(self._watch_changes(), "jobsched-client-changes")
        event = self._changed_event
        with contextlib.suppress(TimeoutError, asyncio.TimeoutError):
            await asyncio.wait_for(event.wait(), seconds)
        return event.is_set()

    async def _watch_changes(self) -> None:
        # One task consumes the store's wake-up and sets a fresh event per
        # change, so every waiter sees every change (as `_watch_finished`).
        while self._is_open():
            if await self.store.wait_changed(self._safety_poll):
                assert self._changed_event is not None
                self._changed_event.set()
                self._changed_event = asyncio.Event()
