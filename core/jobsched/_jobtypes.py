"""Job types as data: a registered type name + JSON arguments + options -> a `Job`.

A job type is a `Job` subclass registered by name through
``jobsched_register_job_types``. Its arguments are either attrs fields
(``@attrs.define`` on the subclass) or the parameters of a hand-written
``__init__`` that calls ``super().__init__(name, **kw)`` (the reference
design's way). Either way `describe_job_type` lists them, `build_job` builds a
job from data with validation, and `job_spec` gives the data back, so a job
file or a durable store can describe a job without pickling it.
"""

from __future__ import annotations

import builtins
import collections.abc
import difflib
import enum
import functools
import inspect
import json
import pathlib
import sys
import types
import typing
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from ._errors import PluginError, SchedulerError
from ._job import (
    JOB_OPTIONS,
    Job,
    adapt_attrs_job,
    is_adapted_attrs,
    job_group,
    record_spec,
    recorded_spec,
    set_job_group,
)
from ._options import (
    DEFAULT_QUEUE,
    check_group,
    check_queue,
    describe_value,
    priority_name,
    to_keep_result,
    to_priority,
    to_result_ttl,
    to_timeout,
)
from ._result_of import ResultOf, marker_from_data, markers_in
from ._retry import RetryPolicyLike
from ._retry_filter import exception_names
from ._status import JobPriority

if TYPE_CHECKING:
    from ._plugins import PluginManager

#: Options set on the job once it is built, not through its constructor:
#: about its result (a job type sets its defaults as class attributes), and
#: its group (a job type's own argument may be called ``group``).
RESULT_OPTIONS = ("result_ttl", "keep_result", "group")
#: The retry policy a ``retry = {...}`` table without ``policy`` uses.
DEFAULT_RETRY_POLICY = "exponential"


class JobSpecError(SchedulerError, ValueError):
    """A job described as data does not fit its job type.

    The message names the job, the argument or option, and what was expected.
    """


class _Required:
    def __repr__(self) -> str:
        return "<required>"


#: The `default` of an argument that has none.
REQUIRED: Any = _Required()


@attrs.frozen(kw_only=True)
class ArgumentInfo:
    """One argument of a job type."""

    name: str
    annotation: Any  # the resolved annotation, or its string when it cannot be resolved
    default: Any = REQUIRED

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    @property
    def type(self) -> str:
        """The annotation as a short human string (``"int"``, ``"str or None"``)."""
        return describe_annotation(self.annotation)

    def to_json(self) -> dict[str, Any]:
        """``{"name", "type", "required", "default"}``; a default JSON cannot hold is its repr."""
        return {
            "name": self.name,
            "type": self.type,
            "required": self.required,
            "default": None if self.required else jsonable(self.default),
        }


@attrs.frozen(kw_only=True)
class JobTypeInfo:
    """What ``jobsched jobs list`` shows about a job type."""

    name: str
    factory: Any
    plugin: str | None
    model: str
    doc: str
    arguments: tuple[ArgumentInfo, ...]
    #: Whether the constructor takes the job options (priority, timeout, ...).
    accepts_options: bool

    @property
    def summary(self) -> str:
        """The first line of the docstring."""
        return self.doc.strip().splitlines()[0].strip() if self.doc.strip() else ""

    @property
    def qualname(self) -> str:
        return f"{self.factory.__module__}.{self.factory.__qualname__}"

    def argument(self, name: str) -> ArgumentInfo | None:
        return next((a for a in self.arguments if a.name == name), None)

    def to_json(self) -> dict[str, Any]:
        """The stable ``jobs list --json`` row."""
        return {
            "name": self.name,
            "plugin": self.plugin,
            "class": self.qualname,
            "model": self.model,
            "summary": self.summary,
            "doc": inspect.cleandoc(self.doc) if self.doc else "",
            "arguments": [a.to_json() for a in self.arguments],
        }


@attrs.frozen(kw_only=True)
class JobSpec:
    """A job as data: its registered type name, JSON arguments and options.

    `options` holds only what was given, JSON-ready: ``name`` (str),
    ``priority`` (``"low"``/``"medium"``/``"high"``/``"critical"``),
    ``timeout`` (seconds, or None for no timeout), ``retry``
    (``{"policy": name, ...policy options}``), ``deadline`` (monotonic
    seconds, as `Job.deadline`), ``retry_on`` and ``no_retry_on`` (lists of
    exception names). Delay and dependencies are not part of a
    job; they are given to ``submit``.
    """

    type: str
    args: Mapping[str, Any] = attrs.field(factory=dict)
    options: Mapping[str, Any] = attrs.field(factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "args": dict(self.args), "options": dict(self.options)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> JobSpec:
        """The inverse of `to_json`; a malformed mapping is a `JobSpecError`."""
        if not isinstance(data, Mapping) or not isinstance(data.get("type"), str):
            raise JobSpecError(f"a job spec needs a string 'type', got {data!r}")
        unknown = set(data) - {"type", "args", "options"}
        if unknown:
            raise JobSpecError(f"job spec: unknown keys {sorted(unknown)}")
        args, options = data.get("args", {}), data.get("options", {})
        if not isinstance(args, Mapping) or not isinstance(options, Mapping):
            raise JobSpecError("job spec: 'args' and 'options' must be objects")
        return cls(type=data["type"], args=dict(args), options=dict(options))


# ── describing job types ──────────────────────────────────────────────
def describe_job_type(
    factory: Any, name: str | None = None, plugin: str | None = None
) -> JobTypeInfo:
    """The arguments, model and docstring of a job type (a `Job` subclass)."""
    return _describe_cached(factory, name, plugin)


# A class does not change once defined, and building a job from data looks its
# type up every time (a store may rebuild many jobs): describe each type once.
@functools.lru_cache(maxsize=512)
def _describe_cached(factory: Any, name: str | None, plugin: str | None) -> JobTypeInfo:
    if isinstance(factory, type) and issubclass(factory, Job):
        adapt_attrs_job(factory)
    if attrs.has(factory) and is_adapted_attrs(factory):
        arguments = _attrs_arguments(factory)
        accepts = True
    else:
        arguments, accepts = _signature_arguments(factory)
    model = getattr(factory, "model", None)
    return JobTypeInfo(
        name=name or str(getattr(factory, "__name__", repr(factory))),
        factory=factory,
        plugin=plugin,
        model=str(model) if model is not None else "?",
        doc=inspect.getdoc(factory) or "",
        arguments=tuple(arguments),
        accepts_options=accepts,
    )


def _attrs_arguments(cls: type) -> list[ArgumentInfo]:
    hints = _module_namespace(cls)
    out = []
    for f in attrs.fields(cls):
        if not f.init:
            continue
        default = f.default
        if default is attrs.NOTHING:
            default = REQUIRED
        elif isinstance(default, attrs.Factory):  # type: ignore[arg-type]
            default = _Factory(default.factory)
        alias = getattr(f, "alias", None) or f.name.lstrip("_")
        out.append(ArgumentInfo(name=alias, annotation=_resolve(f.type, hints), default=default))
    return out


class _Factory:
    """A default computed per job (``attrs.Factory``); shown as ``factory()``."""

    def __init__(self, factory: Callable[[], Any]) -> None:
        self.factory = factory

    def __repr__(self) -> str:
        return f"{getattr(self.factory, '__name__', 'factory')}()"


def _signature_arguments(factory: Any) -> tuple[list[ArgumentInfo], bool]:
    target = factory.__init__ if isinstance(factory, type) else factory  # type: ignore[misc]
    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError):
        return [], True
    namespace = _module_namespace(factory)
    params = list(sig.parameters.values())
    if isinstance(factory, type) and params:
        params = params[1:]  # self
    out = []
    accepts_options = False
    for p in params:
        if p.kind is p.VAR_KEYWORD:
            accepts_options = True
            continue
        if p.kind is p.VAR_POSITIONAL:
            continue
        annotation = Any if p.annotation is p.empty else _resolve(p.annotation, namespace)
        default = REQUIRED if p.default is p.empty else p.default
        out.append(ArgumentInfo(name=p.name, annotation=annotation, default=default))
    return out, accepts_options


def _module_namespace(obj: Any) -> dict[str, Any]:
    module = sys.modules.get(getattr(obj, "__module__", "") or "")
    namespace: dict[str, Any] = dict(vars(builtins))
    namespace.update(vars(typing))
    if module is not None:
        namespace.update(vars(module))
    return namespace


def _resolve(annotation: Any, namespace: dict[str, Any]) -> Any:
    """Evaluate a string annotation; keep the string when it cannot be evaluated.

    (A name imported only under ``TYPE_CHECKING``, or defined in a function.)
    An unresolved annotation is shown as written and not checked.
    """
    if not isinstance(annotation, str):
        return annotation
    try:
        return eval(annotation, namespace)
    except Exception:
        return annotation


# ── checking JSON values against annotations ──────────────────────────
class _Mismatch(Exception):
    pass


def describe_annotation(annotation: Any) -> str:
    """A short human name for an annotation: ``int``, ``list of str``, ``float or None``."""
    if annotation is Any or annotation is inspect.Parameter.empty:
        return "any"
    if isinstance(annotation, str):
        return annotation
    if annotation is type(None) or annotation is None:
        return "None"
    origin = typing.get_origin(annotation)
    targs = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(describe_annotation(a) for a in targs)
    if origin is typing.Literal:
        return " or ".join(json.dumps(a) for a in targs)
    if origin in (list, tuple, set, frozenset, collections.abc.Sequence):
        if targs and targs[0] is not Any and targs[0] is not Ellipsis:
            return f"list of {describe_annotation(targs[0])}"
        return "list"
    if origin in (dict, collections.abc.Mapping):
        return "table"
    if isinstance(annotation, type):
        if issubclass(annotation, enum.Enum):
            return " or ".join(json.dumps(m.name.lower()) for m in annotation)
        if issubclass(annotation, pathlib.PurePath):
            return "path (str)"
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def check_value(value: Any, annotation: Any) -> Any:
    """`value` (from JSON or TOML) converted to fit `annotation`; `_Mismatch` if it can't.

    A `result_of` marker (or its JSON form) fits any annotation: it is
    checked when it is resolved to the upstream's result.
    """
    if value.__class__ is ResultOf:
        return value
    if value.__class__ is dict and "$result_of" in value:
        try:
            return marker_from_data(value)
        except ValueError:
            raise _Mismatch from None
    if annotation is Any or isinstance(annotation, str) or annotation is inspect.Parameter.empty:
        return value
    if annotation is None or annotation is type(None):
        if value is None:
            return None
        raise _Mismatch
    origin = typing.get_origin(annotation)
    targs = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        for member in targs:
            try:
                return check_value(value, member)
            except _Mismatch:
                continue
        raise _Mismatch
    if origin is typing.Literal:
        if value in targs:
            return value
        raise _Mismatch
    if origin is typing.Annotated:
        return check_value(value, targs[0])
    if origin in (list, set, frozenset, tuple, collections.abc.Sequence):
        if not isinstance(value, list | tuple):
            raise _Mismatch
        if origin is tuple and targs and (len(targs) != 2 or targs[1] is not Ellipsis):
            if len(targs) != len(value):
                raise _Mismatch
            return tuple(check_value(v, t) for v, t in zip(value, targs, strict=True))
        item = targs[0] if targs else Any
        items = [check_value(v, item) for v in value]
        return origin(items) if origin in (set, frozenset, tuple) else items
    if origin in (dict, collections.abc.Mapping):
        if not isinstance(value, dict):
            raise _Mismatch
        vtype = targs[1] if len(targs) == 2 else Any
        return {k: check_value(v, vtype) for k, v in value.items()}
    if not isinstance(annotation, type):
        return value  # TypeVar, NewType, protocols...: not checked
    if annotation is bool:
        if isinstance(value, bool):
            return value
        raise _Mismatch
    if annotation is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise _Mismatch
    if annotation is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        raise _Mismatch
    if issubclass(annotation, enum.Enum):
        return _to_enum(value, annotation)
    if issubclass(annotation, pathlib.PurePath):
        if isinstance(value, str | pathlib.PurePath):
            return annotation(value)
        raise _Mismatch
    if annotation in (list, tuple, set, frozenset):
        if isinstance(value, list | tuple):
            return annotation(value)
        raise _Mismatch
    if isinstance(value, annotation):
        return value
    raise _Mismatch


def _to_enum(value: Any, enum_type: type[enum.Enum]) -> Any:
    if isinstance(value, enum_type):
        return value
    if isinstance(value, str):
        for member in enum_type:
            if member.name.lower() == value.lower():
                return member
    if not isinstance(value, bool):
        try:
            return enum_type(value)
        except (ValueError, TypeError):
            pass
    raise _Mismatch


_show = describe_value


# ── options ───────────────────────────────────────────────────────────
# The spellings are `_options`'s, shared with `Job` itself (the Python API).
def parse_priority(value: Any) -> JobPriority:
    """``"low"``/``"medium"``/``"high"``/``"critical"`` (any case), 0-3 or a `JobPriority`."""
    try:
        return to_priority(value)
    except ValueError as exc:
        raise JobSpecError(str(exc)) from None


def build_retry_policy(value: Any, plugins: PluginManager) -> RetryPolicyLike:
    """A retry policy from ``{"policy": name, ...options}``, a policy name, or a policy.

    A wrong name or option is a `JobSpecError` listing the valid ones.
    """
    if isinstance(value, str):
        value = {"policy": value}
    if not isinstance(value, Mapping):
        if isinstance(value, RetryPolicyLike):
            return value
        raise JobSpecError(
            f'retry must be a table like {{ policy = "exponential", max_retries = 3 }} '
            f"or a policy name, got {_show(value)}"
        )
    options = dict(value)
    name = options.pop("policy", DEFAULT_RETRY_POLICY)
    if not isinstance(name, str):
        raise JobSpecError(f"retry policy must be a name, got {_show(name)}")
    try:
        factory = plugins.resolve("retry_policies", name)
    except PluginError as exc:
        raise JobSpecError(f"retry: {exc}") from None
    known = [a.name for a in describe_job_type(factory).arguments]
    for key in options:
        if key not in known:
            raise JobSpecError(
                f"retry policy {name!r} has no option {key!r}{_did_you_mean(key, known)} "
                f"(options: {', '.join(known) if known else 'none'})"
            )
    try:
        policy = factory(**options)
    except (TypeError, ValueError) as exc:
        raise JobSpecError(f"retry policy {name!r}: {exc}") from None
    return policy  # type: ignore[no-any-return]


def _normalize_options(
    options: Mapping[str, Any], plugins: PluginManager, label: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(constructor kwargs, JSON-ready options) from the given options."""
    kwargs: dict[str, Any] = {}
    data: dict[str, Any] = {}
    for key, value in options.items():
        if key not in JOB_OPTIONS:
            raise JobSpecError(
                f"{label}: unknown option {key!r}"
                f"{_did_you_mean(key, JOB_OPTIONS + RESULT_OPTIONS)} "
                f"(options: {', '.join(JOB_OPTIONS + RESULT_OPTIONS)})"
            )
        try:
            if key == "name":
                if not isinstance(value, str) or not value:
                    raise JobSpecError(f"name must be a non-empty string, got {_show(value)}")
                kwargs[key] = data[key] = value
            elif key == "priority":
                kwargs[key] = parse_priority(value)
                data[key] = priority_name(kwargs[key])
            elif key == "timeout":
                try:
                    timeout = to_timeout(value)
                except ValueError as exc:
                    raise JobSpecError(str(exc)) from None
                kwargs[key] = data[key] = None if timeout is None else float(timeout)
            elif key == "retry":
                kwargs[key] = build_retry_policy(value, plugins)
                data[key] = _retry_data(value, kwargs[key], plugins)
            elif key == "deadline":
                if value is not None and (
                    isinstance(value, bool) or not isinstance(value, int | float)
                ):
                    raise JobSpecError(f"deadline must be a number, got {_show(value)}")
                kwargs[key] = data[key] = None if value is None else float(value)
            elif key in ("retry_on", "no_retry_on"):
                try:
                    kwargs[key] = exception_names(value, key)
                except (TypeError, ValueError) as exc:
                    raise JobSpecError(str(exc)) from None
                data[key] = list(kwargs[key])
            elif key == "queue":
                try:
                    kwargs[key] = data[key] = check_queue(value)
                except ValueError as exc:
                    raise JobSpecError(str(exc)) from None
        except JobSpecError as exc:
            raise JobSpecError(f"{label}: {exc}") from None
    return kwargs, data


def _retry_data(given: Any, policy: Any, plugins: PluginManager) -> dict[str, Any] | None:
    if isinstance(given, str):
        return {"policy": given}
    if isinstance(given, Mapping):
        return {"policy": given.get("policy", DEFAULT_RETRY_POLICY), **given}
    return retry_policy_data(policy, plugins)


def retry_policy_data(policy: Any, plugins: PluginManager) -> dict[str, Any] | None:
    """``{"policy": name, ...fields}`` for an attrs policy of a registered class, else None."""
    names = [
        reg.name
        for reg in plugins.registry["retry_policies"].values()
        if reg.factory is type(policy)
    ]
    if len(names) != 1 or not attrs.has(type(policy)):
        return None
    # Keyed like build_retry_policy() takes them: by the constructor's names.
    fields = {
        getattr(f, "alias", None) or f.name.lstrip("_"): getattr(policy, f.name)
        for f in attrs.fields(type(policy))
        if f.init
    }
    return {"policy": names[0], **fields}


def _did_you_mean(name: str, known: Any) -> str:
    close = difflib.get_close_matches(name, list(known), n=2)
    return f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


# ── building jobs from data ───────────────────────────────────────────
def _plugins_or_default(plugins: PluginManager | None) -> PluginManager:
    if plugins is not None:
        return plugins
    from ._plugins import default_plugin_manager

    return default_plugin_manager()


def job_type_info(name: str, plugins: PluginManager | None = None) -> JobTypeInfo:
    """The registered job type `name`; `JobSpecError` with the closest names if unknown."""
    plugins = _plugins_or_default(plugins)
    reg = plugins.registry["job_types"].get(name)
    if reg is None:
        raise JobSpecError(plugins.unknown_name_message("job_types", name))
    return describe_job_type(reg.factory, name, reg.plugin)


def job_types(plugins: PluginManager | None = None) -> list[JobTypeInfo]:
    """Every registered job type, sorted by name."""
    plugins = _plugins_or_default(plugins)
    regs = plugins.registry["job_types"]
    return [describe_job_type(regs[n].factory, n, regs[n].plugin) for n in sorted(regs)]


def check_arguments(
    info: JobTypeInfo, args: Mapping[str, Any], label: str | None = None
) -> dict[str, Any]:
    """`args` checked against the type's arguments and converted (int -> float, ...).

    A missing, unknown or wrongly typed argument is a `JobSpecError` naming
    the job (`label`), the argument and what was expected.
    """
    label = label or f"{info.name} job"
    where = f"{label} ({info.name})" if info.name not in label else label
    if not isinstance(args, Mapping):
        raise JobSpecError(f"{where}: arguments must be a table, got {_show(args)}")
    known = [a.name for a in info.arguments]
    out: dict[str, Any] = {}
    for key, value in args.items():
        arg = info.argument(key)
        if arg is None:
            hint = (
                f"; {key!r} is an option: set it beside 'args', not inside"
                if key in JOB_OPTIONS
                else _did_you_mean(key, known)
            )
            raise JobSpecError(
                f"{where}: unknown argument {key!r}{hint} "
                f"(arguments: {', '.join(known) if known else 'none'})"
            )
        try:
            out[key] = check_value(value, arg.annotation)
        except _Mismatch:
            raise JobSpecError(
                f"{where}: argument {key!r} must be {arg.type}, got {_show(value)}"
            ) from None
    if not getattr(info.factory, "takes_results", False):
        for key, value in out.items():
            if any(True for _ in markers_in(value)):
                raise JobSpecError(
                    f"{where}: argument {key!r} is a result_of marker, but {info.name!r} is "
                    "not a task: an upstream's result can be passed to a task's arguments only"
                )
    missing = [a for a in info.arguments if a.required and a.name not in args]
    if missing:
        names = ", ".join(f"{a.name!r} ({a.type})" for a in missing)
        plural = "s" if len(missing) > 1 else ""
        raise JobSpecError(f"{where}: missing required argument{plural} {names}")
    return out


def build_job(
    spec: JobSpec | str,
    args: Mapping[str, Any] | None = None,
    *,
    plugins: PluginManager | None = None,
    label: str | None = None,
    **options: Any,
) -> Job:
    """Build a job from data: ``build_job("email", {"to": ..., "subject": ...}, priority="high")``.

    `spec` is a `JobSpec` or a registered type name (then `args` and
    `options` describe the rest). Arguments are checked against the type's
    attrs fields or ``__init__`` parameters; options are the `JOB_OPTIONS`
    (``priority`` may be a name, ``retry`` a ``{"policy": ..., ...}`` table).
    Every mistake is a `JobSpecError` that names the job (`label`, default
    ``"<type> job"``), the argument or option and what was expected. The job
    remembers its description: `job_spec` returns it.
    """
    if isinstance(spec, JobSpec):
        if args is not None or options:
            raise TypeError("build_job(spec) takes no further arguments or options")
        type_name, args, options = spec.type, spec.args, dict(spec.options)
    else:
        type_name, args = spec, args if args is not None else {}
    if not options:
        builder = job_builder(type_name, args, plugins=plugins, label=label)
        return builder(label or f"{type_name} job")
    plugins = _plugins_or_default(plugins)
    label = label or f"{type_name} job"
    info, checked = _checked_type(type_name, args, plugins, label)
    result_options = {k: options[k] for k in RESULT_OPTIONS if k in options}
    kwargs, data = _normalize_options(
        {k: v for k, v in options.items() if k not in RESULT_OPTIONS}, plugins, label
    )
    name = kwargs.pop("name", None)
    factory = info.factory
    where = _where(label, type_name)
    if not info.accepts_options:
        given = [o for o in kwargs if info.argument(o) is None]
        if given:
            raise JobSpecError(
                f"{where}: the job type does not take the options {given} "
                "(its __init__ has no **kw to pass them to Job)"
            )
    try:
        job = factory(**checked, **kwargs)
    except (TypeError, ValueError) as exc:
        raise JobSpecError(f"{where}: {type(exc).__name__}: {exc}") from None
    if not isinstance(job, Job):
        raise JobSpecError(f"{where}: the factory returned {job!r}, not a Job")
    if name is not None:
        job.name = name
    try:
        if "result_ttl" in result_options:
            job.result_ttl = data["result_ttl"] = to_result_ttl(result_options["result_ttl"])
        if "keep_result" in result_options:
            job.keep_result = data["keep_result"] = to_keep_result(result_options["keep_result"])
        if result_options.get("group") is not None:
            data["group"] = check_group(result_options["group"])
            set_job_group(job, data["group"])
    except ValueError as exc:
        raise JobSpecError(f"{where}: {exc}") from None
    spec = JobSpec(type=type_name, args=_jsonable_args(args), options=data)
    record_spec(job, spec)
    return job


def job_builder(
    type_name: str,
    args: Mapping[str, Any],
    *,
    plugins: PluginManager | None = None,
    label: str | None = None,
) -> Callable[[str], Job]:
    """`build_job(type_name, args)` in two steps: the checks now, the building later.

    The type is looked up and `args` are checked (and converted) here, once:
    every mistake is the `JobSpecError` `build_job` raises. The callable
    returned builds a new job from the checked arguments each time it is
    called (the type's own constructor runs for every job, so no two jobs
    share state), with the description it was built from (`job_spec`); a
    constructor that fails is a `JobSpecError` naming the label it is given.
    A scheduler that builds the same stored description over and over (a
    shared store's claims) checks it once.
    """
    plugins = _plugins_or_default(plugins)
    label = label or f"{type_name} job"
    info, checked = _checked_type(type_name, args, plugins, label)
    factory = info.factory
    spec = JobSpec(type=type_name, args=_jsonable_args(args), options={})

    def build(label: str) -> Job:
        try:
            job = factory(**checked)
        except (TypeError, ValueError) as exc:
            raise JobSpecError(f"{_where(label, type_name)}: {type(exc).__name__}: {exc}") from None
        if not isinstance(job, Job):
            raise JobSpecError(
                f"{_where(label, type_name)}: the factory returned {job!r}, not a Job"
            )
        record_spec(job, spec)
        return job

    return build


def _checked_type(
    type_name: Any, args: Mapping[str, Any], plugins: PluginManager, label: str
) -> tuple[JobTypeInfo, dict[str, Any]]:
    """The registered type `type_name` and `args` checked against it (what
    `build_job` and `job_builder` check first); a `JobSpecError` naming
    `label` for an unknown type or a wrong argument."""
    if not isinstance(type_name, str):
        raise JobSpecError(f"a job type name must be a string, got {_show(type_name)}")
    try:
        info = job_type_info(type_name, plugins)
    except JobSpecError as exc:
        raise JobSpecError(f"{label}: {exc}") from None
    return info, check_arguments(info, args, label)


def _where(label: str, type_name: str) -> str:
    """How an error names a job: its label, with its type unless the label says it."""
    return f"{label} ({type_name})" if type_name not in label else label


def _jsonable_args(args: Mapping[str, Any]) -> dict[str, Any]:
    return {k: jsonable(v) for k, v in args.items()}


def jsonable(value: Any) -> Any:
    """`value` as a JSON value for display: enums by lower-case name, paths as
    text, anything else JSON cannot hold as its repr."""
    if value is None or isinstance(value, bool | int | float | str) or value.__class__ is ResultOf:
        return value
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, enum.Enum):
        return value.name.lower()
    if isinstance(value, pathlib.PurePath):
        return str(value)
    return repr(value)


def job_spec(job: Job, plugins: PluginManager | None = None) -> JobSpec | None:
    """The data a job can be rebuilt from with `build_job`, or None.

    A job built by `build_job` returns exactly its description. A job of an
    attrs-defined type registered under one name is described from its
    fields (when they are JSON values). Anything else (a reference-style job
    built by hand, a `FunctionJob`) returns None: its arguments are not known.
    """
    spec = recorded_spec(job)
    if isinstance(spec, JobSpec):
        return spec
    cls = type(job)
    if not (attrs.has(cls) and is_adapted_attrs(cls)):
        return None
    plugins = _plugins_or_default(plugins)
    names = [r.name for r in plugins.registry["job_types"].values() if r.factory is cls]
    if len(names) != 1:
        return None
    args: dict[str, Any] = {}
    for f in attrs.fields(cls):
        if not f.init:
            continue
        value = getattr(job, f.name)
        if jsonable(value) != value and not isinstance(value, enum.Enum | pathlib.PurePath):
            return None
        args[getattr(f, "alias", None) or f.name.lstrip("_")] = jsonable(value)
    options: dict[str, Any] = {
        "name": job.name,
        "priority": priority_name(job.priority),
        "timeout": job.timeout,
        "deadline": job.deadline,
    }
    retry = retry_policy_data(job.retry, plugins)
    if retry is None:
        return None
    options["retry"] = retry
    for option in ("retry_on", "no_retry_on"):
        if getattr(job, option):
            options[option] = list(getattr(job, option))
    if job.queue != DEFAULT_QUEUE:
        options["queue"] = job.queue
    if job_group(job) is not None:
        options["group"] = job_group(job)
    return JobSpec(type=names[0], args=args, options=options)
