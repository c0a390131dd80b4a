"""The ``process`` executor: runs ``job.run_sync()`` in a process pool."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import pickle
import threading
from collections.abc import Awaitable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from jobsched import Job, NotPicklableError, hookimpl, progress_reporter, progress_sender
from jobsched.hookspecs import Register


class ProcessExecutor:
    """A lazily created process pool, so a scheduler of async jobs never forks.

    The job is pickled into a worker process and only its return value comes
    back; state the job changes over there is lost. ProcessPoolExecutor cannot
    kill one task: a timed-out or cancelled job is abandoned, not stopped.
    A job, arguments or result that cannot be pickled fails the attempt with
    `NotPicklableError`, which is not retried: no retry can fix it.

    `jobsched.progress` works in the worker processes: their reports come
    back over a queue the pool's processes share, read by one thread here.
    """

    def __init__(self, workers: int = 2) -> None:
        self.max_workers = max(1, min(workers, os.cpu_count() or 1))
        self._pool: ProcessPoolExecutor | None = None
        self._reports: Any = None  # the queue progress reports come back on
        self._reader: threading.Thread | None = None
        # Job id -> (its progress reporter, the job), while its attempt runs.
        self._running: dict[str, tuple[Any, Job]] = {}
        # Job id -> the future its marker settles (see `_run`).
        self._markers: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = {}

    def invoke(self, job: Job) -> Awaitable[Any]:
        # Pickled here, not in the pool's feeder thread: there a pickling
        # error comes back looking like any error the job might raise.
        try:
            payload = pickle.dumps(job)
        except Exception as exc:
            raise NotPicklableError(
                f"{job!r} cannot run on the process executor: it is not picklable "
                f"({type(exc).__name__}: {exc})"
            ) from exc
        pool = self._pool
        if pool is None:
            pool = self._start_pool()
        return self._run(pool, job, payload)

    async def _run(self, pool: ProcessPoolExecutor, job: Job, payload: bytes) -> Any:
        job_id = job.job_id
        loop = asyncio.get_running_loop()
        self._running[job_id] = (progress_reporter(), job)
        try:
            result, reported = await loop.run_in_executor(pool, run_pickled, payload, job_id)
            if reported:
                # Its reports are in the queue ahead of a marker put now: once
                # the reader reaches the marker, they are with the scheduler.
                reached = self._markers[job_id] = (loop, loop.create_future())
                self._reports.put(("reached", job_id))
                await reached[1]
            return result
        finally:
            self._running.pop(job_id, None)

    def _start_pool(self) -> ProcessPoolExecutor:
        context = multiprocessing.get_context()
        self._reports = context.SimpleQueue()
        self._pool = ProcessPoolExecutor(
            max_workers=self.max_workers,
            mp_context=context,
            initializer=_set_reports,
            initargs=(self._reports,),
        )
        self._reader = threading.Thread(
            target=self._read_reports,
            args=(self._reports,),
            name="jobsched-process-progress",
            daemon=True,
        )
        self._reader.start()
        return self._pool

    def _read_reports(self, reports: Any) -> None:
        """The reader thread: hands each report to the scheduler of its job."""
        while True:
            report = reports.get()
            if report is None:
                return
            if report[0] == "reached":
                loop, reached = self._markers.pop(report[1])
                loop.call_soon_threadsafe(_settle, reached)
                continue
            job_id, done, total, message = report
            running = self._running.get(job_id)
            if running is not None and running[0] is not None:
                running[0].report_threadsafe(running[1], done, total, message)

    def shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
            self._reports.put(None)  # ends the reader thread
            self._reports = self._reader = None


_reports: Any = None  # in a worker process: the queue back to the scheduler


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _set_reports(reports: Any) -> None:
    global _reports
    _reports = reports


def run_pickled(payload: bytes, job_id: str) -> tuple[Any, bool]:
    """In the worker process: unpickle the job, run it, check its result can go
    back; returns it, and whether the job reported progress."""
    reports = _reports

    def send(done: float, total: float | None, message: str | None) -> None:
        reports.put((job_id, done, total, message))

    with progress_sender(send) as sent:
        result = _run_unpickled(payload)
    return result, sent()


def _run_unpickled(payload: bytes) -> Any:
    try:
        job = pickle.loads(payload)
    except Exception as exc:
        raise NotPicklableError(
            f"the job cannot be unpickled in the worker process ({type(exc).__name__}: {exc}); "
            "its class and function must be importable by module and name"
        ) from None
    result = job.run_sync()
    # Pickled once more to check it: a result the pool cannot send back would
    # otherwise fail with an error that looks like the job's own.
    try:
        pickle.dumps(result)
    except Exception as exc:
        raise NotPicklableError(
            f"{job!r} returned a result that cannot be pickled back ({type(exc).__name__}: {exc})"
        ) from None
    return result


@hookimpl
def jobsched_register_executors(register: Register) -> None:
    register("process", ProcessExecutor)
