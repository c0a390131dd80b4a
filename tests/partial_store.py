"""A third party's store that serves only two roles: ``submit`` and ``lookup``.

What an engine that only queues jobs for someone else (a message bus, say)
would write to take `Client.submit` and `Client.get`: no claims, no operator
actions, no schedules. Registered as the ``partial`` store plugin (URL
``partial://NAME``); the stores of one name share their jobs in this process.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Sequence
from typing import ClassVar

from jobsched import hookimpl
from jobsched.hookspecs import Register
from jobsched.store import NewJob, SharedJobRow, Snapshot, StoreContext


class PartialStore:
    durable = True
    shared = True
    queues: ClassVar[dict[str, dict[str, SharedJobRow]]] = {}

    def __init__(self, url: str) -> None:
        self.url = url
        self._jobs = self.queues.setdefault(url, {})

    async def open(self, context: StoreContext) -> Snapshot:
        return Snapshot()

    async def close(self) -> None:
        pass

    # ── submit ─────────────────────────────────────────────────────────
    async def insert(self, jobs: Sequence[NewJob]) -> list[str]:
        for job in jobs:
            self._jobs[job.job_id] = SharedJobRow(
                job_id=job.job_id,
                key=job.key,
                type=job.type,
                args=job.args,
                options=job.options,
                status="pending",
                attempts=0,
                run_at=job.run_at,
                submitted_at=job.submitted_at,
                seq=len(self._jobs) + 1,
                sort_key=job.sort_key,
                unmet=len(job.depends_on),
                lease_owner=None,
                lease_expires=None,
                cancel_requested=False,
                result=None,
                last_error=None,
                schedule_id=job.schedule_id,
                submitted_by=job.submitted_by,
                started_at=None,
                finished_at=None,
                unique_key=job.unique_key,
                depends_on=job.depends_on,
                trigger_rule=job.trigger_rule,
            )
        return [job.job_id for job in jobs]

    # ── lookup ─────────────────────────────────────────────────────────
    async def get(self, job_id: str) -> SharedJobRow | None:
        return self._jobs.get(job_id)

    async def jobs(self, job_ids: Sequence[str] | None = None) -> list[SharedJobRow]:
        ids = self._jobs if job_ids is None else job_ids
        return [self._jobs[i] for i in ids if i in self._jobs]

    async def dependents(self, job_id: str) -> list[str] | None:
        if job_id not in self._jobs:
            return None
        return [row.job_id for row in self._jobs.values() if job_id in row.depends_on]

    async def dependents_of(self, job_ids: Sequence[str]) -> dict[str, list[str]]:
        return {
            job_id: [row.job_id for row in self._jobs.values() if job_id in row.depends_on]
            for job_id in job_ids
            if job_id in self._jobs
        }

    async def unfinished(self, job_ids: Sequence[str]) -> int:
        return sum(1 for row in await self.jobs(job_ids) if row.finished_at is None)

    async def wait_finished(self, timeout: float) -> bool:
        # Nothing ever finishes here: no process claims these jobs.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.Event().wait(), None if math.isinf(timeout) else timeout)
        return False


@hookimpl
def jobsched_register_stores(register: Register) -> None:
    register("partial", PartialStore)
