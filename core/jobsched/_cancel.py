"""Cooperative cancellation for jobs that run on threads."""

from __future__ import annotations

import threading

from . import _fork
from ._fork import leave_forked_child


class JobCancelledError(Exception):
    """Raised by `CancelToken.raise_if_cancelled` once the scheduler gave up on the attempt."""


class CancelToken:
    """Set when the scheduler cancels or times out the attempt a thread job is running.

    Python cannot stop a thread from outside: a thread job that must stop
    promptly polls its token between steps and returns (or raises) when it is
    set. Get the token of the running attempt with `cancel_token()`::

        class Export(BlockingJob):
            def run_sync(self):
                token = jobsched.cancel_token()
                for chunk in chunks:
                    token.raise_if_cancelled()
                    write(chunk)

    Whatever the attempt returns or raises after that is discarded: the
    scheduler has already recorded it as cancelled or timed out, and the pool
    thread is free again as soon as the job returns.
    """

    # The event is created only when a job blocks in `wait()`: a
    # threading.Event costs more to build than the rest of a thread job's
    # dispatch, and most tokens are never waited on. Under the GIL the
    # flag-then-event order in `cancel` and event-then-flag order in `wait`
    # cannot miss each other.
    __slots__ = ("_event", "_set", "job", "reason", "reporter")

    def __init__(self, job: object = None, reporter: object = None) -> None:
        self._set = False
        self._event: threading.Event | None = None
        self.reason: str | None = None
        #: The job of the attempt, and where its `jobsched.progress` reports go
        #: (the scheduler's; None outside a scheduler).
        self.job = job
        self.reporter = reporter

    def cancel(self, reason: str = "cancelled") -> None:
        """Set the token (the scheduler does this; tests may too)."""
        if self.reason is None:
            self.reason = reason
        self._set = True
        event = self._event
        if event is not None:
            event.set()

    @property
    def cancelled(self) -> bool:
        """True once the attempt was cancelled or timed out."""
        return self._set

    def wait(self, timeout: float | None = None) -> bool:
        """Block up to `timeout` seconds for cancellation: an interruptible ``time.sleep``."""
        event = self._event
        if event is None:
            event = self._event = threading.Event()
        if self._set:
            return True
        return event.wait(timeout)

    def raise_if_cancelled(self) -> None:
        """Raise `JobCancelledError` if the attempt was cancelled or timed out."""
        if self._set:
            raise JobCancelledError(self.reason or "cancelled")

    def __repr__(self) -> str:
        return f"CancelToken(cancelled={self.cancelled})"


_NEVER = CancelToken()  # what code outside a thread job gets: never set
_local = threading.local()


def cancel_token() -> CancelToken:
    """The cancellation token of the thread-job attempt running on this thread.

    Outside a thread job (on the event loop, in a process) it returns a token
    that is never set, so library code can poll unconditionally.
    """
    token: CancelToken | None = getattr(_local, "token", None)
    return token if token is not None else _NEVER


def run_with_token(token: CancelToken, fn: object) -> object:
    """Run ``fn()`` on this thread with `token` as its `cancel_token()`.

    A process forked by ``fn`` that returns here, or raises, ends at once
    (`leave_forked_child`): a copy of the worker must not go on.
    """
    _local.token = token
    started_in = _fork.pid
    try:
        result = fn()  # type: ignore[operator]
    except BaseException as exc:
        if _fork.pid != started_in:
            leave_forked_child(started_in, token.job, exc)
        raise
    finally:
        _local.token = None
    if _fork.pid != started_in:
        leave_forked_child(started_in, token.job, None)
    return result
