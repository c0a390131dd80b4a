"""The job file's tables and keys: the one place where a key is declared.

Every key is an attrs field made with `key()`: its parser turns the TOML value
into the field's value (or raises `ValueError` with a message), and its doc is
what ``docs/jobfile.md`` and the error messages say. To add a key, add a field
here; to add a table, add a class and a line to `TABLES`. Checks that involve
several keys go in the class's ``check()``; checks that need the plugins
(registered names, job arguments) are in ``_load.py``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from .. import (
    COALESCE_POLICIES,
    MAX_DELAY,
    MAX_GROUP_LENGTH,
    MAX_KEY_LENGTH,
    MAX_RETRIES,
    MAX_WORKERS,
    MIN_INTERVAL,
    TRIGGER_RULES,
    Limits,
    Rate,
    check_queue,
    group,
    result_of,
)

#: ``attrs.field(metadata=...)`` key under which a field's `KeySpec` lives.
META = "jobsched.jobfile"

# A job file takes the Python API's bounds (RetryPolicy, submit's delay,
# num_workers); every duration in it (a timeout, a deadline, ...) shares the
# delay's bound of one year.
#: The longest duration a job file may give: one year.
MAX_DURATION = MAX_DELAY
#: Retry-policy options that are delays (``exponential``: base_delay,
#: max_delay; ``fixed``: seconds).
RETRY_DELAY_OPTIONS = ("base_delay", "max_delay", "seconds")


@attrs.frozen
class KeySpec:
    """How one key of a table is parsed and documented."""

    parse: Callable[[Any], Any]
    doc: str
    required: bool


def key(
    parse: Callable[[Any], Any],
    *,
    doc: str,
    default: Any = attrs.NOTHING,
    factory: Callable[[], Any] | None = None,
) -> Any:
    """Declare a key: a field whose TOML value goes through `parse`."""
    required = default is attrs.NOTHING and factory is None
    spec = KeySpec(parse, doc, required)
    if factory is not None:
        return attrs.field(factory=factory, metadata={META: spec})
    return attrs.field(default=default, metadata={META: spec})


def keys_of(cls: type) -> dict[str, KeySpec]:
    """The declared keys of a table class, in declaration order."""
    return {f.name: f.metadata[META] for f in attrs.fields(cls) if META in f.metadata}


# ── value parsers: each raises ValueError with a message that says what was expected ──
def _describe(value: Any) -> str:
    kinds = {bool: "boolean", int: "integer", float: "float", str: "string", list: "array"}
    kind = "table" if isinstance(value, dict) else kinds.get(type(value), type(value).__name__)
    return f"{kind} {value!r}"


def string(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"must be a non-empty string, got {_describe(value)}")
    return str(value)


_ID = re.compile(r"^[A-Za-z0-9_.:-]+$")


def identifier(value: Any) -> str:
    text = string(value)
    if not _ID.match(text):
        raise ValueError(
            f"must use only letters, digits and _ . : - (it names the job), got {text!r}"
        )
    if len(text) > MAX_KEY_LENGTH:
        # The id is the job's key in a store, which indexes it.
        raise ValueError(
            f"must be at most {MAX_KEY_LENGTH} characters (it is the job's key), "
            f"got {len(text)}: {text[:40]!r}..."
        )
    return text


def positive_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"must be a positive integer, got {_describe(value)}")
    return value


def group_name(value: Any) -> str:
    """A job's group: a non-empty string of at most `MAX_GROUP_LENGTH` characters."""
    if not isinstance(value, str) or not value or len(value) > MAX_GROUP_LENGTH:
        shown = f"{len(value)} characters" if isinstance(value, str) and value else None
        raise ValueError(
            f"must be a non-empty string of at most {MAX_GROUP_LENGTH} characters, "
            f"got {shown or _describe(value)}"
        )
    return value


def integer(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"must be an integer, got {_describe(value)}")
    return value


def boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"must be true or false, got {_describe(value)}")
    return value


def table(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f'must be a table, like {{ name = "value" }}, got {_describe(value)}')
    return value


def id_list(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise ValueError(f"must be an array of job ids, got {_describe(value)}")
    out = []
    for item in value:
        if not isinstance(item, str):
            raise ValueError(f"must be an array of job ids (strings), got {_describe(item)}")
        out.append(item)
    return tuple(dict.fromkeys(out))  # a repeated id means the same dependency


_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(ms|s|m|h)?\s*$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def duration(value: Any) -> float:
    """Seconds from a number or a string with a unit: ``"100ms"``, ``"2s"``, ``"5m"``, ``"1h"``."""
    if isinstance(value, bool):
        raise ValueError(f'must be a duration like "100ms", "2s", "5m" or seconds, got {value}')
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and (match := _DURATION.match(value)):
        seconds = float(match.group(1)) * _UNITS[match.group(2)]
    else:
        raise ValueError(
            f'must be a duration like "100ms", "2s", "5m" or a number of seconds, '
            f"got {_describe(value)}"
        )
    if math.isnan(seconds) or math.isinf(seconds):
        raise ValueError(f"must be a finite duration, got {value!r}")
    if seconds > MAX_DURATION:
        raise ValueError(f"must be at most {MAX_DURATION:.0f} seconds (one year), got {value!r}")
    return seconds


def non_negative_duration(value: Any) -> float:
    seconds = duration(value)
    if seconds < 0:
        raise ValueError(f"must not be negative, got {value!r}")
    return seconds


def positive_duration(value: Any) -> float:
    seconds = duration(value)
    if seconds <= 0:
        raise ValueError(f"must be positive, got {value!r}")
    return seconds


def interval_duration(value: Any) -> float:
    """An `every`: a duration of at least `MIN_INTERVAL` (what the interval trigger takes)."""
    seconds = positive_duration(value)
    if seconds < MIN_INTERVAL:
        raise ValueError(f"must be at least {MIN_INTERVAL} seconds (1ms), got {value!r}")
    return seconds


def worker_count(value: Any) -> int:
    count = positive_int(value)
    if count > MAX_WORKERS:
        raise ValueError(f"must be at most {MAX_WORKERS}, got {value!r}")
    return count


def parse_timeout(value: Any) -> float | bool:
    """A positive duration, or ``false`` for no timeout."""
    if value is False:
        return False
    try:
        return positive_duration(value)
    except ValueError as exc:
        raise ValueError(f"{exc} (or false for no timeout)") from None


def parse_priority(value: Any) -> str | int:
    if isinstance(value, str) and value.lower() in ("low", "medium", "high", "critical"):
        return value.lower()
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 3:
        return value
    raise ValueError(f"must be one of low, medium, high, critical (or 0-3), got {_describe(value)}")


def parse_queue(value: Any) -> str:
    """A queue's name (`jobsched.check_queue`)."""
    try:
        return check_queue(value, "the queue")
    except ValueError as exc:
        raise ValueError(str(exc).removeprefix("the queue ")) from None


def parse_retry(value: Any) -> dict[str, Any]:
    """A policy name or a table ``{ policy = "name", ...options }``."""
    if isinstance(value, str):
        return {"policy": value}
    if isinstance(value, dict):
        _check_retry_bounds(value)
        return dict(value)
    raise ValueError(
        "must be a policy name or a table like "
        f'{{ policy = "exponential", max_retries = 3 }}, got {_describe(value)}'
    )


def _check_retry_bounds(options: Mapping[str, Any]) -> None:
    """Bounds on the options every built-in policy shares; the policy checks the rest."""
    retries = options.get("max_retries")
    if retries is not None and (
        isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= MAX_RETRIES
    ):
        raise ValueError(
            f"max_retries must be an integer from 0 to {MAX_RETRIES}, got {_describe(retries)}"
        )
    for name in RETRY_DELAY_OPTIONS:
        delay = options.get(name)
        if isinstance(delay, int | float) and not isinstance(delay, bool) and delay > MAX_DURATION:
            raise ValueError(
                f"{name} must be at most {MAX_DURATION:.0f} seconds (one year), got {delay!r}"
            )


def exception_list(value: Any) -> tuple[str, ...]:
    """Exception class names: ``["TimeoutError", "myapp.errors.Transient"]`` (or one name)."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(i, str) and i for i in items):
        raise ValueError(
            'must be an array of exception class names, like ["TimeoutError", '
            f'"myapp.errors.Transient"], got {_describe(value)}'
        )
    return tuple(items)


def trigger_rule(value: Any) -> str:
    if value not in TRIGGER_RULES:
        raise ValueError(f"must be one of {', '.join(TRIGGER_RULES)}, got {_describe(value)}")
    return str(value)


def limit_table(value: Any) -> dict[str, int]:
    """A table of names to positive integers: ``{ process = 2 }``."""
    out = {}
    for name, limit in table(value).items():
        try:
            out[name] = positive_int(limit)
        except ValueError as exc:
            raise ValueError(f"{name!r} {exc}") from None
    return out


def rate_table(value: Any) -> dict[str, Rate]:
    """A table of job types to rates: ``{ email = "10/s" }`` or ``{ rate = "10/s", burst = 5 }``."""
    out = {}
    for name, spec in table(value).items():
        try:
            out[name] = Rate.parse(spec)
        except ValueError as exc:
            raise ValueError(f"{name!r}: {exc}") from None
    return out


def trigger_table(value: Any) -> dict[str, Any]:
    """``{ cron = "0 2 * * *", tz = "Europe/Berlin" }``; the plugins check the rest later."""
    spec = table(value)
    if not spec:
        raise ValueError('must name a trigger, like { cron = "*/5 * * * *", tz = "Europe/Berlin" }')
    return dict(spec)


def coalesce_policy(value: Any) -> str:
    if value not in COALESCE_POLICIES:
        raise ValueError(f"must be one of {', '.join(COALESCE_POLICIES)}, got {_describe(value)}")
    return str(value)


# ── the tables ────────────────────────────────────────────────────────
@attrs.frozen(kw_only=True)
class SchedulerSettings:
    """``[scheduler]``: how the jobs are run. Every key is optional."""

    strategy: str = key(string, default="priority", doc="a registered strategy name")
    workers: int = key(
        worker_count, default=4, doc=f"how many jobs may run at once (1 to {MAX_WORKERS})"
    )
    seed: int | None = key(integer, default=None, doc="seeds the retry jitter, for repeatable runs")
    line: int | None = None

    def check(self) -> None:
        """Checks across keys; raise ValueError."""


@attrs.frozen(kw_only=True)
class JobTemplate:
    """The keys a [[job]] and a [[recurring]] entry share: what to run and how."""

    id: str = key(identifier, doc="unique in the file; [[job]] ids are what depends_on names")
    type: str = key(string, doc="a registered job type (see `jobsched jobs list`)")
    args: dict[str, Any] = key(table, factory=dict, doc="the job type's arguments")
    priority: str | int | None = key(
        parse_priority, default=None, doc="low, medium (the default), high or critical"
    )
    timeout: float | bool | None = key(
        parse_timeout,
        default=None,
        doc="seconds one attempt may run (default: the job type's own), or false for none",
    )
    retry: dict[str, Any] | None = key(
        parse_retry,
        default=None,
        doc='a retry policy: a name ("none") or { policy = "exponential", ...options }',
    )
    deadline: float | None = key(
        non_negative_duration,
        default=None,
        doc="seconds after the run starts that the job is due (the edf strategy uses it)",
    )
    result_ttl: float | None = key(
        non_negative_duration,
        default=None,
        doc="how long a completed job's result is kept (default: for good)",
    )
    keep_result: bool | None = key(
        boolean, default=None, doc="false stores no result at all (default true)"
    )
    retry_on: tuple[str, ...] = key(
        exception_list,
        factory=tuple,
        doc='retry only these failures: exception names, a builtin bare ("TimeoutError"), '
        'others as "module.Class"',
    )
    no_retry_on: tuple[str, ...] = key(
        exception_list, factory=tuple, doc="never retry these failures (exception names)"
    )
    queue: str | None = key(
        parse_queue,
        default=None,
        doc='the queue the job waits in (default "default"; docs/queues.md)',
    )
    group: str | None = key(
        group_name,
        default=None,
        doc="the job's group, a tenant or customer: [limits] group caps each group's "
        "running jobs, and groups take turns",
    )
    line: int | None = None

    @property
    def table_name(self) -> str:
        raise NotImplementedError

    @property
    def label(self) -> str:
        return f"{self.table_name} {self.id!r}"

    def job_options(self, now: float) -> dict[str, Any]:
        """The `jobsched.build_job` options; `now` is the monotonic start of the run."""
        options: dict[str, Any] = {"name": self.id}
        if self.priority is not None:
            options["priority"] = self.priority
        if self.timeout is not None:
            options["timeout"] = None if self.timeout is False else self.timeout
        if self.retry is not None:
            options["retry"] = self.retry
        if self.deadline is not None:
            options["deadline"] = now + self.deadline
        if self.result_ttl is not None:
            options["result_ttl"] = self.result_ttl
        if self.keep_result is not None:
            options["keep_result"] = self.keep_result
        if self.retry_on:
            options["retry_on"] = list(self.retry_on)
        if self.no_retry_on:
            options["no_retry_on"] = list(self.no_retry_on)
        if self.queue is not None:
            options["queue"] = self.queue
        if self.group is not None:
            options["group"] = self.group
        return options

    def check(self) -> None:
        """Checks across keys; raise ValueError."""


@attrs.frozen(kw_only=True)
class JobEntry(JobTemplate):
    """``[[job]]``: one job, run once."""

    delay: float = key(
        non_negative_duration, default=0.0, doc="wait this long before the first attempt"
    )
    depends_on: tuple[str, ...] = key(
        id_list,
        factory=tuple,
        doc="ids of [[job]] entries that must complete first (in any order in the file)",
    )
    trigger_rule: str = key(
        trigger_rule,
        default="all_success",
        doc="when the job runs after its depends_on: all_success, all_done, one_success, "
        "one_failed or none_failed",
    )
    cancel_after: float | None = key(
        non_negative_duration,
        default=None,
        doc="cancel the job if it has not finished this long after the run starts "
        "(0 cancels it before it runs)",
    )
    unique_key: str | None = key(
        string,
        default=None,
        doc="a dedupe key: while a job with this key is pending or running, "
        "a job with the same key is not added",
    )

    @property
    def table_name(self) -> str:
        return "job"

    def check(self) -> None:
        """Checks across keys; raise ValueError. (``trigger_rule`` needs upstreams,
        which ``[[chain]]`` and ``result_of`` add too: the loader checks it.)"""


@attrs.frozen(kw_only=True)
class RecurringEntry(JobTemplate):
    """``[[recurring]]``: a job submitted again at a fixed rate, or whenever a trigger fires."""

    every: float | None = key(
        interval_duration,
        default=None,
        doc='the interval: "100ms", "2s", "5m", "1h" or seconds (or use `trigger`)',
    )
    trigger: dict[str, Any] | None = key(
        trigger_table,
        default=None,
        doc='when to fire instead of `every`: { cron = "0 2 * * *", tz = "Europe/Berlin" }, '
        '{ date = "2026-12-01T09:00:00", tz = "..." } or { interval = 5 }',
    )
    misfire_grace_time: float | None = key(
        non_negative_duration,
        default=None,
        doc="skip (and report) a fire that comes later than this",
    )
    coalesce: str = key(
        coalesce_policy,
        default="one",
        doc="fires missed while paused: one (run once), all (run each), none (skip them)",
    )
    jitter: float = key(
        non_negative_duration,
        default=0.0,
        doc="delay each run by a random time up to this long",
    )
    times: int | None = key(
        positive_int, default=None, doc="stop after this many runs have been submitted"
    )
    until: float | None = key(
        positive_duration, default=None, doc="stop submitting this long after the run starts"
    )
    start_in: float = key(
        non_negative_duration, default=0.0, doc="the first run comes this long after the start"
    )
    allow_overlap: bool = key(
        boolean,
        default=False,
        doc="submit a run even while the previous one is unfinished (default: skip it)",
    )

    @property
    def table_name(self) -> str:
        return "recurring"

    def check(self) -> None:
        if (self.every is None) == (self.trigger is None):
            raise ValueError(
                "needs `every` or `trigger` (one of them): "
                'every = "5m", or trigger = { cron = "*/5 * * * *", tz = "Europe/Berlin" }'
            )
        if self.trigger is not None and self.start_in:
            raise ValueError("start_in is for `every`; a trigger says when it first fires")
        if self.times is None and self.until is None:
            raise ValueError(
                "needs `times` or `until`, or it would never finish "
                '(for example times = 3, or until = "10s")'
            )


@attrs.frozen(kw_only=True)
class LimitsSettings:
    """``[limits]``: concurrency and rate limits. Every key is optional."""

    executors: dict[str, int] = key(
        limit_table,
        factory=dict,
        doc="most attempts at once per executor: { process = 2 }",
    )
    job_types: dict[str, int] = key(
        limit_table,
        factory=dict,
        doc='most attempts at once per job type: { "csv-export" = 1 }',
    )
    rates: dict[str, Rate] = key(
        rate_table,
        factory=dict,
        doc='most starts per time per job type: { email = "10/s" } or '
        '{ email = { rate = "10/s", burst = 5 } }',
    )
    group: int | None = key(
        positive_int,
        default=None,
        doc="most attempts at once of each job group (each tenant): 2",
    )
    line: int | None = None

    def check(self) -> None:
        """Checks across keys; raise ValueError."""

    def limits(self) -> Limits:
        return Limits(
            executors=self.executors, job_types=self.job_types, rates=self.rates, group=self.group
        )


def id_steps(value: Any) -> tuple[str, ...]:
    """At least two ids, in order (a chain's steps)."""
    ids = id_list(value)
    if len(ids) < 2 or len(ids) != len(value):
        raise ValueError(f"must be an array of at least two different ids, got {_describe(value)}")
    return ids


def id_members(value: Any) -> tuple[str, ...]:
    """At least one [[job]] id (a group's members)."""
    ids = id_list(value)
    if not ids or len(ids) != len(value):
        raise ValueError(
            f"must be an array of one or more different [[job]] ids, got {_describe(value)}"
        )
    return ids


@attrs.frozen(kw_only=True)
class GroupEntry:
    """``[[group]]``: [[job]] entries named together, independent of each other."""

    id: str = key(
        identifier,
        doc="unique among all ids of the file; chain steps and result_of may name it",
    )
    members: tuple[str, ...] = key(
        id_members,
        doc="ids of [[job]] entries; result_of the group is the list of their results, "
        "in this order",
    )
    line: int | None = None

    @property
    def label(self) -> str:
        return f"group {self.id!r}"

    def check(self) -> None:
        """Checks across keys; raise ValueError."""


@attrs.frozen(kw_only=True)
class ChainEntry:
    """``[[chain]]``: steps that run one after the other."""

    steps: tuple[str, ...] = key(
        id_steps,
        doc="ids of [[job]] or [[group]] entries: each step waits until every job of the "
        "previous step completed",
    )
    line: int | None = None

    def check(self) -> None:
        """Checks across keys; raise ValueError."""


@attrs.frozen
class TableKind:
    """A top-level table: ``[name]`` (one) or ``[[name]]`` (an array of them)."""

    cls: type
    array: bool


#: The top-level tables of a job file.
TABLES: Mapping[str, TableKind] = {
    "scheduler": TableKind(SchedulerSettings, array=False),
    "limits": TableKind(LimitsSettings, array=False),
    "job": TableKind(JobEntry, array=True),
    "recurring": TableKind(RecurringEntry, array=True),
    "group": TableKind(GroupEntry, array=True),
    "chain": TableKind(ChainEntry, array=True),
}


@attrs.frozen(kw_only=True)
class JobFile:
    """A loaded and checked job file.

    `jobs` keeps the file's order; `submit_order` is the order they are
    submitted in: the file's order, except that a job comes after the jobs it
    depends on.
    """

    source: str
    #: Every top-level table by name, parsed (a table added to `TABLES` lands here).
    tables: Mapping[str, Any]
    scheduler: SchedulerSettings
    jobs: tuple[JobEntry, ...]
    recurring: tuple[RecurringEntry, ...]
    submit_order: tuple[JobEntry, ...]
    #: ``[[group]]`` ids -> their members' [[job]] ids.
    groups: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict)

    def args_of(self, entry: JobTemplate, job_of: Callable[[str], Any]) -> dict[str, Any]:
        """`entry`'s arguments, each ``{ result_of = ID }`` table made a
        `jobsched.result_of` marker: `job_of(id)` gives a [[job]] entry's job
        (or its id), a group stands for the list of its members' results."""
        return {k: self._with_results(v, job_of) for k, v in entry.args.items()}

    def _with_results(self, value: Any, job_of: Callable[[str], Any]) -> Any:
        ref = result_ref(value)
        if ref is not None:
            names = [ref] if isinstance(ref, str) else ref
            refs = [
                group(*(job_of(m) for m in self.groups[n])) if n in self.groups else job_of(n)
                for n in names
            ]
            if isinstance(ref, str):
                return result_of(refs[0])
            return [result_of(r) for r in refs]
        if isinstance(value, list):
            return [self._with_results(v, job_of) for v in value]
        if isinstance(value, dict):
            return {k: self._with_results(v, job_of) for k, v in value.items()}
        return value


def result_ref(value: Any) -> str | list[str] | None:
    """What a ``{ result_of = ID }`` (or ``= [IDS]``) table names, or None for any
    other value; a malformed one is a `ValueError`."""
    if not isinstance(value, dict) or "result_of" not in value or len(value) != 1:
        return None
    ref = value["result_of"]
    if isinstance(ref, str) and ref:
        return ref
    if isinstance(ref, list) and ref and all(isinstance(r, str) and r for r in ref):
        return list(ref)
    raise ValueError(f"result_of must be an entry id or an array of ids, got {_describe(ref)}")


def result_refs(value: Any) -> list[str]:
    """Every id the ``{ result_of = ... }`` tables in an argument value name."""
    ref = result_ref(value)
    if ref is not None:
        return [ref] if isinstance(ref, str) else ref
    if isinstance(value, list):
        return [r for v in value for r in result_refs(v)]
    if isinstance(value, dict):
        return [r for v in value.values() for r in result_refs(v)]
    return []
