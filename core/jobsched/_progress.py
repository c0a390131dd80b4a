"""Progress reports from inside a running job: `progress()` and its throttle.

Where the report goes depends on where the job runs, and finding that out
costs the job path nothing:

- an async job runs in a worker task, whose context holds the worker's
  reporter (set once when the worker starts, inherited by tasks the job
  creates);
- a thread job's `CancelToken` (set per attempt by the thread executor) names
  its job and loop: the report crosses to the loop thread, one in flight at a
  time per job (later values overwrite the one waiting);
- a job in another process (the process and subprocess executors) gets a
  `set_child_reporter` there, which sends reports back over the executor's
  channel, throttled on that side already.

The scheduler keeps the latest value of every report and throttles what it
passes on (hooks, stores) with `ProgressThrottle`.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from ._cancel import cancel_token
from ._errors import SchedulerError

#: At most one write per this many seconds per job (4 per second).
PROGRESS_INTERVAL = 0.25

#: ``(done, total, message)`` as a job reported it.
ProgressValue = tuple[float, "float | None", "str | None"]


class ProgressReporter(Protocol):
    """Where a worker's reports go (the kernel gives one to each worker)."""

    def report_current(self, done: float, total: float | None, message: str | None) -> None:
        """Report for the attempt this worker runs now; `SchedulerError` if none."""

    def report_threadsafe(
        self, job: Any, done: float, total: float | None, message: str | None
    ) -> None:
        """Report for `job` from any thread."""


#: The reporter of the worker task this code runs in (async jobs).
_worker_reporter: contextvars.ContextVar[ProgressReporter | None] = contextvars.ContextVar(
    "jobsched_progress_reporter", default=None
)

#: In a worker process or subprocess: how to send a report to the parent.
_child_reporter: Callable[[float, float | None, str | None], None] | None = None

_OUTSIDE = "progress() called outside a running job"


def progress(done: float, total: float | None = None, message: str | None = None) -> None:
    """Report how far the running job is: `done` of `total` (None: unknown), and a note.

    Call it from inside a job on any executor (async, thread, process,
    subprocess) as often as you like: at most 4 reports per second per job
    reach the store and the ``jobsched_job_progress`` hook, and the latest
    one always does (within 0.25 s, or when the attempt ends). Outside a
    running job it raises `SchedulerError`. A bad value raises `TypeError`
    or `ValueError` naming it.
    """
    value = check_progress(done, total, message)
    child = _child_reporter
    if child is not None:
        child(*value)
        return
    token = cancel_token()
    if token.reporter is not None:
        token.reporter.report_threadsafe(token.job, *value)  # type: ignore[attr-defined]
        return
    reporter = _worker_reporter.get()
    if reporter is None:
        raise SchedulerError(_OUTSIDE)
    reporter.report_current(*value)


def check_progress(done: Any, total: Any, message: Any) -> ProgressValue:
    """The checked ``(done, total, message)`` of a `progress` call."""
    if isinstance(done, bool) or not isinstance(done, int | float) or not math.isfinite(done):
        raise TypeError(f"progress(): done must be a finite number, got {done!r}")
    if total is not None and (
        isinstance(total, bool) or not isinstance(total, int | float) or not math.isfinite(total)
    ):
        raise TypeError(f"progress(): total must be a finite number or None, got {total!r}")
    if done < 0 or (total is not None and total < 0):
        raise ValueError(f"progress(): done and total must be >= 0, got {done!r} of {total!r}")
    if message is not None and not isinstance(message, str):
        raise TypeError(f"progress(): message must be a string or None, got {message!r}")
    return (done, total, message)


def set_worker_reporter(reporter: ProgressReporter) -> None:
    """Called once by each worker task, on start: async jobs it runs report there."""
    _worker_reporter.set(reporter)


def progress_reporter() -> ProgressReporter | None:
    """Where progress reports of the job being invoked go (None outside a worker).

    For executors: call it in ``invoke`` (on the loop, in the worker's task)
    and hand it to the job wherever it runs; reports then reach the scheduler
    through ``reporter.report_threadsafe(job, done, total, message)``, from
    any thread. The thread executor gives it to the job's `CancelToken`.
    """
    return _worker_reporter.get()


def set_child_reporter(send: Callable[[float, float | None, str | None], None] | None) -> None:
    """In a worker process: where `progress` sends (None: not in a job)."""
    global _child_reporter
    _child_reporter = send


class Later(Protocol):
    def cancel(self) -> object: ...


class ProgressThrottle:
    """Passes values on at most once per `interval`; the latest is never lost.

    A value that comes too soon waits, overwritten by later ones, and is
    passed on when the interval is over (`later` arms that) or at `flush`.
    `now` and `later(delay, fn)` come from the caller: the loop's clock in
    the scheduler, a timer thread in a worker process, a fake in tests.
    """

    __slots__ = ("_last", "_later", "_now", "_pending", "_send", "_timer", "interval")

    def __init__(
        self,
        send: Callable[[Any], None],
        now: Callable[[], float],
        later: Callable[[float, Callable[[], None]], Later],
        interval: float = PROGRESS_INTERVAL,
    ) -> None:
        self._send = send
        self._now = now
        self._later = later
        self.interval = interval
        self._last = -math.inf
        self._pending: Any = None
        self._timer: Later | None = None

    def update(self, value: Any) -> None:
        """Pass `value` on now, or as soon as the interval allows."""
        if self._timer is not None:
            self._pending = value  # the armed timer sends the latest
            return
        now = self._now()
        wait = self._last + self.interval - now
        if wait <= 0:
            self._last = now
            self._send(value)
            return
        self._pending = value
        self._timer = self._later(wait, self._due)

    def _due(self) -> None:
        self._timer = None
        value, self._pending = self._pending, None
        if value is not None:
            self._last = self._now()
            self._send(value)

    def flush(self) -> None:
        """Pass on the value still waiting, if any, now (the attempt ended)."""
        timer = self._timer
        if timer is not None:
            timer.cancel()
            self._due()


def thread_timer(delay: float, fn: Callable[[], None]) -> threading.Timer:
    """`ProgressThrottle`'s `later` outside an event loop: a daemon timer thread."""
    timer = threading.Timer(delay, fn)
    timer.daemon = True
    timer.start()
    return timer


def progress_sender(
    send: Callable[[float, float | None, str | None], None],
) -> contextlib.AbstractContextManager[Callable[[], bool]]:
    """In a process that runs one job for a scheduler elsewhere: while inside,
    `progress` calls ``send(done, total, message)``, throttled, and the last
    value is sent on the way out. Yields ``sent()``: whether any report came.

    For executors that run a job in another process (the process and
    subprocess executors use it): `send` writes to the channel back to the
    scheduler, where ``progress_reporter().report_threadsafe`` takes it.
    """
    return _ProgressSender(send)


class _ProgressSender:
    """`progress_sender`'s context manager. Entered once per job in a worker
    process, so it costs a job that reports nothing one lock: the throttle
    (closures, a timer later) is built at the first report."""

    __slots__ = ("_lock", "_send", "_throttle")

    def __init__(self, send: Callable[[float, float | None, str | None], None]) -> None:
        self._send = send
        self._lock = threading.Lock()  # the job's thread and the throttle's timer thread
        self._throttle: ProgressThrottle | None = None

    def __enter__(self) -> Callable[[], bool]:
        set_child_reporter(self._report)
        return self._reported

    def __exit__(self, *exc_info: object) -> None:
        set_child_reporter(None)
        if self._throttle is not None:
            with self._lock:
                self._throttle.flush()

    def _reported(self) -> bool:
        return self._throttle is not None

    def _report(self, done: float, total: float | None, message: str | None) -> None:
        with self._lock:
            throttle = self._throttle
            if throttle is None:
                send = self._send
                throttle = self._throttle = ProgressThrottle(
                    lambda value: send(*value), time.monotonic, self._later
                )
            throttle.update((done, total, message))

    def _later(self, delay: float, fn: Callable[[], None]) -> threading.Timer:
        lock = self._lock

        def locked() -> None:
            with lock:
                fn()

        return thread_timer(delay, locked)
