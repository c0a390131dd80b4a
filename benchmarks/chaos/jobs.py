"""The soak's job types, ``chaos`` and ``chaos-thread``: a plugin module the worker processes load.

The soak installs it for its workers as a distribution on their
``PYTHONPATH`` (a ``*.dist-info`` folder whose entry point in the
``jobsched`` group names this module), as any third-party job type would be.

Every attempt appends ``start`` to the ledger (with ``started``, when the
worker started the attempt); an attempt that fails on
purpose appends ``fail``; a body that ran to completion appends ``end``
just before it returns. A cancelled or killed attempt appends nothing more.

A job with a `fault` misbehaves on purpose (the soak's job faults,
docs/reliability.md): ``nul_result`` returns text no PostgreSQL column can
hold, ``nul_error`` raises it, ``spin`` spins the event loop forever (a
poison job), ``block`` (a ``chaos-thread`` job) blocks its thread forever,
``fork`` forks a child that exits the way a program does (``sys.exit``, in a
copy of the worker), ``print`` prints `size` bytes.

In a worker (``CHAOS_LEDGER`` set) the module also beats: every
`HEARTBEAT` seconds the worker's event loop appends an ``alive`` record, so
the soak sees how long a loop was ever blocked.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
import time
from typing import Any

import attrs

from benchmarks.chaos import ledger
from jobsched import AsyncJob, BlockingJob, Job, hookimpl

#: What a job does: return at once, sleep, fail its first attempts, or tick
#: (the recurring schedule's job); a ``chaos-thread`` job does it in a thread.
KINDS = ("noop", "sleep", "flaky", "doomed", "tick", "thread")
#: Text no PostgreSQL text or jsonb value can hold.
NUL = "bad \x00 byte"
#: Seconds between two heartbeats of a worker's event loop.
HEARTBEAT = 0.25
#: Seconds a ``fork`` job waits for its child before killing it.
FORK_CHILD_WAIT = 5.0


def wall_started(job: Job) -> float:
    """When the worker started this attempt (its lease checked), on the wall
    clock: a process that stalls right after has not run the body yet."""
    return time.time() - (time.monotonic() - (job.started_at or time.monotonic()))


@attrs.define(eq=False)
class Chaos(AsyncJob):
    """Record the attempt, sleep `seconds`, fail while ``attempts <= fail_times``."""

    ledger: str
    kind: str = "noop"
    seconds: float = 0.0
    fail_times: int = 0
    #: A fault to commit instead of the body's usual work ("": none).
    fault: str = ""
    #: Bytes a ``print`` fault prints.
    size: int = 0

    def __attrs_post_init__(self) -> None:
        Job.__init__(self, f"chaos-{self.fault or self.kind}")

    async def run(self) -> Any:
        attempt = self.attempts
        await self._record("start", attempt, started=wall_started(self))
        if self.fault:
            result = await self._misbehave(attempt)
            await self._record("end", attempt)
            return result
        if self.seconds:
            await asyncio.sleep(self.seconds)
        if attempt <= self.fail_times:
            await self._record("fail", attempt)
            raise RuntimeError(f"{self.kind} job fails attempt {attempt} on purpose")
        await self._record("end", attempt)
        return None

    async def _misbehave(self, attempt: int) -> Any:
        if self.fault == "nul_result":
            return NUL
        if self.fault == "nul_error":
            await self._record("fail", attempt)
            raise ValueError(NUL)
        if self.fault == "spin":
            while True:  # no await: the loop never gets control back
                pass
        if self.fault == "print":
            print("x" * self.size, flush=True)
            return None
        if self.fault == "fork":
            return await self._fork()
        raise ValueError(f"unknown chaos fault {self.fault!r}")

    async def _fork(self) -> Any:
        pid = os.fork()
        if pid == 0:
            # A child that ends as a program does, unwinding the worker's
            # stack it was forked in (the worker's own shutdown, in a copy).
            sys.exit(0)
        await self._record("forked", self.attempts, child=pid)
        waiter = asyncio.ensure_future(asyncio.to_thread(os.waitpid, pid, 0))
        done, _ = await asyncio.wait({waiter}, timeout=FORK_CHILD_WAIT)
        if not done:
            os.kill(pid, signal.SIGKILL)
        _, status = await waiter
        await self._record("child", self.attempts, child=pid, status=status, killed=not done)
        return None

    async def _record(self, event: str, attempt: int, **extra: Any) -> None:
        await asyncio.to_thread(record, self.ledger, event, self, attempt, **extra)


@attrs.define(eq=False)
class ChaosThread(BlockingJob):
    """`Chaos` in a thread: sleep `seconds`, or block forever (``fault="block"``)."""

    ledger: str
    kind: str = "thread"
    seconds: float = 0.0
    fault: str = ""

    def __attrs_post_init__(self) -> None:
        Job.__init__(self, f"chaos-{self.fault or self.kind}")

    def run_sync(self) -> Any:
        attempt = self.attempts
        record(self.ledger, "start", self, attempt, started=wall_started(self))
        if self.fault == "block":
            threading.Event().wait()  # never set: the thread is never free again
        time.sleep(self.seconds)
        record(self.ledger, "end", self, attempt)
        return None


def record(folder: str, event: str, job: Chaos | ChaosThread, attempt: int, **extra: Any) -> None:
    """One ledger line of `job`'s attempt (blocking: fsync'd)."""
    kind = job.fault or job.kind
    ledger.append(
        folder, "worker", {"e": event, "job": job.job_id, "attempt": attempt, "kind": kind, **extra}
    )


@hookimpl
def jobsched_register_job_types(register: Any) -> None:
    register("chaos", Chaos)
    register("chaos-thread", ChaosThread)


# ── the worker's heartbeat ─────────────────────────────────────────────
_beats: dict[int, asyncio.Task[None]] = {}


@hookimpl
def jobsched_scheduler_started(scheduler: Any) -> None:
    folder = os.environ.get("CHAOS_LEDGER")
    if folder:
        _beats[id(scheduler)] = asyncio.get_running_loop().create_task(_beat(folder))


@hookimpl
def jobsched_scheduler_stopped(scheduler: Any) -> None:
    task = _beats.pop(id(scheduler), None)
    if task is not None:
        task.cancel()


async def _beat(folder: str) -> None:
    while True:
        # Not fsync'd: a beat only needs to survive the process, not the machine.
        ledger.append(folder, "alive", {"e": "alive"}, sync=False)
        await asyncio.sleep(HEARTBEAT)
