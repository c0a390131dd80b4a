"""The stored schedules a `Client` adds, edits and fires by hand, and serves.

A `Client` holds one `ClientSchedules`: it builds a schedule's row from a
job and its rule (`jobsched.backends.schedules`: the same row and id a
worker's ``schedule_recurring`` makes), replaces an edited schedule by a new
one, resumes a paused one from its next period after now, submits a
triggered run as stored, and serves every schedule it stores while the
client is open (a client runs no job: firing a period only submits one).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from ._client_submit import storable
from ._codec import JobCodec
from ._errors import UnknownScheduleError
from ._job import Job
from ._plugins import PluginManager
from .backends.schedules import (
    ended,
    next_fire,
    replacement_row,
    schedule_row,
    serve,
    triggered_job,
)
from .store import SharedScheduleRow, SharedStore


class ClientSchedules:
    """The schedule operations of one `Client` (its methods of the same
    names, which check that the client is open and delegate here, carry the
    contracts). `spawn(coro, name)` runs a task the client cancels when it
    closes; `retry_pause` is the pause of a serving loop after a store error."""

    def __init__(
        self,
        store: SharedStore,
        *,
        plugins: PluginManager,
        codec: JobCodec,
        strategy: Any,
        identity: str,
        id_suffix: str,
        spawn: Callable[[Coroutine[Any, Any, Any], str], None],
        retry_pause: float,
    ) -> None:
        self.store = store
        self.plugins = plugins
        self.codec = codec
        self.strategy = strategy
        self.identity = identity
        self._id_suffix = id_suffix
        self._spawn = spawn
        self._retry_pause = retry_pause

    async def add(
        self,
        job: Job,
        *,
        every: float | None,
        trigger: Mapping[str, Any] | None,
        start_in: float,
        allow_overlap: bool,
        times: int | None,
        key: str | None,
    ) -> str:
        """`Client.add_schedule`."""
        storable(job)
        now = time.time()
        row = schedule_row(
            self.codec,
            job,
            every=every,
            trigger=trigger,
            start_in=start_in,
            times=times,
            key=key,
            allow_overlap=allow_overlap,
            now=now,
            offset=now - time.monotonic(),
        )
        await self._serve(row)
        return row.schedule_id

    async def _serve(self, row: SharedScheduleRow) -> SharedScheduleRow:
        """Store the schedule `row` and serve it while the client is open."""
        stored: SharedScheduleRow = await self.store.add_schedule(row)
        self._spawn(
            serve(
                self.store,
                stored,
                codec=self.codec,
                strategy_key=self.strategy.key,
                submitted_by=self.identity,
                job_id_suffix=self._id_suffix,
                retry_pause=self._retry_pause,
            ),
            f"jobsched-schedule-{row.schedule_id}",
        )
        return stored

    async def update(
        self,
        schedule_id: str,
        *,
        args: Mapping[str, Any] | None,
        every: float | None,
        trigger: Mapping[str, Any] | None,
    ) -> str:
        """`Client.update_schedule`."""
        old = await self.find(schedule_id)
        if ended(old):
            raise ValueError(
                f"schedule {schedule_id} has ended (cancelled, or its last period fired): "
                "add a new schedule instead"
            )
        now = time.time()
        row = replacement_row(
            self.codec,
            old,
            args=args,
            every=every,
            trigger=trigger,
            now=now,
            offset=now - time.monotonic(),
        )
        if row.schedule_id == schedule_id:
            return schedule_id  # the same job and rule: nothing to change
        stored = await self._serve(row)
        if old.paused and not stored.paused:
            await self.store.set_schedule_paused(row.schedule_id, True)
        await self.store.deactivate_schedule(schedule_id)
        return row.schedule_id

    async def find(self, schedule_id: str) -> SharedScheduleRow:
        """The stored schedule with this id; `UnknownScheduleError` if none."""
        rows: list[SharedScheduleRow] = await self.store.schedules()
        for row in rows:
            if row.schedule_id == schedule_id:
                return row
        raise UnknownScheduleError(f"unknown schedule {schedule_id!r} in {self.store.url}")

    async def resume(self, schedule_id: str) -> bool:
        """`Client.resume_schedule`."""
        row = await self.find(schedule_id)
        if not row.paused:
            return False
        now = time.time()
        next_run: float | None = None
        if not ended(row) and row.next_run <= now:
            following = next_fire(row.trigger, row.next_run, now, self._resolve_trigger)
            next_run = math.inf if following is None else following
        return bool(await self.store.set_schedule_paused(schedule_id, False, next_run))

    async def trigger(self, schedule_id: str) -> str:
        """`Client.trigger_schedule`."""
        row = await self.find(schedule_id)
        # The stored job is copied, not built: no job type or task code needed here.
        job = triggered_job(
            row,
            now=time.time(),
            strategy_key=self.strategy.key,
            submitted_by=self.identity,
            job_id_suffix=self._id_suffix,
        )
        if not await self.store.trigger_schedule(schedule_id, job):
            raise UnknownScheduleError(f"unknown schedule {schedule_id!r} in {self.store.url}")
        return job.job_id

    @property
    def _resolve_trigger(self) -> Any:
        return lambda name: self.plugins.resolve("triggers", name)
