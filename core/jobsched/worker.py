"""Worker processes: run the jobs of a shared store until told to stop.

``jobsched worker --store URL`` is `run_worker`; a program can run one too::

    asyncio.run(run_worker("postgresql://host/db", workers=8))

A worker survives its jobs. A job that never gives the event loop back
(``async def spin(): while True: pass``, a blocking call in an async job)
stops everything the loop does: no lease is renewed, no timeout fires, no
signal is handled. `LoopWatchdog` sees it from a thread of its own and ends
the process (`EXIT_LOOP_BLOCKED`): its leases expire and other workers take
its jobs, so the store's bound on expired leases decides how often a poison
job may run. Stopping is warm, then cold (`run_worker`), and the watchdog
enforces the grace when the loop is blocked.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from types import FrameType
from typing import Any

import structlog

from . import JobScheduler, JobStatus

__all__ = ["EXIT_LOOP_BLOCKED", "run_worker"]

logger = structlog.get_logger("jobsched.worker")

#: The exit status of a worker its watchdog ended.
EXIT_LOOP_BLOCKED = 4

#: The most stack frames logged (the innermost ones: the job's).
STACK_FRAMES = 25

#: Seconds the watchdog's last log line may take before the process ends regardless.
LAST_WORDS = 2.0


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
    max_lease_expiries: int | None = None,
    max_build_refusals: int | None = None,
    queues: Iterable[str] | Mapping[str, int | None] | None = None,
) -> None:
    """Run a worker process on a shared store until `stop` is set (or
    SIGINT/SIGTERM, or an operator's stop request: ``jobsched workers stop
    ID``, `jobsched.Client.stop_worker`).

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
    ``--retention`` (seconds; see `JobScheduler`), `max_lease_expiries`
    ``--max-lease-expiries`` (None: the default, 3), `max_build_refusals`
    ``--max-build-refusals`` (None: the default, 5). `queues` are the
    queues it claims from (``--queue``; see `JobScheduler`): None, the
    ``"default"`` queue alone.
    """
    scheduler = JobScheduler(
        strategy,
        num_workers=workers,
        plugins=plugins,
        store=store,
        shared=True,
        result_ttl=result_ttl,
        retention=retention,
        max_lease_expiries=max_lease_expiries,
        max_build_refusals=max_build_refusals,
        queues=queues,
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
        # A worker that cannot go on (a store a newer jobsched migrated) stops
        # as on a signal, and `stop()` then raises why; so does one an
        # operator asked to stop through the store (``jobsched workers stop``).
        asked = asyncio.ensure_future(scheduler.kernel.wait_stop_asked())
        waits = [
            asyncio.ensure_future(stop.wait()),
            asyncio.ensure_future(scheduler.kernel.wait_failed()),
            asked,
        ]
        try:
            if on_started is not None:
                on_started(scheduler)
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            if asked.done() and not stop.is_set():
                logger.info("stopping: an operator asked (jobsched workers stop)")
        finally:
            for wait in waits:
                wait.cancel()
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
    if scheduler.kernel.running:
        logger.info(
            "stopping: running jobs may finish within the grace; "
            "a second signal hands them back at once",
            running=scheduler.kernel.running,
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
            running=scheduler.kernel.running,
            why="a second signal" if signals.at_once.is_set() else "the grace is over",
        )
        scheduler.kernel.workers.interrupt_running()
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
    job = scheduler.kernel.workers.attempt_in(asyncio.current_task(loop))
    if job is not None:
        jobs = [job]
    else:
        jobs = [j for j in scheduler.jobs() if j.status is JobStatus.RUNNING]
    return [f"{j.job_id} ({j.name})" for j in jobs]


class LoopWatchdog:
    """Ends the process when `loop` (running on the calling thread) is blocked
    longer than `limit` seconds, or past a shutdown's grace.

    The loop beats (a timer callback every `tick` seconds); the watchdog's
    thread counts the time it watched without a beat. Only time the thread
    was awake to see counts, so a stopped process (SIGSTOP) or a starved
    machine does not look like a blocked loop. `culprits()` names the job(s)
    running at the time (called on the watchdog's thread, while the loop is
    blocked). Start it on the loop's thread; `close` stops it.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        *,
        limit: float,
        culprits: Callable[[], list[str]],
    ) -> None:
        if not limit > 0:
            raise ValueError(f"the block limit must be more than 0 seconds, got {limit!r}")
        self.limit = limit
        self.tick = min(0.25, limit / 4)
        self._loop = loop
        self._loop_thread = threading.get_ident()
        self._culprits = culprits
        self._beats = 0
        self._beat_handle: asyncio.TimerHandle | None = None
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="jobsched-watchdog", daemon=True)
        # Set from the loop's thread by a signal handler, read by the watchdog's.
        self._stop_by: float | None = None  # monotonic deadline of a shutdown's grace
        self._stop_now = False

    def start(self) -> None:
        self._beat()
        self._thread.start()

    def close(self) -> None:
        """Stop watching (the worker has stopped)."""
        self._closing.set()
        if self._beat_handle is not None:
            self._beat_handle.cancel()
        self._thread.join(timeout=1.0)

    def shutdown_asked(self, grace: float, *, at_once: bool = False) -> None:
        """A shutdown began (`at_once`: a second signal asked to skip the grace).

        Safe in a signal handler, while the loop is blocked.
        """
        if self._stop_by is None:
            self._stop_by = time.monotonic() + grace
        if at_once:
            self._stop_now = True

    def _beat(self) -> None:
        self._beats += 1
        self._beat_handle = self._loop.call_later(self.tick, self._beat)

    def _watch(self) -> None:
        seen, blocked = self._beats, 0.0
        last = time.monotonic()
        while not self._closing.wait(self.tick):
            now = time.monotonic()
            # Counted only while this thread was there to see it.
            awake, last = min(now - last, 2 * self.tick), now
            if self._beats != seen:
                seen, blocked = self._beats, 0.0
                continue
            blocked += awake
            if blocked > self.limit:
                self._trip(
                    f"event loop blocked for {blocked:.1f}s (the block limit is {self.limit:g}s): "
                    "ending the worker; its jobs run again when their leases expire",
                    blocked,
                )
                return
            stop_by = self._stop_by
            stopped = stop_by is not None and (self._stop_now or now >= stop_by)
            if stopped and blocked >= 2 * self.tick:
                why = "a second signal" if self._stop_now else "the shutdown's grace is over"
                self._trip(
                    f"event loop blocked and {why}: ending the worker without handing its "
                    "jobs back; they run again when their leases expire",
                    blocked,
                )
                return

    def _trip(self, message: str, blocked: float) -> None:
        # Logging could wait on a stream the blocked loop holds: the process
        # ends a little later whatever happens.
        last_words = threading.Timer(LAST_WORDS, os._exit, (EXIT_LOOP_BLOCKED,))
        last_words.daemon = True
        last_words.start()
        try:
            logger.critical(
                message,
                jobs=", ".join(self._culprits()) or "none",
                blocked_for=round(blocked, 3),
                stack=self._loop_stack(),
            )
            sys.stderr.flush()
        finally:
            os._exit(EXIT_LOOP_BLOCKED)

    def _loop_stack(self) -> str:
        frame = sys._current_frames().get(self._loop_thread)
        if frame is None:
            return "(the loop's thread has ended)"
        return "".join(traceback.format_stack(frame, limit=STACK_FRAMES))
