"""Jobs: what to run plus how to run it (the Command pattern)."""

from __future__ import annotations

import functools
import inspect
import itertools
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

from ._retry import RetryPolicy, RetryPolicyLike
from ._status import ConcurrencyModel, JobPriority, JobStatus

_job_ids = itertools.count(1)


def new_job_id() -> str:
    """A fresh kernel job id, ``job-N``."""
    return f"job-{next(_job_ids)}"


def reserve_job_ids(floor: int) -> None:
    """Make every later id ``job-N`` have N > `floor` (ids restored from a store)."""
    global _job_ids
    following = next(_job_ids)
    _job_ids = itertools.count(max(following, floor + 1))


DEFAULT_RETRY = RetryPolicy()
DEFAULT_TIMEOUT = 30.0


class Job(ABC):
    """What to run plus how to run it: priority, timeout, retry policy, deadline.

    Execution state (status, attempts, times, result, error) is written only by
    the scheduler, on its event-loop thread. A job stays picklable (no locks,
    tasks or open handles as attributes) so PROCESS jobs can be shipped to a
    worker process, and it is never mutated across that boundary.

    Subclass `AsyncJob`, `BlockingJob` or `CpuBoundJob`, or submit a plain
    function (see `JobScheduler.submit`).
    """

    model: ClassVar[ConcurrencyModel | str]

    # Slots keep a pending job small: a scheduler may hold a million of them.
    __slots__ = (
        "_spec",  # the JobSpec it was built from (jobsched.build_job); unset otherwise
        "attempts",
        "deadline",
        "finished_at",
        "job_id",
        "last_error",
        "name",
        "priority",
        "result",
        "retry",
        "run_at",
        "seq",
        "started_at",
        "status",
        "submitted_at",
        "timeout",
    )

    def __init__(
        self,
        name: str,
        *,
        priority: JobPriority | int = JobPriority.MEDIUM,
        timeout: float | None = DEFAULT_TIMEOUT,
        retry: RetryPolicyLike = DEFAULT_RETRY,
        deadline: float | None = None,
    ) -> None:
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout must be positive or None, got {timeout!r}")
        self.job_id: str = f"job-{next(_job_ids)}"
        self.name = name
        self.priority = JobPriority(priority)
        self.timeout = timeout
        self.retry = retry
        self.deadline = deadline  # monotonic seconds; used by EDF
        self.status = JobStatus.PENDING
        self.attempts = 0
        self.result: Any = None
        self.last_error: str | None = None
        self.submitted_at = 0.0  # monotonic, set on submit
        self.run_at = 0.0  # earliest monotonic time it may start
        self.seq = 0  # submit order, the universal tie-breaker
        self.started_at: float | None = None
        self.finished_at: float | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # An @attrs.define job type: wrap attrs' field-only __init__ so the job
        # also takes the job options and gets its execution state.
        if "__attrs_attrs__" in cls.__dict__:
            from ._jobtypes import adapt_attrs_job

            adapt_attrs_job(cls)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.job_id}, {self.name!r}, {self.status.value})"


class AsyncJob(Job):
    """A job whose `run` coroutine executes on the event loop."""

    __slots__ = ()
    model = ConcurrencyModel.ASYNC

    @abstractmethod
    async def run(self) -> Any:
        """Do the work. Return a result, or raise to fail this attempt."""


class BlockingJob(Job):
    """Synchronous work, run off the event loop in the thread pool."""

    __slots__ = ()
    model = ConcurrencyModel.THREAD

    @abstractmethod
    def run_sync(self) -> Any:
        """Do the work. Return a result, or raise to fail this attempt."""


class CpuBoundJob(BlockingJob):
    """Synchronous CPU-heavy work, run in the process pool (escapes the GIL)."""

    __slots__ = ()
    model = ConcurrencyModel.PROCESS


class FunctionJob(Job):
    """A plain function or coroutine function scheduled as a job.

    Built by ``scheduler.submit(fn, *args, **kwargs)``; build one directly when
    the function takes keyword arguments that collide with submit's options.
    Coroutine functions run on the loop; plain functions run on the thread
    executor unless `model` says otherwise (``"process"`` needs a picklable,
    module-level function).
    """

    __slots__ = ("args", "fn", "kwargs", "model")

    def __init__(
        self,
        fn: Callable[..., Any],
        *args: Any,
        model: ConcurrencyModel | str | None = None,
        name: str | None = None,
        priority: JobPriority | int = JobPriority.MEDIUM,
        timeout: float | None = DEFAULT_TIMEOUT,
        retry: RetryPolicyLike = DEFAULT_RETRY,
        deadline: float | None = None,
        **kwargs: Any,
    ) -> None:
        if not callable(fn):
            raise TypeError(f"expected a Job or a callable, got {fn!r}")
        is_async = _is_coroutine_function(fn)
        if model is None:
            model = ConcurrencyModel.ASYNC if is_async else ConcurrencyModel.THREAD
        elif is_async and model != ConcurrencyModel.ASYNC:
            raise ValueError(
                f"{_qualname(fn)} is a coroutine function: it runs on the event loop, "
                f"not on the {model!s} executor"
            )
        elif not is_async and model == ConcurrencyModel.ASYNC:
            raise ValueError(
                f"{_qualname(fn)} is not a coroutine function: use model='thread' or 'process'"
            )
        super().__init__(
            name or _qualname(fn),
            priority=priority,
            timeout=timeout,
            retry=retry,
            deadline=deadline,
        )
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.model = model  # type: ignore[misc]

    def run(self) -> Awaitable[Any]:
        """The coroutine of an async function job."""
        return self.fn(*self.args, **self.kwargs)  # type: ignore[no-any-return]

    def run_sync(self) -> Any:
        """Call a plain function job (on a thread or in a process)."""
        return self.fn(*self.args, **self.kwargs)


def _is_coroutine_function(fn: Callable[..., Any]) -> bool:
    while isinstance(fn, functools.partial):
        fn = fn.func
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - an object with async __call__
    )


def _qualname(fn: Callable[..., Any]) -> str:
    while isinstance(fn, functools.partial):
        fn = fn.func
    return getattr(fn, "__qualname__", None) or repr(fn)
