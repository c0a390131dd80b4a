"""The codec: the one mapping between a job and its data, (type name, JSON args, options).

Every store keeps jobs this way, never as pickles, and every path that writes
or reads one goes through here: the journal of a one-owner store, shared
mode, and `Client`. So an option is spelled one way everywhere, a job that
cannot be stored is refused with the same `JobSpecError` whatever the store,
and a result JSON cannot hold is stored one way (`jobsched.store.encode_result`,
beside the row types whose ``result`` it fills: stores and their readers use it too).

The stored options (`NewJob.options` documents them for store authors):

=========== ===============================================================
name        always: the job's name
executor    always: the executor that runs the job (``"async"``,
            ``"thread"``, ...); stores count executor limits by it.
            Informational when read back: the job type decides where its
            jobs run.
priority    ``"low"``, ``"high"`` or ``"critical"``; left out when medium
timeout     seconds per attempt, or null for none; left out when 30.0
retry       ``{"policy": NAME, ...the policy's fields}``; left out for the
            default policy
deadline    wall-clock epoch seconds; left out when there is none
retry_on    the exception names worth a retry (``["TimeoutError",
            "myapp.errors.Transient"]``); left out when empty
no_retry_on the exception names never retried; left out when empty
traceparent the trace context of the submit: a W3C ``traceparent``
            (``00-<trace id>-<span id>-<flags>``), or (``otel``, when its
            propagator writes more: tracestate, baggage, B3) its headers as
            a JSON object; set by a tracing plugin through the
            ``jobsched_submit_hook``; left out when there is none
result_ttl  seconds a completed job's result is kept (then a reaper
            removes it); left out when it is kept for good (or for the
            worker's default, ``JobScheduler(result_ttl=...)``)
keep_result ``false``: the result is not stored at all; left out when true
queue       the queue the job waits in; left out when ``"default"`` (a
            shared store also keeps it in a column of its own, which
            claims filter on: `NewJob.queue`)
group       the job's group (a tenant: group limits and claim turns); left
            out when it has none. A shared store copies it into its
            ``job_group`` column, which its claims read.
=========== ===============================================================

A left-out option *is* the default: `JobCodec.build` sets it explicitly, so a
job type whose constructor has other defaults is rebuilt as it was stored.
Stores written before the codec spelled ``priority`` as a number (0-3);
`JobCodec.build` reads both. Beside the options a store may keep its own keys
(`STORE_KEYS`): ``unique_key`` (a one-owner store's dedupe key) and
``scheduled_for`` (the period a recurring schedule fired the job for).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from ._job import (
    DEFAULT_RETRY,
    DEFAULT_TIMEOUT,
    FunctionJob,
    Job,
    is_adapted_attrs,
    job_group,
    rare_options_are_defaults,
    set_job_queue_and_group,
)
from ._jobtypes import (
    JobSpecError,
    build_retry_policy,
    job_builder,
    job_spec,
    jsonable,
    retry_policy_data,
)
from ._options import (
    DEFAULT_QUEUE,
    MAX_NESTING,
    check_group,
    check_queue,
    describe_value,
    is_retry_spec,
    priority_name,
    text_problem,
    to_keep_result,
    to_priority,
    to_result_ttl,
    to_timeout,
)
from ._result_of import job_id_of, to_data
from ._status import JobPriority
from .store import NewJob, encode_json

if TYPE_CHECKING:
    from ._clock import Clock
    from ._plugins import PluginManager
    from ._strategy import SortKey

#: The options a stored job has, in the order they are written.
OPTIONS = (
    "name",
    "executor",
    "priority",
    "timeout",
    "retry",
    "deadline",
    "traceparent",
    "result_ttl",
    "keep_result",
    "retry_on",
    "no_retry_on",
    "queue",
    "group",
)
#: Keys a store keeps beside the options; `JobCodec.build` accepts and ignores them.
STORE_KEYS = ("unique_key", "scheduled_for")
_KNOWN_KEYS = frozenset(OPTIONS + STORE_KEYS)

MEDIUM = JobPriority.MEDIUM


# ── time ───────────────────────────────────────────────────────────────
def wall_offset(clock: Clock) -> float:
    """Add to one of `clock`'s monotonic times to get wall-clock time.

    Stores keep wall-clock times (a monotonic time means nothing after a
    restart or on another host); the kernel counts monotonic time.
    """
    return clock.time() - clock.now()


def sort_key(
    strategy_key: Callable[[Job], SortKey], job: Job, *, submitted_at: float, offset: float
) -> tuple[float, ...]:
    """The strategy's key for `job` as numbers, computed with wall-clock times.

    The key is taken with ``seq = 0`` (a shared store breaks ties by its own
    submit order) and with `submitted_at` (wall clock) and the deadline in
    wall time, so aging and EDF compare jobs from different hosts on one time
    line. A key that is not all numbers is a `JobSpecError`.
    """
    saved = job.seq, job.submitted_at, job.deadline
    try:
        job.seq = 0
        job.submitted_at = submitted_at
        if job.deadline is not None:
            job.deadline += offset
        key = strategy_key(job)
    finally:
        job.seq, job.submitted_at, job.deadline = saved
    try:
        return tuple(map(float, key))
    except (TypeError, ValueError):
        owner = getattr(strategy_key, "__self__", strategy_key)
        raise JobSpecError(
            f"strategy {type(owner).__name__} gives the key {key!r} for {job!r}: "
            "a shared store needs a key of numbers only"
        ) from None


# ── what every store can hold ──────────────────────────────────────────
def check_storable(value: Any, text: str | None, what: str) -> None:
    """Refuse JSON that some store could not keep: a string (or table key)
    with a NUL or a lone surrogate (PostgreSQL refuses both, SQLite would keep
    them), or lists and tables nested more than `MAX_NESTING` deep.

    `text` is `value` encoded (ASCII-only: every such character is escaped),
    so the common case is decided by a few substring searches; only a
    suspect text (or None: too deep to encode) walks `value`, and only a
    value found wrong is walked again to say where. A `JobSpecError` names
    `what` and where.
    """
    if text is not None and plainly_storable(text):
        return
    strings = text is None or "\\u0000" in text or "\\ud" in text
    if _is_storable(value, strings):
        return
    raise JobSpecError(_why_not_storable(value, what))


def plainly_storable(text: str) -> bool:
    """Whether JSON `text` is storable at a glance (`check_storable` without
    the value: what it decides for most values, before naming anything)."""
    return (
        "\\u0000" not in text
        and "\\ud" not in text
        and text.count("[") + text.count("{") <= MAX_NESTING
    )


_SCALARS = frozenset({int, float, bool, type(None)})


def _is_storable(value: Any, strings: bool) -> bool:
    """`check_storable`'s walk, lean: it is on the submit path of big
    arguments. Strings are looked at only when `strings` is true."""
    stack = [(value, 0)]
    pop, push = stack.pop, stack.append
    while stack:
        item, depth = pop()
        cls = item.__class__
        if cls is str or isinstance(item, str):
            if text_problem(item) is not None:
                return False
            continue
        if cls is dict or isinstance(item, Mapping):
            if strings:
                for key in item:
                    push((key, depth))
            members = item.values()
        elif cls is list or cls is tuple or isinstance(item, list | tuple):
            members = item
        else:
            continue
        if depth > MAX_NESTING:
            return False
        depth += 1
        for member in members:
            kind = member.__class__
            if kind not in _SCALARS and (strings or kind is not str):
                push((member, depth))
    return True


def _why_not_storable(value: Any, what: str) -> str:
    """What `check_storable` refuses in `value`, and where."""
    # (value, depth, where it is, the top-level member it is in)
    stack: list[tuple[Any, int, str, str]] = [(value, 0, what, what)]
    while stack:
        item, depth, where, top = stack.pop()
        if isinstance(item, str):
            problem = text_problem(item)
            if problem is not None:
                return f"{where} {problem}: no store can hold it as text"
        elif isinstance(item, Mapping | list | tuple):
            if depth > MAX_NESTING:
                return (
                    f"{top} nests lists and tables more than {MAX_NESTING} deep "
                    "(MAX_NESTING), more than every store can hold"
                )
            if isinstance(item, Mapping):
                for key, member in item.items():
                    inner = f"{where}[{key!r}]"
                    stack.append((key, depth, f"{where}: the key {key!r}", top))
                    stack.append((member, depth + 1, inner, inner if depth == 0 else top))
            else:
                for i, member in enumerate(item):
                    inner = f"{where}[{i}]"
                    stack.append((member, depth + 1, inner, inner if depth == 0 else top))
    return f"{what} cannot be stored"  # not reached: _is_storable found a problem


# ── jobs ───────────────────────────────────────────────────────────────
#: Stored descriptions whose checks a codec keeps (`JobCodec.build`).
BUILDERS_KEPT = 1024
_KEYED_TYPES = frozenset({str, int, float, bool, type(None)})


def _description_key(type_name: str, args: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """A key for the description ``(type_name, args)``, or None when an
    argument is not a JSON scalar. Each value's type is in the key: ``1``,
    ``1.0`` and ``True`` are equal in Python but not to a job type's checks."""
    if type(args) is not dict:
        return None  # the checks say what it is
    items = []
    for name, value in args.items():
        kind = type(value)
        if kind not in _KEYED_TYPES:
            return None
        items.append((name, kind, value))
    return (type_name, *items)


class JobCodec:
    """Describes jobs as data and builds them back.

    Built once per scheduler (or client) with its plugins. Only job types and
    retry policies that plugins registered can be described or built:
    loading a store never runs code its data names. Describing is on the
    durable submit path, so per-class facts and common options are cached.
    """

    def __init__(self, plugins: PluginManager) -> None:
        self.plugins = plugins
        self._retry_cache: dict[int, tuple[Any, dict[str, Any]]] = {}
        # Per job class: (type name, ((argument, attribute), ...)) for registered
        # attrs job types, whose arguments are read straight off the fields;
        # None sends the class through job_spec().
        self._plans: dict[type, tuple[str, tuple[tuple[str, str], ...]] | None] = {}
        # Options without a deadline or trace -> (retry policy, options dict, its JSON text).
        self._options: dict[tuple[Any, ...], tuple[Any, dict[str, Any], str]] = {}
        # A stored description (`_description_key`) -> (the job type's
        # registration it was checked against, its `job_builder`).
        self._builders: dict[tuple[Any, ...], tuple[Any, Callable[[str], Job]]] = {}

    # ── describing ─────────────────────────────────────────────────────
    def describe(self, job: Job, offset: float) -> tuple[str, str, str]:
        """``(type name, args JSON text, options JSON text)`` of `job`.

        `offset` turns the job's monotonic deadline into wall-clock time (see
        `wall_offset`). A job that cannot be stored is a `JobSpecError`
        saying why (`why_not_data`).
        """
        type_name, _, args_json = self._arguments(job, job_id_of)
        _, options_json = self._described_options(job, offset)
        return type_name, args_json, options_json

    def describe_data(
        self, job: Job, offset: float, id_of: Callable[[Job], str] | None = None
    ) -> tuple[str, dict[str, Any], dict[str, Any]]:
        """``(type name, args, options)`` as JSON values (dicts, fresh copies).

        A `result_of` marker is kept as ``{"$result_of": id}``; `id_of` names
        an upstream given as a `Job` (default: its ``job_id``).
        """
        type_name, args, _ = self._arguments(job, id_of or job_id_of)
        options, _ = self._described_options(job, offset)
        return type_name, args, dict(options)

    def describe_shared(
        self, job: Job, offset: float
    ) -> tuple[str, dict[str, Any], str, dict[str, Any], str]:
        """``(type name, args, args' JSON, options, options' JSON)`` for a job
        without `result_of` markers: `describe_data` with the JSON texts,
        which tell alike jobs apart, and without its copies (the options
        dict is this codec's own, shared by alike jobs: never change it).
        """
        type_name, args, args_text = self._arguments(job, job_id_of)
        options, options_text = self._described_options(job, offset)
        return type_name, args, args_text, options, options_text

    def options(self, job: Job, offset: float) -> dict[str, Any]:
        """The job's stored options (see the module docstring), a fresh dict."""
        return dict(self._described_options(job, offset)[0])

    def _arguments(self, job: Job, id_of: Callable[[Job], str]) -> tuple[str, dict[str, Any], str]:
        try:
            type_name, args, text = self._encode_arguments(job, id_of)
        except RecursionError:
            # Deeper than the encoder goes: the walk over the fields says which argument.
            cls: type = type(job)
            fields = attrs.fields(cls) if attrs.has(cls) else ()
            raw = {
                getattr(f, "alias", None) or f.name.lstrip("_"): getattr(job, f.name)
                for f in fields
                if f.init
            }
            check_storable(raw, None, f"{job!r}: argument")
            raise JobSpecError(
                f"{job!r}: its arguments nest lists and tables more than {MAX_NESTING} deep "
                "(MAX_NESTING), more than every store can hold"
            ) from None
        if not plainly_storable(text):  # else the job's repr is spelled for nothing
            check_storable(args, text, f"{job!r}: argument")
        return type_name, args, text

    def _encode_arguments(
        self, job: Job, id_of: Callable[[Job], str]
    ) -> tuple[str, dict[str, Any], str]:
        # A registered attrs type: its arguments are its fields (a job built
        # by build_job has the same ones, maybe with defaults left out).
        cls = type(job)
        try:
            plan = self._plans[cls]
        except KeyError:
            plan = self._plans[cls] = self._plan(cls)
        if plan is not None:
            type_name, fields = plan
            if not fields:
                return type_name, {}, "{}"
            args = {arg: getattr(job, attr) for arg, attr in fields}
            try:
                return type_name, args, encode_json(args)
            except (TypeError, ValueError):
                pass  # job_spec() below converts (enums, paths) or says which argument
        spec = job_spec(job, self.plugins)
        if spec is None:
            raise JobSpecError(self.why_not_data(job))
        args = dict(spec.args)
        try:
            return spec.type, args, encode_json(args)
        except (TypeError, ValueError) as first:
            exc = first
            if job.takes_results:
                # result_of markers: kept as their JSON form, upstreams by id.
                try:
                    args = {k: to_data(v, id_of) for k, v in args.items()}
                    return spec.type, args, encode_json(args)
                except (TypeError, ValueError) as again:
                    exc = again
            raise JobSpecError(
                f"{job!r}: a store keeps jobs as data, and the arguments of job type "
                f"{spec.type!r} are not JSON: {exc}"
            ) from None

    def _plan(self, cls: type) -> tuple[str, tuple[tuple[str, str], ...]] | None:
        names = [r.name for r in self.plugins.registry["job_types"].values() if r.factory is cls]
        if len(names) != 1 or not attrs.has(cls) or not is_adapted_attrs(cls):
            return None
        fields = tuple(
            (getattr(f, "alias", None) or f.name.lstrip("_"), f.name)
            for f in attrs.fields(cls)
            if f.init
        )
        return names[0], fields

    def _described_options(self, job: Job, offset: float) -> tuple[dict[str, Any], str]:
        retry = job.retry
        model = job.model
        cache_key: tuple[Any, ...] | None = None
        if job.deadline is None:
            if rare_options_are_defaults(job):
                # The type stands for its rarely set options.
                cache_key = (job.__class__, job.name, job.priority, job.timeout, id(retry), model)
            elif job.traceparent is None:
                cache_key = (
                    job_group(job),
                    job.name,
                    job.priority,
                    job.timeout,
                    id(retry),
                    model,
                    job.result_ttl,
                    job.keep_result,
                    job.retry_on,
                    job.no_retry_on,
                    job.queue,
                )
            if cache_key is not None:
                cached = self._options.get(cache_key)
                if cached is not None and cached[0] is retry:
                    return cached[1], cached[2]
        group = job_group(job)
        options: dict[str, Any] = {
            "name": job.name,
            "executor": getattr(model, "value", model),
        }
        if job.priority != MEDIUM:
            options["priority"] = priority_name(job.priority)
        if job.timeout != DEFAULT_TIMEOUT:
            options["timeout"] = job.timeout
        if retry is not DEFAULT_RETRY:
            options["retry"] = self._retry_data(job)
        if job.deadline is not None:
            options["deadline"] = job.deadline + offset
        if job.traceparent is not None:
            options["traceparent"] = job.traceparent
        if job.result_ttl is not None:
            options["result_ttl"] = job.result_ttl
        if not job.keep_result:
            options["keep_result"] = False
        if job.retry_on:
            options["retry_on"] = list(job.retry_on)
        if job.no_retry_on:
            options["no_retry_on"] = list(job.no_retry_on)
        queue = job.queue
        if queue != DEFAULT_QUEUE:
            options["queue"] = queue
        if group is not None:
            options["group"] = group
        try:
            options_json = encode_json(options)
        except (TypeError, ValueError) as exc:
            raise JobSpecError(f"{job!r}: its options are not JSON: {exc}") from None
        if not plainly_storable(options_json):
            check_storable(options, options_json, f"{job!r}: option")
        if cache_key is not None:
            if len(self._options) >= 4096:
                self._options.clear()  # names vary per job: keep the cache bounded
            self._options[cache_key] = (retry, options, options_json)
        return options, options_json

    def _retry_data(self, job: Job) -> dict[str, Any]:
        policy = job.retry
        cached = self._retry_cache.get(id(policy))
        if cached is not None and cached[0] is policy:
            return cached[1]
        # A policy still written as data (a task's retry={...}; a scheduler
        # resolves it at submit, a client does not): these plugins resolve it.
        resolved = build_retry_policy(policy, self.plugins) if is_retry_spec(policy) else policy
        described = retry_policy_data(resolved, self.plugins)
        if described is None:
            raise JobSpecError(
                f"{job!r}: a store keeps jobs as data, and its retry policy {policy!r} is not "
                f"a registered retry policy (registered: "
                f"{', '.join(self.plugins.names('retry_policies'))})"
            )
        self._retry_cache[id(policy)] = (policy, described)
        return described

    def why_not_data(self, job: Job) -> str:
        """Why `job` cannot be stored (the message of the `JobSpecError`)."""
        if isinstance(job, FunctionJob):
            return (
                f"{job!r}: a plain function cannot be stored: a store keeps jobs as data "
                "(a registered job type and JSON arguments) that a restart or another "
                "process can build again; register a job type and submit that"
            )
        cls = type(job)
        names = [r.name for r in self.plugins.registry["job_types"].values() if r.factory is cls]
        if len(names) == 1 and attrs.has(cls):
            for field in attrs.fields(cls):
                value = getattr(job, field.name, None)
                if field.init and jsonable(value) != value:
                    return (
                        f"{job!r}: a store keeps jobs as data, and argument "
                        f"{field.name!r} of job type {names[0]!r} is not a JSON value: {value!r}"
                    )
            if retry_policy_data(job.retry, self.plugins) is None:
                return (
                    f"{job!r}: a store keeps jobs as data, and its retry policy {job.retry!r} "
                    f"is not a registered retry policy "
                    f"(registered: {', '.join(self.plugins.names('retry_policies'))})"
                )
        registered = ", ".join(self.plugins.names("job_types")) or "none"
        return (
            f"{job!r}: a store keeps jobs as data (a registered job type and JSON "
            f"arguments), and {cls.__qualname__} is not a registered job type whose arguments "
            f"can be read back (registered: {registered}); register it with a "
            "jobsched_register_job_types hook, or build the job with build_job"
        )

    # ── building ───────────────────────────────────────────────────────
    def build(
        self,
        type_name: str,
        args: Mapping[str, Any],
        options: Mapping[str, Any],
        offset: float,
        label: str,
    ) -> Job:
        """A new job from its stored description (the inverse of `describe`).

        `offset` is the one given to `describe` now: it turns the stored
        wall-clock deadline back into monotonic time. Anything wrong (an
        unknown type or option, arguments that no longer fit, a bad value) is
        a `JobSpecError` that starts with `label`.
        """
        if not isinstance(options, Mapping):
            raise JobSpecError(f"{label}: options must be a table, got {describe_value(options)}")
        unknown = sorted(set(options) - _KNOWN_KEYS)
        if unknown:
            raise JobSpecError(
                f"{label}: unknown option {unknown[0]!r} (stored options: {', '.join(OPTIONS)})"
            )
        job = self._builder(type_name, args, label)(label)
        try:
            self._apply_options(job, options, offset)
        except (JobSpecError, ValueError, TypeError) as exc:
            raise JobSpecError(f"{label}: {exc}") from None
        return job

    def _builder(self, type_name: str, args: Mapping[str, Any], label: str) -> Callable[[str], Job]:
        """`job_builder` for this description, checked once while the job type's
        registration stays the same (arguments of JSON scalars only: a built
        job never shares a list or table of its arguments with another)."""
        registration = self.plugins.registry["job_types"].get(type_name)
        key = _description_key(type_name, args)
        if key is not None:
            cached = self._builders.get(key)
            if cached is not None and cached[0] is registration:
                return cached[1]
        builder = job_builder(type_name, args, plugins=self.plugins, label=label)
        if key is not None:
            if len(self._builders) >= BUILDERS_KEPT:
                self._builders.clear()  # every job's arguments may differ: stay bounded
            self._builders[key] = (registration, builder)
        return builder

    def _apply_options(self, job: Job, options: Mapping[str, Any], offset: float) -> None:
        name = options.get("name")
        if name is not None:
            if not isinstance(name, str) or not name:
                raise JobSpecError(f"name must be a non-empty string, got {describe_value(name)}")
            job.name = name
        executor = options.get("executor")
        if executor is not None and not isinstance(executor, str):
            raise JobSpecError(f"executor must be a name, got {describe_value(executor)}")
        # A number is how stores written before the codec spelled it.
        job.priority = to_priority(options.get("priority", MEDIUM))
        timeout = to_timeout(options.get("timeout", DEFAULT_TIMEOUT))
        job.timeout = None if timeout is None else float(timeout)
        retry = options.get("retry")
        job.retry = DEFAULT_RETRY if retry is None else build_retry_policy(retry, self.plugins)
        deadline = options.get("deadline")
        if deadline is None:
            job.deadline = None
        elif isinstance(deadline, bool) or not isinstance(deadline, int | float):
            raise JobSpecError(f"deadline must be a number, got {describe_value(deadline)}")
        else:
            job.deadline = deadline - offset
        traceparent = options.get("traceparent")
        if traceparent is not None and not isinstance(traceparent, str):
            raise JobSpecError(f"traceparent must be a string, got {describe_value(traceparent)}")
        # Set only when it differs: a fresh job has none of these, and each
        # setter stores a new extras record.
        if job.traceparent != traceparent:
            job.traceparent = traceparent
        # Left out: the job type's own default (what a job built now has).
        if "result_ttl" in options:
            job.result_ttl = to_result_ttl(options["result_ttl"])
        if "keep_result" in options:
            job.keep_result = to_keep_result(options["keep_result"])
        # Names only: loading a store imports nothing (`_retry_filter` matches by name).
        for option in ("retry_on", "no_retry_on"):
            names = options.get(option, [])
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                raise JobSpecError(
                    f"{option} must be a list of exception names, got {describe_value(names)}"
                )
            if getattr(job, option) != tuple(names):
                setattr(job, option, tuple(names))
        queue = options.get("queue", DEFAULT_QUEUE)
        group = options.get("group")
        if queue != job.queue or group != job_group(job):
            set_job_queue_and_group(job, check_queue(queue), check_group(group))

    # ── rows for a shared store ────────────────────────────────────────
    def new_job(
        self,
        job: Job,
        *,
        strategy_key: Callable[[Job], SortKey],
        now: float,
        offset: float,
        job_id: str | None = None,
        delay: float = 0.0,
        depends_on: Iterable[str] = (),
        key: str | None = None,
        unique_key: str | None = None,
        schedule_id: str | None = None,
        scheduled_for: float | None = None,
        submitted_by: str | None = None,
        trigger_rule: str = "all_success",
    ) -> NewJob:
        """The `NewJob` row that submits `job` to a shared store.

        `now` is the wall-clock time of the submit (``run_at = now + delay``);
        `offset` turns the job's monotonic times into wall-clock time (see
        `wall_offset`); `strategy_key` is the strategy's ``key`` (see
        `sort_key`). `job_id` defaults to the job's own. `scheduled_for` is
        the period a recurring schedule fires the job for; `trigger_rule`
        says when it runs given how `depends_on` end. The job itself is
        not changed. A job that cannot be stored is a `JobSpecError`.
        """
        type_name, args, options = self.describe_data(job, offset)
        if scheduled_for is not None:
            options["scheduled_for"] = scheduled_for
        return NewJob(
            job_id=job.job_id if job_id is None else job_id,
            key=key,
            type=type_name,
            args=args,
            options=options,
            run_at=now + delay,
            submitted_at=now,
            sort_key=sort_key(strategy_key, job, submitted_at=now, offset=offset),
            depends_on=tuple(depends_on),
            schedule_id=schedule_id,
            submitted_by=submitted_by,
            unique_key=unique_key,
            trigger_rule=trigger_rule,
            queue=job.queue,
        )
