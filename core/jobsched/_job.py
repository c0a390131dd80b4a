"""Jobs: what to run plus how to run it (the Command pattern); attrs-defined job types adapted."""

from __future__ import annotations

import functools
import inspect
import itertools
import types
import weakref
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import attrs

from ._errors import BadArgumentsError
from ._options import (
    DEFAULT_QUEUE,
    check_queue,
    check_retry_policy,
    to_keep_result,
    to_name,
    to_priority,
    to_result_ttl,
    to_timeout,
)
from ._retry import RetryPolicy, RetryPolicyLike
from ._retry_filter import exception_names
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


_UNSET = object()
#: The options a job keeps in `JobExtras` that read as properties.
_RARE_OPTIONS = ("result_ttl", "keep_result", "retry_on", "no_retry_on", "traceparent", "queue")
#: How ``retry_on``/``no_retry_on`` take exceptions: classes or names, one or a list.
ExceptionNames = type[BaseException] | str | Iterable[type[BaseException] | str] | None


@attrs.frozen
class JobExtras:
    """A job's rarely set options, in one slot that stays None for a job that
    sets none of them: a slot each would add 40 bytes to every pending job.

    Frozen: a setter replaces the record, so a `copy.copy` of a job (the
    client's probe) never changes the original's options.
    """

    result_ttl: float | None
    keep_result: bool
    retry_on: tuple[str, ...] = ()
    no_retry_on: tuple[str, ...] = ()
    traceparent: str | None = None
    queue: str = DEFAULT_QUEUE
    previous_run_at: float | None = None
    handed_back: bool = False
    last_traceback: str | None = None
    group: str | None = None
    deadline: float | None = None
    last_failure_timed_out: bool = False


#: The job options kept in `JobExtras` (properties of `Job`, not slots).
EXTRA_OPTIONS = (
    "result_ttl",
    "keep_result",
    "retry_on",
    "no_retry_on",
    "traceparent",
    "queue",
    "deadline",
)
#: Execution state kept in `JobExtras` (set by the kernel on failures and retries only).
EXTRA_STATE = ("previous_run_at", "handed_back", "last_traceback", "last_failure_timed_out")


DEFAULT_RETRY = RetryPolicy()
DEFAULT_TIMEOUT = 30.0
# A module global is one specialised lookup; ``JobStatus.PENDING`` in
# `Job.__init__` is an attribute of an enum class, looked up anew for every job.
_PENDING = JobStatus.PENDING


def _job_options(
    *,
    priority: JobPriority | int | str = JobPriority.MEDIUM,
    timeout: float | Literal[False] | None = DEFAULT_TIMEOUT,
    retry: RetryPolicyLike | str | Mapping[str, Any] = DEFAULT_RETRY,
    deadline: float | None = None,
    retry_on: ExceptionNames = (),
    no_retry_on: ExceptionNames = (),
    queue: str = DEFAULT_QUEUE,
) -> tuple[Any, ...]:
    """The options a job was built with, the defaults for those not given;
    `priority`, `timeout` and `retry` checked."""
    # The job file's spellings work here too (priority="low", timeout=False,
    # retry="none"); the defaults skip the checks, as most jobs use them.
    if type(priority) is not JobPriority:  # type(): specialised, unlike __class__
        priority = to_priority(priority)
    if timeout is not DEFAULT_TIMEOUT:
        timeout = to_timeout(timeout)
    if retry is not DEFAULT_RETRY:
        # A policy name or table stays data until submit() resolves it
        # with the scheduler's plugins.
        retry = check_retry_policy(retry)
    return priority, timeout, retry, deadline, retry_on, no_retry_on, queue


# Its errors are those of `Job.__init__`, which calls it with its options:
# "Job.__init__() got an unexpected keyword argument 'x'".
_job_options.__qualname__ = "Job.__init__"
_NO_OPTIONS = _job_options()


def _init_signature() -> inspect.Signature:
    """`Job.__init__`'s public signature: ``(self, name, *, <_job_options>)``."""
    options = inspect.signature(_job_options)
    own = [
        inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
        inspect.Parameter("name", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation="str"),
    ]
    return options.replace(
        parameters=[*own, *options.parameters.values()], return_annotation="None"
    )


class Job(ABC):
    """What to run plus how to run it: priority, timeout, retry policy, deadline.

    `priority` is a `JobPriority`, 0-3 or its name (``"low"``, ..., any case);
    `timeout` is seconds per attempt, or None or False for none; `retry` is a
    retry policy, a registered policy name (``"none"``, ``"fixed"``,
    ``"exponential"``) or a table like ``{"policy": "fixed", "seconds": 2}``,
    resolved when the job is submitted. `retry_on` and `no_retry_on` limit
    retries to the failures worth retrying: exception classes, or names
    (``"TimeoutError"``, ``"myapp.errors.Transient"``), kept as names (see
    `jobsched.Retry` for a job that asks for a retry itself). `queue` names
    the queue the job waits in (default ``"default"``): only a scheduler or
    worker serving that queue runs it (docs/queues.md). Anything else is
    refused here.

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
        "_extras",  # the rarely set options: see JobExtras
        "_spec",  # the JobSpec it was built from: see record_spec below
        "attempts",
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
    _spec: object  # set only by record_spec; reading it unset raises AttributeError
    # The slots' types (set by __init__ and the kernel).
    job_id: str
    name: str
    priority: JobPriority
    timeout: float | None
    retry: RetryPolicyLike
    _extras: JobExtras | None
    status: JobStatus
    attempts: int
    result: Any
    last_error: str | None
    submitted_at: float
    run_at: float
    seq: int
    started_at: float | None
    finished_at: float | None
    # What a job type's body says (``result_ttl = 3600``, ``keep_result =
    # False``), moved here by __init_subclass__ so the properties stay per job.
    _default_result_ttl: ClassVar[float | None] = None
    _default_keep_result: ClassVar[bool] = True
    #: Whether the job's arguments may hold `jobsched.result_of` markers (a
    #: task's jobs do): the scheduler looks for them only in such jobs.
    takes_results: ClassVar[bool] = False
    # Whether the type reads every rarely set option from `JobExtras` (a
    # subclass may spell one itself: a class attribute or a property).
    _extras_only: ClassVar[bool] = True

    if TYPE_CHECKING:

        def __init__(
            self,
            name: str,
            *,
            priority: JobPriority | int | str = JobPriority.MEDIUM,
            timeout: float | Literal[False] | None = DEFAULT_TIMEOUT,
            retry: RetryPolicyLike | str | Mapping[str, Any] = DEFAULT_RETRY,
            deadline: float | None = None,
            retry_on: ExceptionNames = (),
            no_retry_on: ExceptionNames = (),
            queue: str = DEFAULT_QUEUE,
        ) -> None: ...

    else:
        # At run time the options come as ``**options``, read only when
        # given: CPython fills each keyword-only default of a call from a
        # dict, about 160 instructions each, seven here, on every job.
        # `_job_options` has the signature, its defaults and its errors.
        def __init__(self, name, **options):
            priority, timeout, retry, deadline, retry_on, no_retry_on, queue = (
                _job_options(**options) if options else _NO_OPTIONS
            )
            self.job_id = f"job-{next(_job_ids)}"
            self.name = name
            self.priority = priority
            self.timeout = timeout
            self.retry = retry
            self._extras = None
            if options:  # the rare options (`JobExtras`), checked once the job has its id
                if deadline is not None:
                    self.deadline = deadline
                # Exception names (`_retry_filter`): the failures worth retrying, and not.
                if retry_on:
                    self.retry_on = exception_names(retry_on, "retry_on")
                if no_retry_on:
                    self.no_retry_on = exception_names(no_retry_on, "no_retry_on")
                if queue is not DEFAULT_QUEUE and queue != DEFAULT_QUEUE:
                    self.queue = check_queue(queue)
            self.status = _PENDING
            self.attempts = 0
            self.result = None
            self.last_error = None
            self.submitted_at = 0.0  # monotonic, set on submit
            self.run_at = 0.0  # earliest monotonic time it may start
            self.seq = 0  # submit order, the universal tie-breaker
            self.started_at = None
            self.finished_at = None

        __init__.__signature__ = _init_signature()

    # ── the rarely set options (one `JobExtras` slot) ──────────────────
    def _with_extras(self, **changes: Any) -> None:
        extras = self._extras
        if extras is None:  # one record built, not a default one and then its copy
            defaults = {
                "result_ttl": self._default_result_ttl,
                "keep_result": self._default_keep_result,
            }
            self._extras = JobExtras(**(defaults | changes))
        else:
            self._extras = attrs.evolve(extras, **changes)

    @property
    def result_ttl(self) -> float | None:
        """Seconds a completed job's result is kept (None: for good). A job type
        sets it in its body; submit's ``result_ttl=`` overrides it for one job."""
        extras = self._extras
        return self._default_result_ttl if extras is None else extras.result_ttl

    @result_ttl.setter
    def result_ttl(self, value: float | None) -> None:
        self._with_extras(result_ttl=value)

    @property
    def keep_result(self) -> bool:
        """Whether a completed job's result is kept at all (job type default, or
        submit's ``keep_result=``)."""
        extras = self._extras
        return self._default_keep_result if extras is None else extras.keep_result

    @keep_result.setter
    def keep_result(self, value: bool) -> None:
        self._with_extras(keep_result=value)

    @property
    def retry_on(self) -> tuple[str, ...]:
        """Exception names (`_retry_filter`): the only failures worth retrying."""
        extras = self._extras
        return () if extras is None else extras.retry_on

    @retry_on.setter
    def retry_on(self, value: tuple[str, ...]) -> None:
        self._with_extras(retry_on=tuple(value))

    @property
    def no_retry_on(self) -> tuple[str, ...]:
        """Exception names (`_retry_filter`): failures never retried."""
        extras = self._extras
        return () if extras is None else extras.no_retry_on

    @no_retry_on.setter
    def no_retry_on(self, value: tuple[str, ...]) -> None:
        self._with_extras(no_retry_on=tuple(value))

    @property
    def traceparent(self) -> str | None:
        """The trace context of the submit (set by a tracing plugin, kept by
        stores as the ``traceparent`` option): a W3C ``traceparent``, or the
        ``otel`` plugin's propagator headers as a JSON object. The attempts
        join that trace."""
        extras = self._extras
        return None if extras is None else extras.traceparent

    @traceparent.setter
    def traceparent(self, value: str | None) -> None:
        self._with_extras(traceparent=value)

    @property
    def queue(self) -> str:
        """The queue the job waits in (``"default"`` unless given): a scheduler
        runs only the jobs of the queues it serves (docs/queues.md)."""
        extras = self._extras
        return DEFAULT_QUEUE if extras is None else extras.queue

    @queue.setter
    def queue(self, value: str) -> None:
        self._with_extras(queue=value)

    @property
    def deadline(self) -> float | None:
        """Monotonic seconds by which the job should run (the ``edf`` strategy
        runs the earliest first), None for none. Kept with the rare options:
        a job without one pays nothing."""
        extras = self._extras
        return None if extras is None else extras.deadline

    @deadline.setter
    def deadline(self, value: float | None) -> None:
        if value != self.deadline:
            self._with_extras(deadline=value)

    @property
    def last_failure_timed_out(self) -> bool:
        """Whether the latest failed attempt was ended by `timeout` (its
        `last_error` then reads "timed out after ..."): set with the failure,
        before the job moves to RETRY_WAIT, TIMED_OUT or FAILED, so a listener
        can tell a retried timeout from a retried error. Kept with the rare
        state: a job that never times out pays nothing."""
        extras = self._extras
        return False if extras is None else extras.last_failure_timed_out

    @last_failure_timed_out.setter
    def last_failure_timed_out(self, value: bool) -> None:
        if value != self.last_failure_timed_out:
            self._with_extras(last_failure_timed_out=value)

    @property
    def previous_run_at(self) -> float | None:
        """The `run_at` of the job's latest attempt that failed and was retried,
        None before a retry. Set as the job moves to RETRY_WAIT, just before
        `run_at` becomes the retry's due time, so a RETRY_WAIT listener can
        tell how long that attempt waited (``started_at - previous_run_at``).
        Kept with the rare options: a job that is never retried pays nothing."""
        extras = self._extras
        return None if extras is None else extras.previous_run_at

    @previous_run_at.setter
    def previous_run_at(self, value: float | None) -> None:
        self._with_extras(previous_run_at=value)

    @property
    def handed_back(self) -> bool:
        """Whether a shutdown tore down the job's attempt and its store keeps the
        job to run again (another worker, or the next start): it ends CANCELLED
        in this scheduler only, so a listener can tell it from a cancel."""
        extras = self._extras
        return False if extras is None else extras.handed_back

    @handed_back.setter
    def handed_back(self, value: bool) -> None:
        self._with_extras(handed_back=value)

    @property
    def last_traceback(self) -> str | None:
        """The formatted traceback of the latest failed attempt's exception
        (bounded: `jobsched.store.TRACEBACK_LIMIT` characters), None if it
        raised none (a timeout, a cancel) or no attempt failed. Formatted
        only on failure and kept with the rare options: a job that succeeds
        pays nothing."""
        extras = self._extras
        return None if extras is None else extras.last_traceback

    @last_traceback.setter
    def last_traceback(self, value: str | None) -> None:
        if value is not None or self._extras is not None:
            self._with_extras(last_traceback=value)

    # ── results of upstream jobs (`jobsched.result_of`) ────────────────
    def result_upstreams(self, id_of: Callable[[Any], str]) -> list[str]:
        """The ids of the jobs whose results the arguments wait for (`id_of`
        names an upstream given as a `Job`); none unless `takes_results`."""
        return []

    def resolve_results(self, result_of: Callable[[str], Any]) -> None:
        """Replace the arguments' markers by ``result_of(upstream_id)`` (called
        when the job is released). A job that `takes_results` implements it."""
        return None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # ``result_ttl = 3600`` in a job type's body is its default: kept
        # aside, so the property (a per-job value) is not hidden by it.
        for name, check in (("result_ttl", to_result_ttl), ("keep_result", to_keep_result)):
            value = cls.__dict__.get(name, _UNSET)
            if value is not _UNSET and not isinstance(value, types.MemberDescriptorType):
                setattr(cls, f"_default_{name}", check(value))
                delattr(cls, name)
        cls._extras_only = all(getattr(cls, name) is getattr(Job, name) for name in _RARE_OPTIONS)
        # An @attrs.define job type: wrap attrs' field-only __init__ so the job
        # also takes the job options and gets its execution state.
        if "__attrs_attrs__" in cls.__dict__:
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


#: The keywords `FunctionJob` (and so ``submit``) takes as job options.
FUNCTION_JOB_OPTIONS = (
    "model",
    "name",
    "priority",
    "timeout",
    "retry",
    "deadline",
    "retry_on",
    "no_retry_on",
    "queue",
    "kwargs",
)


class FunctionJob(Job):
    """A plain function or coroutine function scheduled as a job.

    Built by ``scheduler.submit(fn, *args, **kwargs)``. Keywords named like a
    job option (`FUNCTION_JOB_OPTIONS`) are the job's options; every other
    keyword goes to `fn`. A function with a parameter named like an option is
    refused, because a keyword meant for it would silently become the job's
    option: pass its keyword arguments as a mapping instead,
    ``FunctionJob(fn, *args, kwargs={"timeout": 3}, timeout=5)`` (then every
    other keyword must be an option). A function that only takes ``**kwargs``
    is not refused; an option's keyword never reaches it.

    The arguments must fit `fn`'s signature (checked here when it can be
    inspected), else `TypeError`. Coroutine functions run on the loop; plain
    functions run on the thread executor unless `model` says otherwise
    (``"process"`` needs a picklable, module-level function).
    """

    __slots__ = ("args", "fn", "kwargs", "model")

    def __init__(
        self,
        fn: Callable[..., Any],
        *args: Any,
        model: ConcurrencyModel | str | None = None,
        name: str | None = None,
        priority: JobPriority | int | str = JobPriority.MEDIUM,
        timeout: float | Literal[False] | None = None,
        retry: RetryPolicyLike | str | Mapping[str, Any] = DEFAULT_RETRY,
        deadline: float | None = None,
        retry_on: ExceptionNames = (),
        no_retry_on: ExceptionNames = (),
        queue: str = DEFAULT_QUEUE,
        kwargs: Mapping[str, Any] | None = None,
        **fn_kwargs: Any,
    ) -> None:
        if not callable(fn):
            raise TypeError(f"expected a Job or a callable, got {fn!r}")
        if kwargs is None:
            refuse_option_parameters(fn, FUNCTION_JOB_OPTIONS)
        elif fn_kwargs:
            raise TypeError(
                f"unexpected keyword arguments {sorted(fn_kwargs)}: with kwargs=, "
                f"the function's keyword arguments all go in it, and the other keywords "
                f"are job options ({', '.join(FUNCTION_JOB_OPTIONS[:-1])})"
            )
        elif not isinstance(kwargs, Mapping) or not all(isinstance(k, str) for k in kwargs):
            raise TypeError(
                f"kwargs must be a mapping of {callable_name(fn)}'s keyword arguments "
                f"(names to values), got {kwargs!r}"
            )
        else:
            fn_kwargs = dict(kwargs)
        check_call(fn, args, fn_kwargs)
        is_async = _is_coroutine_function(fn)
        if model is None:
            model = ConcurrencyModel.ASYNC if is_async else ConcurrencyModel.THREAD
        elif is_async and model != ConcurrencyModel.ASYNC:
            raise ValueError(
                f"{callable_name(fn)} is a coroutine function: it runs on the event loop, "
                f"not on the {model!s} executor"
            )
        elif not is_async and model == ConcurrencyModel.ASYNC:
            raise ValueError(
                f"{callable_name(fn)} is not a coroutine function: use model='thread' or 'process'"
            )
        super().__init__(
            callable_name(fn) if name is None else to_name(name),
            priority=priority,
            timeout=timeout,
            retry=retry,
            deadline=deadline,
            retry_on=retry_on,
            no_retry_on=no_retry_on,
            queue=queue,
        )
        self.fn = fn
        self.args = args
        self.kwargs = fn_kwargs
        self.model = model  # type: ignore[misc]

    def run(self) -> Awaitable[Any]:
        """The coroutine of an async function job."""
        try:
            return self.fn(*self.args, **self.kwargs)  # type: ignore[no-any-return]
        except TypeError as exc:
            raise _if_bad_arguments(exc) from exc

    def run_sync(self) -> Any:
        """Call a plain function job (on a thread or in a process)."""
        try:
            return self.fn(*self.args, **self.kwargs)
        except TypeError as exc:
            raise _if_bad_arguments(exc) from exc


def _if_bad_arguments(exc: TypeError) -> TypeError:
    """`BadArgumentsError` if the call itself raised `exc` (not code inside the function)."""
    tb = exc.__traceback__
    # Caught in run/run_sync: the traceback starts there, and goes on into the
    # function only if the function's own code raised it.
    if tb is not None and tb.tb_next is None:
        return BadArgumentsError(str(exc))
    return exc


# inspect.signature costs ~10 us, more than the rest of a function job's submit:
# computed once per function (weakly held, so a cached function can still go).
_signatures: weakref.WeakKeyDictionary[Any, tuple[inspect.Signature, frozenset[str]] | None] = (
    weakref.WeakKeyDictionary()
)
_KEYWORD_KINDS = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


def _signature(fn: Callable[..., Any]) -> tuple[inspect.Signature, frozenset[str]] | None:
    """`fn`'s signature and the names of its parameters a keyword can reach; None if unknown."""
    try:
        return _signatures[fn]
    except KeyError:
        pass
    except TypeError:  # unhashable, or no weak reference to it: not cached
        return _inspect(fn)
    found = _signatures[fn] = _inspect(fn)
    return found


def _inspect(fn: Callable[..., Any]) -> tuple[inspect.Signature, frozenset[str]] | None:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin without a signature, say
        return None
    keywords = frozenset(p.name for p in sig.parameters.values() if p.kind in _KEYWORD_KINDS)
    return sig, keywords


def refuse_option_parameters(fn: Callable[..., Any], options: Iterable[str]) -> None:
    """`TypeError` if `fn` has a parameter a keyword could reach that is named like an option."""
    found = _signature(fn)
    if found is None:
        return
    keywords = found[1]
    for option in options:
        if option in keywords:
            q = callable_name(fn)
            raise TypeError(
                f"{q}() has a parameter named {option!r}, which submit() takes as a job "
                f"option: pass {q}'s keyword arguments in kwargs=, as in "
                f"submit({q}, *args, kwargs={{{option!r}: ...}}) (options stay keywords)"
            )


def check_call(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
    """`TypeError` now if ``fn(*args, **kwargs)`` could never bind (when `fn` can be inspected)."""
    found = _signature(fn)
    if found is None:
        return
    try:
        found[0].bind(*args, **kwargs)
    except TypeError as exc:
        raise TypeError(f"{callable_name(fn)}() cannot take these arguments: {exc}") from None


def _is_coroutine_function(fn: Callable[..., Any]) -> bool:
    while isinstance(fn, functools.partial):
        fn = fn.func
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - an object with async __call__
    )


def callable_name(fn: Callable[..., Any]) -> str:
    """The qualified name of `fn` (through any `functools.partial`), or its repr."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    return getattr(fn, "__qualname__", None) or repr(fn)


# `jobsched.build_job` remembers the JobSpec a job was built from so that
# `job_spec` can give it back exactly. The slot is Job's (a job is slotted); the
# value is the job-type layer's, which _job cannot import: hence `object`.
# A job's group is read and written through these two, not a `Job` property:
# a job type's own field may be called ``group`` (it is a common argument
# name), and it must neither shadow the option nor be taken for it.
def job_extras(job: Job) -> JobExtras | None:
    """`job`'s rarely set options and state (`JobExtras`), None while it sets
    none of them: the submit path reads its queue and group in one call."""
    return job._extras


def job_group(job: Job) -> str | None:
    """The group `job` was submitted with (a tenant, a customer), or None: see
    `jobsched.Limits` (``group``) and the claims' turns (docs/limits.md)."""
    extras = job._extras
    return None if extras is None else extras.group


def rare_options_are_defaults(job: Job) -> bool:
    """Whether each of `job`'s rarely set options (`JobExtras`: group, queue,
    result_ttl...) is its type's default: none set, none its type computes."""
    return job._extras is None and job._extras_only


def set_job_group(job: Job, group: str | None) -> None:
    """Set `job`'s group (checked by the caller: `check_group`)."""
    if group is not None or job._extras is not None:
        job._with_extras(group=group)


def set_job_queue_and_group(job: Job, queue: str, group: str | None) -> None:
    """Set `job`'s queue and group (each checked by the caller) at once: one
    record, where setting each would copy the record the other made (a
    job read back from a store gets both from its row)."""
    job._with_extras(queue=queue, group=group)


def record_spec(job: Job, spec: object) -> None:
    """Remember the description `job` was built from (for `recorded_spec`)."""
    job._spec = spec


def recorded_spec(job: Job) -> object | None:
    """What `record_spec` remembered for `job`, or None."""
    return getattr(job, "_spec", None)


# ── attrs-defined job types ───────────────────────────────────────────
#: The options every job accepts beside its arguments (see `Job`).
JOB_OPTIONS = (
    "name",
    "priority",
    "timeout",
    "retry",
    "deadline",
    "retry_on",
    "no_retry_on",
    "queue",
)
# Slots the kernel writes (and the options): an attrs field must not shadow them.
_RESERVED = (frozenset(Job.__slots__) | frozenset(EXTRA_OPTIONS + EXTRA_STATE)) - {"name"}
_ATTRS_METHODS = ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__repr__")
_ATTRS_STATE = ("__getstate__", "__setstate__")


def _is_attrs_generated(fn: object) -> bool:
    # Generated methods are compiled from source strings; helpers such as the
    # slotted __getstate__ are closures in attrs' own module.
    code = getattr(fn, "__code__", None)
    if code is None:
        return False
    return code.co_filename.startswith("<attrs generated") or getattr(
        fn, "__module__", ""
    ).startswith("attr.")


def adapt_attrs_job(cls: type[Job]) -> None:
    """Give an ``@attrs.define`` job type a constructor that is a real `Job`'s.

    attrs writes an ``__init__`` that only sets the fields. It is wrapped so
    the job also takes the job options (``name``, ``priority``, ``timeout``,
    ``retry``, ``deadline``) and gets its execution state from `Job.__init__`
    before the fields are set (so ``__attrs_post_init__`` sees a whole job).
    attrs' value equality, repr and field-only pickling are dropped: two jobs
    with equal arguments are still two jobs, and pickling must keep the
    kernel's slots for PROCESS jobs. Called by ``Job.__init_subclass__`` for
    slotted attrs classes (attrs' default); `build_job` calls it for the rest.
    """
    own = cls.__dict__
    if own.get("_jobsched_adapted") or "__attrs_attrs__" not in own:
        return
    if getattr(own.get("__setattr__"), "__name__", "") == "_frozen_setattrs":
        raise TypeError(
            f"job type {cls.__qualname__} cannot be frozen: the scheduler writes the "
            "job's execution state on it (use @attrs.define)"
        )
    fields = attrs.fields(cls)  # type: ignore[arg-type]
    clash = sorted(f.name for f in fields if f.name in _RESERVED)
    if clash:
        raise TypeError(
            f"job type {cls.__qualname__}: fields {clash} shadow Job attributes the scheduler "
            f"owns; rename them "
            f"({', '.join(sorted(n for n in _RESERVED if not n.startswith('_')))} are taken)"
        )
    type.__setattr__(cls, "_jobsched_adapted", True)
    attrs_init = own.get("__init__")
    if not _is_attrs_generated(attrs_init):
        return  # a hand-written __init__: it calls Job.__init__ itself
    aliases = {getattr(f, "alias", None) or f.name.lstrip("_") for f in fields if f.init}
    option_names = tuple(o for o in JOB_OPTIONS if o not in aliases)
    job_init = Job.__init__

    def __init__(self: Job, *args: Any, **kwargs: Any) -> None:
        options = {o: kwargs.pop(o) for o in option_names if o in kwargs}
        name = options.pop("name", None)
        job_init(self, name if name is not None else type(self).__name__, **options)
        attrs_init(self, *args, **kwargs)  # type: ignore[misc]

    __init__._jobsched_attrs_init = attrs_init  # type: ignore[attr-defined]
    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    __init__.__doc__ = attrs_init.__doc__
    try:
        sig = inspect.signature(attrs_init)  # type: ignore[arg-type]
        extra = [
            inspect.Parameter(o, inspect.Parameter.KEYWORD_ONLY, default=_option_default(o))
            for o in option_names
        ]
        params = [p for p in sig.parameters.values() if p.kind is not p.VAR_KEYWORD]
        positional = [p for p in params if p.kind is not p.KEYWORD_ONLY]
        keyword = [p for p in params if p.kind is p.KEYWORD_ONLY]
        __init__.__signature__ = sig.replace(  # type: ignore[attr-defined]
            parameters=[*positional, *keyword, *extra]
        )
    except (TypeError, ValueError):  # pragma: no cover - introspection is best effort
        pass
    type.__setattr__(cls, "__init__", __init__)
    for method in (*_ATTRS_METHODS, *_ATTRS_STATE):
        if _is_attrs_generated(own.get(method)):
            type.__delattr__(cls, method)
    if "__hash__" in own and own["__hash__"] is None:
        type.__delattr__(cls, "__hash__")


def _option_default(option: str) -> Any:
    if option == "name":
        return None  # the class name
    params = inspect.signature(Job.__init__).parameters
    return params[option].default if option in params else None


def is_adapted_attrs(cls: type) -> bool:
    """Whether ``cls()`` is the wrapped attrs constructor (its arguments are the fields)."""
    return getattr(cls.__init__, "_jobsched_attrs_init", None) is not None  # type: ignore[misc]
