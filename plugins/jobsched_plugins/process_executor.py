"""The ``process`` executor: runs ``job.run_sync()`` in a process pool."""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import pickle
import threading
from collections.abc import Awaitable
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

import structlog

from jobsched import (
    Job,
    JobPriority,
    JobStatus,
    NotPicklableError,
    RetryPolicy,
    hookimpl,
    progress_reporter,
    progress_sender,
)
from jobsched.hookspecs import Register

logger = structlog.get_logger("jobsched.process")


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
        # Calls a timeout or cancel gave up on that still run in a pool
        # process: (the job, a future settled when the call ends), oldest first.
        self._abandoned: list[tuple[Job, asyncio.Future[None]]] = []

    def invoke(self, job: Job) -> Awaitable[Any]:
        # Pickled here, not in the pool's feeder thread: there a pickling
        # error comes back looking like any error the job might raise.
        try:
            payload = pickle.dumps(pack_job(job))
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
        call = pool.submit(run_pickled, payload, job_id)
        try:
            try:
                result, reported = await asyncio.wrap_future(call)
            except asyncio.CancelledError:
                if not call.cancel() and not call.done():
                    self._abandon(job, call, loop)
                raise
            if reported:
                # Its reports are in the queue ahead of a marker put now: once
                # the reader reaches the marker, they are with the scheduler.
                reached = self._markers[job_id] = (loop, loop.create_future())
                self._reports.put(("reached", job_id))
                await reached[1]
            return result
        finally:
            self._running.pop(job_id, None)

    def _abandon(self, job: Job, call: Future[Any], loop: asyncio.AbstractEventLoop) -> None:
        ended: asyncio.Future[None] = loop.create_future()
        entry = (job, ended)
        self._abandoned.append(entry)
        logger.warning(
            "process job abandoned: its call still runs",
            job_id=job.job_id,
            job=job.name,
            abandoned=len(self._abandoned),
            hint="its pool process is busy until it returns; the subprocess executor kills",
        )

        def call_ended(_: Future[Any]) -> None:  # on the pool's thread
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
                loop.call_soon_threadsafe(self._ended, entry)

        call.add_done_callback(call_ended)

    def _ended(self, entry: tuple[Job, asyncio.Future[None]]) -> None:
        with contextlib.suppress(ValueError):
            self._abandoned.remove(entry)
        logger.info("abandoned process job ended", job_id=entry[0].job_id, job=entry[0].name)
        _settle(entry[1])

    def still_running(self, job: Job) -> asyncio.Future[None] | None:
        """A future done once `job`'s abandoned call ends; None if none runs."""
        for abandoned, ended in reversed(self._abandoned):
            if abandoned is job:
                return ended
        return None

    def abandoned(self) -> list[str]:
        """The ids of the jobs whose abandoned calls still run, oldest first."""
        return [job.job_id for job, _ in self._abandoned]

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


# ── What crosses to the worker process ─────────────────────────────────
# Pickling a job object as it is costs ~18 us on the loop thread, most of it
# in pickle's generic path for a slotted object holding enums and an attrs
# retry policy. A job is sent instead as its class and its set slots (and
# __dict__), with the enums as their values and the default retry policy
# left out: the unpickler sets the slots in C, and `unpack_job` puts the
# three values back. A class that pickles itself its own way (__reduce__,
# __getstate__...; attrs job types) is pickled as it is.

_DEFAULT_RETRY = RetryPolicy()
_STATUSES = {status.value: status for status in JobStatus}
_PRIORITIES = {int(priority): priority for priority in JobPriority}
_slot_names: dict[type, tuple[str, ...] | None] = {}
_OWN_PICKLING = ("__reduce__", "__reduce_ex__", "__getstate__", "__setstate__", "__getnewargs__")


def _names_to_pack(cls: type) -> tuple[str, ...] | None:
    """The slot names of `cls` to send, or None if `cls` pickles itself its own way."""
    try:
        return _slot_names[cls]
    except KeyError:
        pass
    plain = all(getattr(cls, name, None) is getattr(object, name, None) for name in _OWN_PICKLING)
    names = _all_slots(cls) if plain else None
    _slot_names[cls] = names
    return names


def _all_slots(cls: type) -> tuple[str, ...]:
    """The names of every slot `cls` and its bases declare, as `getattr` finds them."""
    found: list[str] = []
    for klass in cls.__mro__:
        slots = klass.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name in ("__dict__", "__weakref__"):
                continue
            if name.startswith("__") and not name.endswith("__"):
                name = f"_{klass.__name__.lstrip('_')}{name}"  # mangled
            if name not in found:
                found.append(name)
    return tuple(found)


def _new_job(cls: Any) -> Any:
    return cls.__new__(cls)


class _Packed:
    """Pickles as `job`'s class, then its slots set by the unpickler (no ``__init__``)."""

    __slots__ = ("cls", "extra", "slots")

    def __init__(self, cls: type, slots: dict[str, Any], extra: dict[str, Any] | None) -> None:
        self.cls = cls
        self.slots = slots
        self.extra = extra

    def __reduce__(self) -> tuple[Any, ...]:
        return (_new_job, (self.cls,), (self.extra, self.slots))


_UNSET = object()
_RETRY_LEFT_OUT = 0  # stands for the default retry policy in a packed job


def pack_job(job: Job) -> Any:
    """What to pickle for the worker process to rebuild `job` (see `unpack_job`)."""
    cls = type(job)
    names = _names_to_pack(cls)
    if names is None:
        return job
    slots: dict[str, Any] = {}
    for name in names:
        value = getattr(job, name, _UNSET)
        if value is not _UNSET:  # an unset slot stays unset
            slots[name] = value
    slots["status"] = job.status.value
    slots["priority"] = int(job.priority)
    if slots.get("retry") == _DEFAULT_RETRY:
        slots["retry"] = _RETRY_LEFT_OUT
    return _Packed(cls, slots, getattr(job, "__dict__", None) or None)


def unpack_job(job: Any) -> Any:
    """The job `pack_job` packed, as unpickled, with its enums and retry policy back."""
    status = job.status
    if status.__class__ is str:
        job.status = _STATUSES[status]
        priority = job.priority
        job.priority = _PRIORITIES.get(priority, priority)
        if job.retry == _RETRY_LEFT_OUT:
            job.retry = _DEFAULT_RETRY
    return job


#: Results that always pickle: not pickled twice to find out (the check below).
_PICKLABLE = frozenset({type(None), bool, int, float, complex, str, bytes})


def _run_unpickled(payload: bytes) -> Any:
    try:
        job = unpack_job(pickle.loads(payload))
    except Exception as exc:
        raise NotPicklableError(
            f"the job cannot be unpickled in the worker process ({type(exc).__name__}: {exc}); "
            "its class and function must be importable by module and name"
        ) from None
    result = job.run_sync()
    if type(result) in _PICKLABLE:
        return result
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
