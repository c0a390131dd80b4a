"""``@jobsched.task``: a function that is also a registered job type.

A task is called like the function it decorates (tests, scripts), and
``task.job(*args, **kwargs)`` makes a job of it: the arguments are checked
against the function's signature and annotations (the checks job files get)
and kept as JSON, so the job is data any store keeps and any process that
imported the task's module can run. The task is the job type named
``module.qualname`` (or its ``name=``) in every plugin manager of the process:
``jobsched jobs list`` shows it, job files and stores name it.
"""

from __future__ import annotations

import enum
import functools
import inspect
import math
import pathlib
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Generic, Literal, ParamSpec, TypeVar, overload

from ._errors import ResultUnavailableError, SchedulerError
from ._job import DEFAULT_RETRY, ExceptionNames, Job, job_group, record_spec, set_job_group
from ._jobtypes import JobSpec, JobSpecError, check_arguments, describe_job_type
from ._options import (
    check_group,
    check_queue,
    check_retry_policy,
    priority_name,
    to_priority,
    to_timeout,
)
from ._plugins import define_job_type, defined_job_type
from ._result_of import ResultOf, has_markers, job_id_of, markers_in, resolve
from ._retry import RetryPolicyLike
from ._retry_filter import exception_names
from ._status import ConcurrencyModel, JobPriority

P = ParamSpec("P")
R = TypeVar("R")

#: The job options a task (or one of its jobs, through `Task.options`) sets.
TASK_OPTIONS = ("priority", "timeout", "retry", "retry_on", "no_retry_on", "queue", "group")
#: Options only a single job has: its own name and deadline.
JOB_ONLY_OPTIONS = ("name", "deadline")
# Keywords a job type's constructor takes as options: a parameter named like
# one would be ambiguous in a job file (``name`` is safe: the job's name is
# set after it is built).
_OPTION_PARAMETERS = (
    "priority",
    "timeout",
    "retry",
    "deadline",
    "retry_on",
    "no_retry_on",
    "queue",
)
_NOT_GIVEN: Any = object()


class TaskJob(Job):
    """A job of a `Task`: the task's function, called with the job's arguments.

    Each task has its own subclass (``type(job).task`` is the task), built by
    `task`; it is the registered job type.
    """

    __slots__ = ("arguments",)
    #: The task whose function the job calls.
    task: ClassVar[Task[..., Any]]
    #: The registered job type name (concurrency limits and rates count by it).
    job_type: ClassVar[str]
    takes_results = True

    def __init__(self, **kwargs: Any) -> None:
        # Called by build_job (job files, stores) with the checked arguments
        # and the options, and by Task.job the same way.
        options = {o: kwargs.pop(o) for o in _OPTION_PARAMETERS if o in kwargs}
        task = type(self).task
        # No timeout unless the task or the call asks (as Celery, RQ and
        # procrastinate do); the reference facade's `Job` keeps its 30 s.
        super().__init__(task.name, **{"timeout": None, **task.job_defaults, **options})
        if task.group is not None:
            set_job_group(self, task.group)
        #: The function's keyword arguments (checked and converted).
        self.arguments: dict[str, Any] = kwargs

    def run(self) -> Any:
        """The coroutine of an async task's function."""
        arguments = self.arguments
        if arguments.__class__ is not dict:
            raise ResultUnavailableError(arguments.why)  # type: ignore[attr-defined]
        return type(self).task.fn(**arguments)

    def run_sync(self) -> Any:
        """Call a plain task's function (on a thread or in a process)."""
        arguments = self.arguments
        if arguments.__class__ is not dict:
            raise ResultUnavailableError(arguments.why)  # type: ignore[attr-defined]
        return type(self).task.fn(**arguments)

    def result_upstreams(self, id_of: Callable[[Any], str]) -> list[str]:
        """The ids of the jobs whose results the arguments hold markers for."""
        arguments = self.arguments
        if arguments.__class__ is not dict:
            return []
        ids: list[str] = []
        for value in arguments.values():
            for marker in markers_in(value):
                ids.extend(i for i in marker.ids(id_of) if i not in ids)
        return ids

    def resolve_results(self, result_of: Callable[[str], Any]) -> None:
        """Replace the markers by the upstreams' results, checked against the
        annotations. A result that cannot be had, or does not fit, makes the
        job fail when its attempt starts (`ResultUnavailableError`, not retried)."""
        arguments = self.arguments
        if arguments.__class__ is not dict or not has_markers(arguments):
            return
        task = type(self).task
        try:
            resolved = {k: resolve(v, result_of, job_id_of) for k, v in arguments.items()}
            info = describe_job_type(task.job_class, task.name, task.fn.__module__)
            try:
                self.arguments = check_arguments(info, resolved, f"{task.name} job {self.job_id}")
            except JobSpecError as exc:
                raise ResultUnavailableError(f"an upstream's result does not fit: {exc}") from None
        except ResultUnavailableError as exc:
            self.arguments = _Unresolved(str(exc))

    def __reduce__(self) -> tuple[Any, ...]:
        # Its class is made per task, not importable by name: a process
        # executor gets the task (pickled by module and name) and the slots.
        state = {}
        for cls in type(self).__mro__:
            for slot in getattr(cls, "__slots__", ()):
                if hasattr(self, slot):
                    state[slot] = getattr(self, slot)
        return (_new_task_job, (type(self).task,), (None, state))


class _Unresolved(dict):  # type: ignore[type-arg]
    """A task job's arguments whose markers could not be resolved: its
    attempt fails with `why` (a dict, empty, so the slot keeps its type)."""

    def __init__(self, why: str) -> None:
        super().__init__()
        self.why = why

    def __reduce__(self) -> tuple[Any, ...]:
        return (_Unresolved, (self.why,))


def _new_task_job(task: Task[..., Any]) -> TaskJob:
    cls = task.job_class
    return cls.__new__(cls)


def _load_task(module: str, name: str) -> Task[..., Any]:
    """The task `name` that importing `module` defines (unpickling in another process)."""
    import importlib

    importlib.import_module(module)
    factory = defined_job_type(name)
    if factory is None or not issubclass(factory, TaskJob):
        raise LookupError(f"importing {module} did not define the task {name!r}")
    found: Task[..., Any] = factory.task
    return found


class Task(Generic[P, R]):
    """A function registered as a job type by `task`.

    Calling the task calls the function. `job` makes a job of it (see
    `task`); `options` gives one job other options; `name`, `fn`, `model`
    and `defaults` (the job options the task sets) describe it.
    """

    def __init__(
        self,
        fn: Callable[P, R],
        *,
        name: str | None,
        model: ConcurrencyModel | str | None,
        defaults: Mapping[str, Any],
    ) -> None:
        if not callable(fn) or isinstance(fn, Task):
            raise TypeError(f"@task decorates a function, got {fn!r}")
        functools.update_wrapper(self, fn)
        qualname = f"{fn.__module__}.{fn.__qualname__}"
        if name is None:
            name = qualname
        elif not isinstance(name, str) or not name.strip():
            raise ValueError(f"@task on {qualname}: name must be a non-empty string, got {name!r}")
        self.fn = fn
        self.name = name
        self.model = _model(fn, model, qualname)
        self.defaults: dict[str, Any] = _checked_options(defaults, f"@task on {qualname}")
        #: The group of the task's jobs (``@task(group=...)``), None for none.
        self.group: str | None = self.defaults.get("group")
        #: The defaults the job constructor takes (all but the group).
        self.job_defaults = {k: v for k, v in self.defaults.items() if k != "group"}
        self.signature = _task_signature(fn, qualname)
        self.job_class = _job_class(self)
        taken = defined_job_type(name)
        if taken is not None and issubclass(taken, TaskJob):
            other = taken.task.fn
            if f"{other.__module__}.{other.__qualname__}" != qualname:
                raise SchedulerError(
                    f"@task on {qualname}: the name {name!r} is taken by the task "
                    f"{other.__module__}.{other.__qualname__}; give one of them another name="
                )
        define_job_type(name, self.job_class, fn.__module__)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    def job(self, *args: P.args, **kwargs: P.kwargs) -> TaskJob:
        """A job that calls the function with these arguments, not yet submitted.

        The arguments must fit the signature and its annotations and be JSON
        values (or enums, paths, tuples and sets, kept as their JSON form),
        else `JobSpecError` naming the argument.
        """
        return _build(self, args, kwargs, {})

    def options(
        self,
        *,
        name: str = _NOT_GIVEN,
        priority: JobPriority | int | str = _NOT_GIVEN,
        timeout: float | Literal[False] | None = _NOT_GIVEN,
        retry: RetryPolicyLike | str | Mapping[str, Any] = _NOT_GIVEN,
        deadline: float | None = _NOT_GIVEN,
        retry_on: ExceptionNames = _NOT_GIVEN,
        no_retry_on: ExceptionNames = _NOT_GIVEN,
        queue: str = _NOT_GIVEN,
        group: str | None = _NOT_GIVEN,
    ) -> TaskCall[P, R]:
        """The task with other options for the jobs made through it.

        ``send_email.options(priority="high").job("a@b.c", "hi")``; the
        options are spelled as `Job` takes them.
        """
        given = {k: v for k, v in locals().items() if k != "self" and v is not _NOT_GIVEN}
        return TaskCall(self, _checked_options(given, f"{self.name}.options()"))

    def __reduce__(self) -> tuple[Any, ...]:
        return (_load_task, (self.fn.__module__, self.name))

    def __repr__(self) -> str:
        return f"<task {self.name}>"


class TaskCall(Generic[P, R]):
    """A task with options for one call of `job` (made by `Task.options`)."""

    def __init__(self, task: Task[P, R], options: Mapping[str, Any]) -> None:
        self.task = task
        self.given = dict(options)

    def job(self, *args: P.args, **kwargs: P.kwargs) -> TaskJob:
        """As `Task.job`, with these options."""
        return _build(self.task, args, kwargs, self.given)

    def options(self, **options: Any) -> TaskCall[P, R]:
        """More options on top of these."""
        checked = _checked_options(options, f"{self.task.name}.options()")
        return TaskCall(self.task, {**self.given, **checked})


@overload
def task(fn: Callable[P, R], /) -> Task[P, R]: ...


@overload
def task(
    *,
    name: str | None = None,
    model: ConcurrencyModel | str | None = None,
    priority: JobPriority | int | str = JobPriority.MEDIUM,
    timeout: float | Literal[False] | None = None,
    retry: RetryPolicyLike | str | Mapping[str, Any] = DEFAULT_RETRY,
    retry_on: ExceptionNames = (),
    no_retry_on: ExceptionNames = (),
    queue: str | None = None,
    group: str | None = None,
) -> Callable[[Callable[P, R]], Task[P, R]]: ...


def task(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    model: ConcurrencyModel | str | None = None,
    priority: JobPriority | int | str = JobPriority.MEDIUM,
    timeout: float | Literal[False] | None = None,
    retry: RetryPolicyLike | str | Mapping[str, Any] = DEFAULT_RETRY,
    retry_on: ExceptionNames = (),
    no_retry_on: ExceptionNames = (),
    queue: str | None = None,
    group: str | None = None,
) -> Any:
    """Make a function a task: a job type defined in code.

    ``@task`` or ``@task(name=..., timeout=30, retry_on=[TimeoutError], ...)``.
    `name` defaults to ``module.qualname``. A coroutine function runs on the
    event loop; a plain one on the thread executor, unless `model` names
    another executor (``"process"`` and ``"subprocess"`` need a module-level
    function: the job is pickled by the function's module and name). The
    options are the jobs' defaults, spelled as `Job` takes them; `retry_on`
    and `no_retry_on` limit retries to the failures worth retrying; `queue`
    is the queue its jobs wait in (default ``"default"``, docs/queues.md);
    `group` puts every job of the task in that group (a tenant: see `Limits`).

    The task's parameters are its job type's arguments, so each must be
    nameable (no ``*args``, ``**kwargs`` or positional-only ones) and not
    named like a job option (``priority``, ``timeout``, ``retry``,
    ``deadline``, ``retry_on``, ``no_retry_on``). Another process finds the
    task by importing its module: through a ``jobsched`` entry point naming
    the module, or ``jobsched worker --import module``.
    """
    defaults: dict[str, Any] = {}
    if priority is not JobPriority.MEDIUM:
        defaults["priority"] = priority
    if timeout is not None:
        defaults["timeout"] = timeout
    if retry is not DEFAULT_RETRY:
        defaults["retry"] = retry
    if retry_on:
        defaults["retry_on"] = retry_on
    if no_retry_on:
        defaults["no_retry_on"] = no_retry_on
    if queue is not None:
        defaults["queue"] = check_queue(queue, "@task queue")
    if group is not None:
        defaults["group"] = group

    def decorate(fn: Callable[P, R]) -> Task[P, R]:
        return Task(fn, name=name, model=model, defaults=defaults)

    return decorate if fn is None else decorate(fn)


# ── helpers ────────────────────────────────────────────────────────────
def _model(
    fn: Callable[..., Any], model: ConcurrencyModel | str | None, qualname: str
) -> ConcurrencyModel | str:
    is_async = inspect.iscoroutinefunction(fn)
    if model is None:
        return ConcurrencyModel.ASYNC if is_async else ConcurrencyModel.THREAD
    if not isinstance(model, str) or not model:
        raise ValueError(f"@task on {qualname}: model must be an executor name, got {model!r}")
    model = next((m for m in ConcurrencyModel if m.value == model), model)
    if is_async and model != ConcurrencyModel.ASYNC:
        raise ValueError(
            f"@task on {qualname}: a coroutine function runs on the event loop, "
            f"not on the {model!s} executor"
        )
    if not is_async and model == ConcurrencyModel.ASYNC:
        raise ValueError(
            f"@task on {qualname}: not a coroutine function: use model='thread' or 'process'"
        )
    if model in ("process", "subprocess") and "<locals>" in fn.__qualname__:
        raise ValueError(
            f"@task on {qualname}: model={str(model)!r} needs a module-level function "
            "(another process imports it by module and name)"
        )
    return model


def _checked_options(options: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Job options as `Job` takes them, checked now; a bad one is a `ValueError`/`TypeError`."""
    checked: dict[str, Any] = {}
    for key, value in options.items():
        try:
            if key == "name":
                if not isinstance(value, str) or not value:
                    raise ValueError(f"must be a non-empty string, got {value!r}")
                checked[key] = value
            elif key == "priority":
                checked[key] = to_priority(value)
            elif key == "timeout":
                checked[key] = to_timeout(value)
            elif key == "retry":
                checked[key] = check_retry_policy(value)
            elif key == "deadline":
                if value is not None and (
                    isinstance(value, bool) or not isinstance(value, int | float)
                ):
                    raise ValueError(f"must be a number, got {value!r}")
                checked[key] = value
            elif key in ("retry_on", "no_retry_on"):
                checked[key] = exception_names(value, key)
            elif key == "queue":
                checked[key] = check_queue(value)
            elif key == "group":
                checked[key] = check_group(value)
            else:
                known = ", ".join(TASK_OPTIONS + JOB_ONLY_OPTIONS)
                raise TypeError(f"unknown option (options: {known})")
        except (TypeError, ValueError) as exc:
            message = str(exc)
            if not message.startswith(key):
                message = f"{key}: {message}"
            raise type(exc)(f"{where}: {message}") from None
    return checked


def _task_signature(fn: Callable[..., Any], qualname: str) -> inspect.Signature:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"@task on {qualname}: cannot read its signature ({exc})") from None
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
            shown = {
                p.VAR_POSITIONAL: f"*{p.name}",
                p.VAR_KEYWORD: f"**{p.name}",
                p.POSITIONAL_ONLY: f"{p.name}, /",
            }
            raise TypeError(
                f"@task on {qualname}: parameter {shown[p.kind]} cannot be "
                "a job argument (a task's arguments are kept by name): name each parameter"
            )
        if p.name in _OPTION_PARAMETERS:
            raise TypeError(
                f"@task on {qualname}: parameter {p.name!r} is named like a job option "
                f"({', '.join(_OPTION_PARAMETERS)}); rename it"
            )
    return sig


def _job_class(task: Task[..., Any]) -> type[TaskJob]:
    """The task's own `TaskJob` subclass: the registered job type."""
    fn = task.fn
    params = [p.replace(kind=p.KEYWORD_ONLY) for p in task.signature.parameters.values()]
    signature = inspect.Signature(
        [
            inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
            *params,
            inspect.Parameter("options", inspect.Parameter.VAR_KEYWORD),
        ]
    )

    def __init__(self: TaskJob, **kwargs: Any) -> None:
        TaskJob.__init__(self, **kwargs)

    __init__.__signature__ = signature  # type: ignore[attr-defined]
    __init__.__qualname__ = f"{fn.__qualname__}.__init__"
    namespace = {
        "__slots__": (),
        "__module__": fn.__module__,
        "__qualname__": fn.__qualname__,
        "__doc__": inspect.getdoc(fn) or "",
        "__init__": __init__,
        "task": task,
        "job_type": task.name,
        "model": task.model,
    }
    return type(fn.__name__, (TaskJob,), namespace)


class _NotJSON(Exception):
    pass


def _json_value(value: Any) -> Any:
    """`value` as the JSON value kept for it (enums by name, paths as text)."""
    if value is None or isinstance(value, bool | int | str) or value.__class__ is ResultOf:
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        raise _NotJSON
    if isinstance(value, list | tuple | set | frozenset):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise _NotJSON
        return {k: _json_value(v) for k, v in value.items()}
    if isinstance(value, enum.Enum):
        return value.name.lower()
    if isinstance(value, pathlib.PurePath):
        return str(value)
    raise _NotJSON


def _build(
    task: Task[..., Any],
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
    options: Mapping[str, Any],
) -> TaskJob:
    label = f"{task.name}.job()"
    try:
        bound = task.signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise JobSpecError(f"{label}: {exc}") from None
    data: dict[str, Any] = {}
    for key, value in bound.arguments.items():
        try:
            data[key] = _json_value(value)
        except _NotJSON:
            raise JobSpecError(
                f"{label}: argument {key!r} is {type(value).__name__} {value!r:.60}, not a "
                "JSON value: a task's arguments are kept as JSON so that every store and "
                "process can run its jobs (pass its JSON form, or submit the plain function "
                "to an in-memory scheduler)"
            ) from None
    info = describe_job_type(task.job_class, task.name, task.fn.__module__)
    checked = check_arguments(info, data, label)
    name = options.get("name")
    job = task.job_class(
        **checked, **{k: v for k, v in options.items() if k not in ("name", "group")}
    )
    if name is not None:
        job.name = name
    if "group" in options:
        set_job_group(job, options["group"])
    record_spec(job, JobSpec(type=task.name, args=data, options=_spec_options(job, options)))
    return job


def _spec_options(job: Job, given: Mapping[str, Any]) -> dict[str, Any]:
    """The job's options as `JobSpec` keeps them: the ones set by the task or the call."""
    task = type(job).task  # type: ignore[attr-defined]
    keys = {*task.defaults, *given}
    options: dict[str, Any] = {}
    if "name" in keys:
        options["name"] = job.name
    if "priority" in keys:
        options["priority"] = priority_name(job.priority)
    if "timeout" in keys:
        options["timeout"] = job.timeout
    if "retry" in keys and isinstance(job.retry, str | Mapping):
        options["retry"] = job.retry
    if "deadline" in keys:
        options["deadline"] = job.deadline
    for key in ("retry_on", "no_retry_on"):
        if key in keys:
            options[key] = list(getattr(job, key))
    if "queue" in keys:
        options["queue"] = job.queue
    if "group" in keys:
        options["group"] = job_group(job)
    return options
