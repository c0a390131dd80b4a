"""Worker processes: run the jobs of a shared store until told to stop.

``jobsched worker --store URL`` is `run_worker`; a program can run one too::

    asyncio.run(run_worker("postgresql://host/db", workers=8))
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable
from functools import partial
from types import FrameType
from typing import Any

import structlog

from . import JobScheduler, JobStatus
from ._watchdog import EXIT_LOOP_BLOCKED, LoopWatchdog

__all__ = ["EXIT_LOOP_BLOCKED", "run_worker"]

logger = structlog.get_logger("jobsched.worker")


async def run_worker(
    store: str | Any,
    *,
    workers: int = 4,
    plugins: Any = None,
    strategy: Any = None,
    grace: float = 30.0,
    stop: asyncio.Event | None = None,
    on_started: Callable[[JobScheduler], None] | None = None,
    result_ttl: float | None = None,
    retention: float | None = None,
    block_limit: float | None = None,
) -> None:
    """Run a worker process on a shared store until `stop` is set (or SIGINT/SIGTERM).

    This is ``jobsched worker --store URL --workers N``. Stopping is warm
    first: nothing more is claimed, the claimed jobs that have not started
    are handed back, and the running attempts get `grace` seconds to
    finish. Then it is cold: the attempts still running are interrupted and
    handed back too (another process runs them again, their attempt
    counted). A second SIGINT/SIGTERM makes it cold at once.

    `block_limit` (seconds; ``--block-limit``) starts a loop watchdog: an
    event loop blocked longer than that (a job that never awaits), or
    blocked when a shutdown's grace is over, ends the process with exit
    status `EXIT_LOOP_BLOCKED`, after one log line naming the job(s)
    running with the loop's stack. Its leases then expire and other workers
    take its jobs. None (the default here): no watchdog.

    `result_ttl` and `retention` are ``jobsched worker --result-ttl`` and
    ``--retention`` (seconds; see `JobScheduler`).
    """
    scheduler = JobScheduler(
        strategy,
        num_workers=workers,
        plugins=plugins,
        store=store,
        shared=True,
        result_ttl=result_ttl,
        retention=retention,
    )
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    signals = _Signals(loop, stop, grace)
    signals.install()
    watchdog: LoopWatchdog | None = None
    try:
        await scheduler.start()
        if block_limit is not None:
            watchdog = LoopWatchdog(
                loop, limit=block_limit, culprits=partial(_culprits, scheduler, loop)
            )
            signals.watchdog = watchdog
            watchdog.start()
        try:
            if on_started is not None:
                on_started(scheduler)
            await stop.wait()
        finally:
            await _shut_down(scheduler, grace, signals, watchdog)
    finally:
        signals.restore()
        if watchdog is not None:
            watchdog.close()


async def _shut_down(
    scheduler: JobScheduler, grace: float, signals: _Signals, watchdog: LoopWatchdog | None
) -> None:
    """Warm, then cold: see `run_worker`."""
    if watchdog is not None:
        watchdog.shutdown_asked(grace)
    stopping = asyncio.ensure_future(scheduler.stop())
    if scheduler.running:
        logger.info(
            "stopping: running jobs may finish within the grace; "
            "a second signal hands them back at once",
            running=scheduler.running,
            grace=grace,
        )
    at_once = asyncio.ensure_future(signals.at_once.wait())
    try:
        await asyncio.wait({stopping, at_once}, timeout=grace, return_when=asyncio.FIRST_COMPLETED)
    finally:
        at_once.cancel()
    if not stopping.done():
        # Interrupt the attempts (not cancel the jobs): the backend hands
        # them back, and another process runs them again.
        logger.warning(
            "handing back the running jobs",
            running=scheduler.running,
            why="a second signal" if signals.at_once.is_set() else "the grace is over",
        )
        scheduler.interrupt_running()
    await stopping


class _Signals:
    """SIGINT/SIGTERM, counted: the first stops the worker, a second skips the grace.

    The handler is a plain signal handler, not the loop's: it runs on the
    main thread between any two bytecodes, even while a job blocks the
    loop, so the watchdog learns of the shutdown anyway.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, stop: asyncio.Event, grace: float) -> None:
        self._loop = loop
        self._stop = stop
        self._grace = grace
        self.at_once = asyncio.Event()
        self.watchdog: LoopWatchdog | None = None
        self._count = 0
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(ValueError):  # not the main thread: `stop` only
                self._previous[sig] = signal.signal(sig, self._handle)

    def restore(self) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self._count += 1
        at_once = self._count > 1
        if self.watchdog is not None:
            self.watchdog.shutdown_asked(self._grace, at_once=at_once)
        with contextlib.suppress(RuntimeError):  # the loop is closed: nothing left to stop
            self._loop.call_soon_threadsafe(self._on_loop, at_once)

    def _on_loop(self, at_once: bool) -> None:
        self._stop.set()
        if at_once:
            self.at_once.set()


def _culprits(scheduler: JobScheduler, loop: asyncio.AbstractEventLoop) -> list[str]:
    """The job blocking `loop` (called on the watchdog's thread, the loop blocked):
    the one its current task runs, else every running job."""
    job = scheduler.attempt_in(asyncio.current_task(loop))
    if job is not None:
        jobs = [job]
    else:
        jobs = [j for j in scheduler.jobs() if j.status is JobStatus.RUNNING]
    return [f"{j.job_id} ({j.name})" for j in jobs]
