"""Checking what a store holds or returned: a row changed by hand is named, never used."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any

from .._errors import BadRowError, StoreError
from .._status import JobStatus
from .._trigger_rules import TRIGGER_RULES
from ._rows import (
    WORKER_COMMANDS,
    JobRow,
    ScheduleRow,
    SharedJobRow,
    SharedScheduleRow,
    Snapshot,
    WorkerRow,
)

# ── checking what a store returned ─────────────────────────────────────
_STATUSES = frozenset(s.value for s in JobStatus)


def _is_time(value: object) -> bool:
    return type(value) in (int, float) and math.isfinite(value)  # type: ignore[arg-type]


def _is_count(value: object) -> bool:
    return type(value) is int and value >= 0


def _is_flag(value: object) -> bool:
    return type(value) is bool


def _is_text(value: object) -> bool:
    return value is None or type(value) is str


_TIME_TYPES = (int, float)
_TEXT_OR_NONE = (str, type(None))
_isfinite = math.isfinite


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _job_row_problem(row: JobRow) -> str | None:
    """What is wrong with one stored job on its own, or None."""
    # The common case first, in one expression: a store may hold many rows.
    if (
        row.status in _STATUSES
        and type(row.run_at) in _TIME_TYPES
        and _isfinite(row.run_at)
        and type(row.submitted_at) in _TIME_TYPES
        and _isfinite(row.submitted_at)
        and (row.finished_at is None or _is_time(row.finished_at))
        and type(row.attempts) is int
        and row.attempts >= 0
        and type(row.seq) is int
        and row.seq >= 0
        and type(row.job_id) is str
        and type(row.type) is str
        and type(row.args) is str
        and row.args[:1] == "{"
        and type(row.options) is str
        and row.options[:1] == "{"
        and type(row.key) in _TEXT_OR_NONE
        and type(row.last_error) in _TEXT_OR_NONE
        and type(row.last_traceback) in _TEXT_OR_NONE
        and type(row.schedule_id) in _TEXT_OR_NONE
        and type(row.depends_on) is tuple
        and all(type(d) is str for d in row.depends_on)
        and row.trigger_rule in TRIGGER_RULES
        and (row.result is None or (type(row.result) is str and _is_json(row.result)))
    ):
        return None
    if row.status not in _STATUSES:
        return f"status {row.status!r} is not one of {', '.join(sorted(_STATUSES))}"
    for column in ("run_at", "submitted_at"):
        if not _is_time(getattr(row, column)):
            return f"{column} {_short(getattr(row, column))} is not a time"
    if row.finished_at is not None and not _is_time(row.finished_at):
        return f"finished_at {_short(row.finished_at)} is not a time"
    for column in ("attempts", "seq"):
        if not _is_count(getattr(row, column)):
            return f"{column} {_short(getattr(row, column))} is not a count"
    for column in ("job_id", "type", "args", "options"):
        if type(getattr(row, column)) is not str:
            return f"{column} {_short(getattr(row, column))} is not text"
    for column in ("args", "options"):
        # JSON text as the scheduler writes it: compact, so an object starts
        # with "{" (a full decode waits for the restore, which names the job).
        if not getattr(row, column).startswith("{"):
            return f"{column} {_short(getattr(row, column))} is not a JSON object"
    for column in ("key", "result", "last_error", "last_traceback", "schedule_id"):
        if not _is_text(getattr(row, column)):
            return f"{column} {_short(getattr(row, column))} is not text"
    if row.result is not None and not _is_json(row.result):
        return f"result {_short(row.result)} is not JSON"
    if not isinstance(row.depends_on, tuple | list) or not all(
        type(d) is str for d in row.depends_on
    ):
        return f"depends_on {_short(row.depends_on)} is not a list of job ids"
    if row.trigger_rule not in TRIGGER_RULES:
        return f"trigger_rule {_short(row.trigger_rule)} is not one of {', '.join(TRIGGER_RULES)}"
    return None


def _dependency_cycle(jobs: Sequence[JobRow]) -> list[str] | None:
    """A dependency cycle among these jobs (``[a, b, a]``), or None.

    The kernel makes cycles impossible (a job may only depend on jobs
    submitted before it), so one in a store was put there by hand, and its
    jobs would wait for each other forever.
    """
    deps = {row.job_id: row.depends_on for row in jobs if row.depends_on}
    done: set[str] = set()
    for start in deps:
        if start in done:
            continue
        # Depth-first, iterative: a long chain must not hit the recursion limit.
        path = [start]
        on_path = {start}
        todo = [iter(deps[start])]
        while todo:
            dep = next(todo[-1], None)
            if dep is None:
                todo.pop()
                finished = path.pop()
                on_path.discard(finished)
                done.add(finished)
                continue
            if dep in on_path:
                return [*path[path.index(dep) :], dep]
            if dep in done or dep not in deps:
                continue
            path.append(dep)
            on_path.add(dep)
            todo.append(iter(deps[dep]))
    return None


def _schedule_row_problem(row: ScheduleRow) -> str | None:
    if type(row.schedule_id) is not str:
        return f"schedule_id {_short(row.schedule_id)} is not text"
    for column in ("key", "last_job_id"):
        if not _is_text(getattr(row, column)):
            return f"{column} {_short(getattr(row, column))} is not text"
    if not _is_time(row.next_run):
        return f"next_run {_short(row.next_run)} is not a time"
    for column in ("allow_overlap", "active", "paused"):
        if not _is_flag(getattr(row, column)):
            return f"{column} {_short(getattr(row, column))} is not a flag"
    for column in ("fired", "skipped"):
        if not _is_count(getattr(row, column)):
            return f"{column} {_short(getattr(row, column))} is not a count"
    for column in ("trigger", "template"):
        value = getattr(row, column)
        if type(value) is not str:
            return f"{column} {_short(value)} is not text"
        if value or column == "trigger":  # a template is "" until the first fire
            try:
                decoded = json.loads(value)
            except ValueError:
                return f"{column} {_short(value)} is not JSON"
            if type(decoded) is not dict or (
                column == "trigger" and type(decoded.get("trigger")) is not dict
            ):
                return f"{column} {_short(value)} is not a JSON object as jobsched writes it"
    return None


# ── reading a shared store's rows: each column checked, in one place ───
def _is_time_or_none(value: object) -> bool:
    return value is None or _is_time(value)


def _is_number(value: object) -> bool:
    # Infinity included (a schedule's next run once it has ended, EDF's "no
    # deadline" in a sort key); NaN orders nothing.
    return type(value) in (int, float) and not math.isnan(value)  # type: ignore[arg-type]


def _is_id(value: object) -> bool:
    return type(value) is str and value != ""


def _is_object(value: object) -> bool:
    return type(value) is dict


def _is_object_or_none(value: object) -> bool:
    return value is None or type(value) is dict


def _is_status(value: object) -> bool:
    return type(value) is str and value in _STATUSES


def _is_rule(value: object) -> bool:
    return type(value) is str and value in TRIGGER_RULES


def _is_sort_key(value: object) -> bool:
    return type(value) is tuple and all(_is_number(x) for x in value)


def _are_texts(value: object) -> bool:
    return type(value) is tuple and all(type(x) is str for x in value)


def _are_ids(value: object) -> bool:
    return type(value) is tuple and all(_is_id(x) for x in value)


_Check = tuple[str, Callable[[Any], bool], str]
_SHARED_JOB_CHECKS: tuple[_Check, ...] = (
    ("job_id", _is_id, "a job id"),
    ("key", _is_text, "text"),
    ("type", _is_id, "a job type name"),
    ("args", _is_object, "a JSON object"),
    ("options", _is_object, "a JSON object"),
    ("status", _is_status, f"one of {', '.join(sorted(_STATUSES))}"),
    ("attempts", _is_count, "a count"),
    ("run_at", _is_time, "a time"),
    ("submitted_at", _is_time, "a time"),
    ("seq", _is_count, "a count"),
    ("sort_key", _is_sort_key, "a list of numbers"),
    ("unmet", _is_count, "a count"),
    ("lease_owner", _is_text, "text"),
    ("lease_expires", _is_time_or_none, "a time"),
    ("cancel_requested", _is_flag, "a flag"),
    ("last_error", _is_text, "text"),
    ("last_traceback", _is_text, "text"),
    ("job_group", _is_text, "text"),
    ("schedule_id", _is_text, "text"),
    ("submitted_by", _is_text, "text"),
    ("started_at", _is_time_or_none, "a time"),
    ("finished_at", _is_time_or_none, "a time"),
    ("unique_key", _is_text, "text"),
    ("progress", _is_object_or_none, "a JSON object"),
    ("result_expires", _is_time_or_none, "a time"),
    ("depends_on", _are_ids, "a list of job ids"),
    ("trigger_rule", _is_rule, f"one of {', '.join(TRIGGER_RULES)}"),
    ("build_refusals", _is_count, "a count"),
    ("last_refusal", _is_text, "text"),
    ("refused_by", _are_texts, "a list of texts"),
    ("queue", _is_id, "a queue name"),
)
_ATTEMPT_CHECKS: tuple[_Check, ...] = (
    ("number", _is_count, "a count"),
    ("status", _is_id, "text"),
    ("error", _is_text, "text"),
    ("started_at", _is_time_or_none, "a time"),
    ("finished_at", _is_time_or_none, "a time"),
    ("worker", _is_text, "text"),
    ("traceback", _is_text, "text"),
)
_SHARED_SCHEDULE_CHECKS: tuple[_Check, ...] = (
    ("schedule_id", _is_id, "a schedule id"),
    ("type", _is_id, "a job type name"),
    ("args", _is_object, "a JSON object"),
    ("options", _is_object, "a JSON object"),
    ("trigger", _is_object, "a JSON object"),
    ("next_run", _is_number, "a time"),
    ("allow_overlap", _is_flag, "a flag"),
    ("active", _is_flag, "a flag"),
    ("last_job_id", _is_text, "text"),
    ("fired", _is_count, "a count"),
    ("skipped", _is_count, "a count"),
    ("paused", _is_flag, "a flag"),
)


def bad_column(what: str, row_id: object, column: str, value: object, expected: str) -> BadRowError:
    """The `BadRowError` of a column that holds `value` where `expected` belongs."""
    return BadRowError(what, row_id, column, f"{_short(value)} is not {expected}")


def json_column(what: str, row_id: object, column: str, text: object) -> Any:
    """The value of a column a store keeps as JSON text (None stays None);
    `BadRowError` naming the row and the column if it is not JSON."""
    if text is None:
        return None
    if type(text) is not str:
        raise bad_column(what, row_id, column, text, "JSON text")
    try:
        return json.loads(text)
    except ValueError:
        raise bad_column(what, row_id, column, text, "JSON") from None


def _check(
    what: str, row_id: object, row: object, checks: tuple[_Check, ...], within: str = ""
) -> None:
    for column, test, expected in checks:
        value = getattr(row, column)
        if not test(value):
            raise bad_column(what, row_id, within + column, value, expected)


def checked_shared_job(row: SharedJobRow) -> SharedJobRow:
    """`row` if every column holds what `SharedJobRow` says, else a
    `BadRowError` naming the job and the column.

    A shared store passes every job row it reads through this (a row changed
    by hand must be named, never crash a reader or stall a worker). Only a
    completed job's `result` may be any JSON value.
    """
    # The common case first, in one expression: every claim reads its rows here.
    if (
        type(row.job_id) is str
        and row.job_id
        and type(row.type) is str
        and row.type
        and type(row.args) is dict
        and type(row.options) is dict
        and type(row.status) is str
        and row.status in _STATUSES
        and type(row.attempts) is int
        and row.attempts >= 0
        and type(row.run_at) in _TIME_TYPES
        and _isfinite(row.run_at)
        and type(row.submitted_at) in _TIME_TYPES
        and _isfinite(row.submitted_at)
        and type(row.seq) is int
        and row.seq >= 0
        and type(row.unmet) is int
        and row.unmet >= 0
        and type(row.sort_key) is tuple
        and all(type(x) in _TIME_TYPES and x == x for x in row.sort_key)  # x == x: not NaN
        and type(row.key) in _TEXT_OR_NONE
        and type(row.lease_owner) in _TEXT_OR_NONE
        and type(row.last_error) in _TEXT_OR_NONE
        and type(row.last_traceback) in _TEXT_OR_NONE
        and type(row.job_group) in _TEXT_OR_NONE
        and type(row.schedule_id) in _TEXT_OR_NONE
        and type(row.submitted_by) in _TEXT_OR_NONE
        and type(row.unique_key) in _TEXT_OR_NONE
        and (row.lease_expires is None or _is_time(row.lease_expires))
        and (row.started_at is None or _is_time(row.started_at))
        and (row.finished_at is None or _is_time(row.finished_at))
        and (row.result_expires is None or _is_time(row.result_expires))
        and type(row.cancel_requested) is bool
        and (row.progress is None or type(row.progress) is dict)
        and type(row.trigger_rule) is str
        and row.trigger_rule in TRIGGER_RULES
        and type(row.queue) is str
        and row.queue
        and type(row.depends_on) is tuple
        and not row.depends_on
        and not row.history
        and type(row.build_refusals) is int
        and row.build_refusals >= 0
        and type(row.last_refusal) in _TEXT_OR_NONE
        and type(row.refused_by) is tuple
        and not row.refused_by
    ):
        return row
    _check("job", row.job_id, row, _SHARED_JOB_CHECKS)
    for attempt in row.history:
        _check("job", row.job_id, attempt, _ATTEMPT_CHECKS, "attempt history's ")
    return row


def checked_shared_schedule(row: SharedScheduleRow) -> SharedScheduleRow:
    """`row` if every column holds what `SharedScheduleRow` says, else a
    `BadRowError` naming the schedule and the column."""
    _check("recurring schedule", row.schedule_id, row, _SHARED_SCHEDULE_CHECKS)
    return row


def _are_queues(value: object) -> bool:
    return type(value) is dict and all(
        type(k) is str and type(n) is int and n >= 0 for k, n in value.items()
    )


def _are_names(value: object) -> bool:
    return type(value) is list and all(type(n) is str for n in value)


_WORKER_CHECKS: tuple[_Check, ...] = (
    ("worker_id", _is_id, "a worker id"),
    ("host", lambda v: type(v) is str, "text"),
    ("pid", _is_count, "a process id"),
    ("queues", _are_queues, "an object of queue names to counts"),
    ("job_types", _are_names, "a list of job type names"),
    ("version", lambda v: type(v) is str, "text"),
    ("started_at", _is_time, "a time"),
    ("last_seen", _is_time, "a time"),
    ("lost_after", _is_number, "a number of seconds"),
    ("running", _is_count, "a count"),
    ("state", lambda v: v in ("running", "draining"), "'running' or 'draining'"),
    ("command", lambda v: v is None or v in WORKER_COMMANDS, "null, 'drain' or 'stop'"),
)


def checked_command(worker_id: str, command: object) -> str | None:
    """A registry row's ``command`` as `WorkersRole.heartbeat` returns it: None
    or one of `WORKER_COMMANDS`, else a `BadRowError` naming the worker."""
    if command is None or (isinstance(command, str) and command in WORKER_COMMANDS):
        return command
    raise bad_column("worker", worker_id, "command", command, "null, 'drain' or 'stop'")


def checked_worker(row: WorkerRow) -> WorkerRow:
    """`row` if every column holds what `WorkerRow` says, else a `BadRowError`
    naming the worker and the column (a registry row changed by hand)."""
    _check("worker", row.worker_id, row, _WORKER_CHECKS)
    return row


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_snapshot(url: str, snapshot: Snapshot) -> None:
    """Refuse a snapshot holding a row that could not be restored or shown.

    A row changed by hand (or by a broken store) - an unknown status, a time
    that is not a number, a result that is not JSON, an unknown trigger
    rule, a dependency on itself or a dependency cycle - raises `StoreError`
    naming the store and the row, before anything is restored. A store may
    call this in ``open`` before it writes anything, to leave such a file
    untouched.
    """
    for row in snapshot.jobs:
        _refuse_job(url, row, _job_row_problem(row))
    cycle = _dependency_cycle(snapshot.jobs)
    if cycle is not None:
        shown = cycle if len(cycle) <= 6 else [*cycle[:3], "...", *cycle[-2:]]
        where = (
            "it depends on itself"
            if len(cycle) == 2
            else f"it is in a dependency cycle ({' -> '.join(shown)})"
        )
        raise StoreError(
            f"{url}: job {cycle[0]} cannot be restored: {where}, so it could never run; "
            "jobsched left the store unchanged"
        )
    for srow in snapshot.schedules:
        wrong = _schedule_row_problem(srow)
        if wrong is not None:
            raise StoreError(
                f"{url}: recurring schedule {srow.schedule_id} cannot be restored: "
                f"{wrong}; jobsched left the store unchanged"
            )


def _refuse_job(url: str, row: JobRow, problem: str | None) -> None:
    if problem is not None:
        raise StoreError(
            f"{url}: job {row.job_id} cannot be restored: {problem}; "
            "jobsched left the store unchanged"
        )
