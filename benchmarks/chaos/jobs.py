"""The soak's job type, ``chaos``: a plugin module the worker processes load.

The soak installs it for its workers as a distribution on their
``PYTHONPATH`` (a ``*.dist-info`` folder whose entry point in the
``jobsched`` group names this module), as any third-party job type would be.

Every attempt appends ``start`` to the ledger (with ``started``, when the
worker started the attempt); an attempt that fails on
purpose appends ``fail``; a body that ran to completion appends ``end``
just before it returns. A cancelled or killed attempt appends nothing more.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import attrs

from benchmarks.chaos import ledger
from jobsched import AsyncJob, Job, hookimpl

#: What a job does: return at once, sleep, fail its first attempts, or tick
#: (the recurring schedule's job).
KINDS = ("noop", "sleep", "flaky", "doomed", "tick")


@attrs.define(eq=False)
class Chaos(AsyncJob):
    """Record the attempt, sleep `seconds`, fail while ``attempts <= fail_times``."""

    ledger: str
    kind: str = "noop"
    seconds: float = 0.0
    fail_times: int = 0

    def __attrs_post_init__(self) -> None:
        Job.__init__(self, f"chaos-{self.kind}")

    async def run(self) -> Any:
        attempt = self.attempts
        # When the worker started this attempt (its lease checked), on the wall
        # clock: a process that stalls right after has not run the body yet.
        started = time.time() - (time.monotonic() - (self.started_at or time.monotonic()))
        await self._record("start", attempt, started=started)
        if self.seconds:
            await asyncio.sleep(self.seconds)
        if attempt <= self.fail_times:
            await self._record("fail", attempt)
            raise RuntimeError(f"{self.kind} job fails attempt {attempt} on purpose")
        await self._record("end", attempt)
        return None

    async def _record(self, event: str, attempt: int, **extra: float) -> None:
        record = {"e": event, "job": self.job_id, "attempt": attempt, "kind": self.kind, **extra}
        await asyncio.to_thread(ledger.append, self.ledger, "worker", record)


@hookimpl
def jobsched_register_job_types(register: Any) -> None:
    register("chaos", Chaos)
