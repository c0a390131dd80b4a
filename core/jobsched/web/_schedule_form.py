"""A schedule to create or edit, read from a request and checked field by field.

``POST /api/schedules`` (create) and ``POST /api/schedules/{id}/edit`` take a
JSON object or the page's urlencoded form with the same names:

* ``type``: a registered job type (create only);
* ``args``: the job's arguments, a JSON object (the form sends its text);
* ``queue``: the jobs' queue (create only; default ``"default"``);
* ``cron`` (with ``tz``, an IANA zone, default UTC) or ``every`` (seconds):
  exactly one (the form says which with ``kind=cron|interval``). An edit
  without either keeps the schedule's rule; without ``args``, its arguments.

Every bad field is reported, each in one line naming it (`FormErrors`), so
the page can show them beside their fields.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import attrs

from jobsched import (
    DEFAULT_QUEUE,
    IntervalTrigger,
    Job,
    JobSpecError,
    PluginError,
    PluginManager,
    build_job,
    check_queue,
    job_types,
)

from ._http import shown

#: The fields a request may give (anything else is refused, naming it).
FIELDS = ("type", "args", "queue", "kind", "cron", "tz", "every", "csrf_token")


class FormErrors(Exception):
    """The request's bad fields: field name -> one line saying what is wrong."""

    def __init__(self, errors: Mapping[str, str]) -> None:
        self.errors = dict(errors)
        super().__init__("; ".join(f"{k}: {v}" for k, v in self.errors.items()))


@attrs.frozen(kw_only=True)
class Rule:
    """When a schedule fires: `every` seconds, or the `trigger` mapping."""

    every: float | None = None
    trigger: dict[str, Any] | None = None


@attrs.frozen(kw_only=True)
class NewSchedule:
    """A checked create request: the job to schedule and its rule."""

    job: Job
    rule: Rule


@attrs.frozen(kw_only=True)
class ScheduleEdit:
    """A checked edit request: the new arguments (None: keep) and rule (None: keep)."""

    args: dict[str, Any] | None
    rule: Rule | None


def _text(value: Any) -> str | None:
    """A field's value as text; None for absent or blank."""
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value)
    return text.strip() or None


def _unknown_fields(fields: Mapping[str, Any], allowed: tuple[str, ...]) -> dict[str, str]:
    return {name: "not a field of this request" for name in fields if name not in allowed}


def _args(fields: Mapping[str, Any], errors: dict[str, str]) -> dict[str, Any] | None:
    """``args``: an object, or the text of one (the form's); None if absent."""
    value = fields.get("args")
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            errors["args"] = f"not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
            return None
    if not isinstance(value, dict):
        errors["args"] = f"must be a JSON object of the job's arguments, got {shown(str(value))}"
        return None
    return value


def _rule(
    fields: Mapping[str, Any], plugins: PluginManager, errors: dict[str, str], *, required: bool
) -> Rule | None:
    """``cron`` (+ ``tz``) or ``every``; the form's ``kind`` picks one of them."""
    kind = _text(fields.get("kind"))
    cron, every = _text(fields.get("cron")), fields.get("every")
    if isinstance(every, str) and not every.strip():
        every = None
    if kind is not None:
        if kind not in ("cron", "interval"):
            errors["kind"] = f"must be 'cron' or 'interval', got {shown(kind)}"
            return None
        # The form sends both inputs: the one `kind` names counts.
        if kind == "cron":
            every = None
            if cron is None:
                errors["cron"] = "give a cron expression, such as '0 2 * * 1'"
                return None
        elif every is None:
            errors["every"] = "give the interval in seconds, such as 3600"
            return None
        else:
            cron = None
    if cron is not None and every is not None:
        errors["every"] = "give a cron expression or an interval (every), not both"
        return None
    if cron is None and every is None:
        if required:
            errors["every"] = "give a cron expression (cron) or an interval in seconds (every)"
        return None
    if every is not None:
        seconds = _seconds(every, errors)
        return None if seconds is None else Rule(every=seconds)
    assert cron is not None
    tz = _text(fields.get("tz")) or "UTC"
    try:
        factory = plugins.resolve("triggers", "cron")
    except PluginError:
        errors["cron"] = "no cron trigger plugin is installed (jobsched's 'cron_trigger')"
        return None
    # Any error of the trigger plugin is the field's, never a 500.
    try:
        factory(cron, tz="UTC")
    except Exception as exc:
        errors["cron"] = str(exc) or type(exc).__name__
        return None
    try:
        factory(cron, tz=tz)
    except Exception as exc:
        errors["tz"] = str(exc) or type(exc).__name__
        return None
    return Rule(trigger={"cron": " ".join(cron.split()), "tz": tz})


def _seconds(value: Any, errors: dict[str, str]) -> float | None:
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            errors["every"] = f"must be a number of seconds, got {shown(value)}"
            return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        errors["every"] = f"must be a number of seconds, got {shown(str(value))}"
        return None
    if value <= 0:
        errors["every"] = f"must be a positive number of seconds, got {value:g}"
        return None
    try:
        IntervalTrigger(value)
    except ValueError as exc:
        errors["every"] = str(exc)
        return None
    return float(value)


def _job(
    type_name: str, args: dict[str, Any], queue: str, plugins: PluginManager, errors: dict[str, str]
) -> Job | None:
    try:
        job = build_job(type_name, args, plugins=plugins, label=f"{type_name} job")
    except (JobSpecError, ValueError, TypeError) as exc:
        errors["args"] = str(exc)
        return None
    job.queue = queue  # checked by check_queue
    return job


def check_create(fields: Mapping[str, Any], plugins: PluginManager) -> NewSchedule:
    """The schedule a create request describes; `FormErrors` with every bad field."""
    errors = _unknown_fields(fields, FIELDS)
    known = [t.name for t in job_types(plugins)]
    type_name = _text(fields.get("type"))
    if type_name is None:
        errors["type"] = "choose the job type to schedule"
    elif type_name not in known:
        errors["type"] = (
            f"unknown job type {shown(type_name)} (registered: {', '.join(known) or 'none'})"
        )
    # Not stripped: a queue's name is checked as given (" x" is refused).
    queue = fields.get("queue") or DEFAULT_QUEUE
    try:
        queue = check_queue(queue)
    except (ValueError, TypeError) as exc:
        errors["queue"] = str(exc)
    args = _args(fields, errors)
    rule = _rule(fields, plugins, errors, required=True)
    job = None
    if type_name in known and "args" not in errors and "queue" not in errors:
        assert type_name is not None
        job = _job(type_name, args or {}, queue, plugins, errors)
    if errors or job is None or rule is None:
        raise FormErrors(errors)
    return NewSchedule(job=job, rule=rule)


def check_edit(
    fields: Mapping[str, Any], type_name: str, queue: str, plugins: PluginManager
) -> ScheduleEdit:
    """The change an edit request describes, for a schedule of job type
    `type_name` (its arguments are checked against the type's fields)."""
    allowed = tuple(f for f in FIELDS if f not in ("type", "queue"))
    errors = _unknown_fields(fields, allowed)
    args = _args(fields, errors)
    rule = _rule(fields, plugins, errors, required=False)
    if args is not None:
        _job(type_name, args, queue, plugins, errors)
    if errors:
        raise FormErrors(errors)
    if args is None and rule is None:
        raise FormErrors({"args": "nothing to change: give new args, cron or every"})
    return ScheduleEdit(args=args, rule=rule)
