"""An older version of the soak's task module, for the ``old_module`` fault.

What a worker not yet upgraded in a rolling deploy has installed: the
``chaos`` job type as it was before it grew its `fault` and `size` fields
(and no ``chaos-thread`` type at all). Every job the current producers store
carries those fields, so this version cannot build one. The soak starts a
worker with this module instead of `benchmarks.chaos.jobs` for a while
(docs/reliability.md); the jobs it claims must still run, elsewhere.
"""

from __future__ import annotations

import asyncio
from typing import Any

import attrs

from benchmarks.chaos import ledger
from benchmarks.chaos.jobs import jobsched_scheduler_started, jobsched_scheduler_stopped
from jobsched import AsyncJob, Job, hookimpl

__all__ = ["Chaos", "jobsched_scheduler_started", "jobsched_scheduler_stopped"]


@attrs.define(eq=False)
class Chaos(AsyncJob):
    """The old ``chaos``: record the attempt, sleep, fail its first attempts."""

    ledger: str
    kind: str = "noop"
    seconds: float = 0.0
    fail_times: int = 0

    def __attrs_post_init__(self) -> None:
        Job.__init__(self, f"chaos-{self.kind}")

    async def run(self) -> Any:
        attempt = self.attempts
        await self._record("start", attempt)
        if self.seconds:
            await asyncio.sleep(self.seconds)
        if attempt <= self.fail_times:
            await self._record("fail", attempt)
            raise RuntimeError(f"{self.kind} job fails attempt {attempt} on purpose")
        await self._record("end", attempt)
        return None

    async def _record(self, event: str, attempt: int) -> None:
        record = {"e": event, "job": self.job_id, "attempt": attempt, "kind": self.kind}
        await asyncio.to_thread(ledger.append, self.ledger, "worker", record)


@hookimpl
def jobsched_register_job_types(register: Any) -> None:
    register("chaos", Chaos)
