"""What the pages draw, computed in Python so the templates only place it.

Pure functions of the operator API's records: the throughput chart's bars,
the dependency graph's records (`_workflow` lays a workflow out in them), a
schedule's next fires with their daylight-saving notes, its cron expression
in plain English and its edit form's values, and the small formatting
filters of the templates. Nothing here touches the network or the store.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

import attrs

from .. import PluginError

#: The statuses in the order the pages list them.
STATUSES = ("pending", "running", "retry_wait", "completed", "failed", "timed_out", "cancelled")
#: Statuses a job can be retried from (``Client.retry``).
RETRYABLE = frozenset({"failed", "timed_out", "cancelled"})
#: Statuses a job can be cancelled from.
CANCELLABLE = frozenset({"pending", "running", "retry_wait"})


def status_name(status: Any) -> str:
    """``"failed"`` for ``JobStatus.FAILED`` or ``"failed"``."""
    return str(getattr(status, "value", status))


# ── formatting ─────────────────────────────────────────────────────────
def when(ts: float | None) -> str:
    """An epoch time as ``2026-12-01 08:05:18`` UTC ("" for None)."""
    if ts is None or not math.isfinite(ts):
        return ""
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def duration(seconds: float | None) -> str:
    """``"850 ms"``, ``"12.5 s"``, ``"3 min 20 s"``, ``"2 h 5 min"``, ``"3 d 4 h"``."""
    if seconds is None or not math.isfinite(seconds):
        return ""
    seconds = max(seconds, 0.0)
    if seconds < 0.01:  # a job's p50 can be well under a millisecond
        return f"{seconds * 1000:.2g} ms"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = int(seconds)
    for unit, size, sub, sub_size in (
        ("d", 86400, "h", 3600),
        ("h", 3600, "min", 60),
        ("min", 60, "s", 1),
    ):
        if whole >= size:
            rest = (whole % size) // sub_size
            return f"{whole // size} {unit} {rest} {sub}" if rest else f"{whole // size} {unit}"
    return f"{whole} s"  # pragma: no cover - the loop always returns for >= 60


def ago(ts: float | None, now: float | None = None) -> str:
    """``"12 s ago"``, ``"5 min ago"`` or ``"in 3 h"``: `ts` relative to `now`, one unit."""
    if ts is None or not math.isfinite(ts):
        return ""
    delta = (time.time() if now is None else now) - ts
    size = abs(delta)
    if size < 1:
        return "just now"
    for unit, seconds in (("d", 86400), ("h", 3600), ("min", 60), ("s", 1)):
        if size >= seconds:
            text = f"{int(size // seconds)} {unit}"
            break
    return f"{text} ago" if delta > 0 else f"in {text}"


def pretty_json(value: Any) -> str:
    """`value` as indented JSON (a value JSON cannot hold shows as its repr)."""
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=repr)


def compact_json(value: Any) -> str:
    """`value` as one line of JSON, for table cells."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=repr)


#: Characters of a value a list's cell shows, and the job page.
CELL_PREVIEW = 200
PAGE_PREVIEW = 20_000
#: A table of up to this many keys is shown sorted; a larger one in its own
#: order (sorting would read all of it).
_SORTED_KEYS = 256


class _Full(Exception):
    """The preview has its characters."""


@attrs.frozen(kw_only=True)
class Preview:
    """At most `limit` characters of a JSON value; `cut` when there is more."""

    text: str
    cut: bool


def json_preview(value: Any, limit: int, *, indent: int | None = None) -> Preview:
    """`value` as JSON (`indent`: pretty), cut after `limit` characters.

    The work is bounded by `limit`, not by the value: a 50 MB argument costs
    what its first `limit` characters cost (a long string is cut before it
    is encoded, a long list or table is left after its first items).
    """
    out: list[str] = []
    left = limit

    def emit(text: str) -> None:
        nonlocal left
        if len(text) > left:
            out.append(text[: max(left, 0)])
            left = 0
            raise _Full
        out.append(text)
        left -= len(text)

    def separate(n: int, level: int) -> None:
        """Before the `n`-th member of a container at depth `level`."""
        if indent is not None:
            emit(("," if n else "") + "\n" + " " * (indent * level))
        elif n:
            emit(", ")

    def close(level: int) -> None:
        if indent is not None:
            emit("\n" + " " * (indent * level))

    def walk(item: Any, level: int) -> None:
        if isinstance(item, str):
            emit(json.dumps(item[: left + 1], ensure_ascii=False))
        elif isinstance(item, Mapping):
            emit("{")
            pairs: Iterable[tuple[Any, Any]] = item.items()
            if len(item) <= _SORTED_KEYS:
                pairs = sorted(pairs, key=lambda pair: str(pair[0]))
            for n, (key, member) in enumerate(pairs):
                separate(n, level + 1)
                walk(str(key), level + 1)
                emit(": ")
                walk(member, level + 1)
            if item:
                close(level)
            emit("}")
        elif isinstance(item, list | tuple):
            emit("[")
            for n, member in enumerate(item):
                separate(n, level + 1)
                walk(member, level + 1)
            if item:
                close(level)
            emit("]")
        else:
            emit(json.dumps(item, ensure_ascii=False, default=repr))

    try:
        walk(value, 0)
    except _Full:
        return Preview(text="".join(out) + "…", cut=True)
    return Preview(text="".join(out), cut=False)


def cell_json(value: Any) -> str:
    """`value` as one line of JSON for a table cell, at most `CELL_PREVIEW` characters."""
    return json_preview(value, CELL_PREVIEW).text


def page_json(value: Any, limit: int = PAGE_PREVIEW) -> Preview:
    """`value` as indented JSON for the job page, at most `limit` characters."""
    return json_preview(value, limit, indent=2)


def clip(text: Any, limit: int = CELL_PREVIEW) -> str:
    """`text` cut after `limit` characters ("…" says so)."""
    value = "" if text is None else str(text)
    return value if len(value) <= limit else value[:limit] + "…"


# ── progress ───────────────────────────────────────────────────────────
@attrs.frozen(kw_only=True)
class ProgressView:
    """A progress bar: `percent` is None when the total is unknown."""

    percent: float | None
    label: str
    message: str | None


def progress_view(progress: Any) -> ProgressView | None:
    """The bar for a job's `Progress` record (None when it reported none)."""
    if progress is None:
        return None
    done, total = float(progress.done), progress.total
    if total is not None and total > 0:
        percent = max(0.0, min(100.0, 100.0 * done / float(total)))
        label = f"{_number(done)} / {_number(float(total))} ({percent:.0f}%)"
        return ProgressView(percent=percent, label=label, message=progress.message)
    return ProgressView(percent=None, label=_number(done), message=progress.message)


def _number(value: float) -> str:
    return f"{value:.0f}" if value == int(value) else f"{value:.2f}"


# ── throughput chart ───────────────────────────────────────────────────
@attrs.frozen(kw_only=True)
class Bar:
    """One minute of the chart: a completed and a failed segment stacked."""

    x: float
    width: float
    completed_y: float
    completed_h: float
    failed_y: float
    failed_h: float
    title: str


@attrs.frozen(kw_only=True)
class Chart:
    """The throughput chart of the overview: 60 bars, in SVG user units."""

    width: int
    height: int
    base: float
    peak: int
    bars: list[Bar]
    completed: int
    failed: int
    #: (x, label) under the axis.
    ticks: list[tuple[float, str]]


def throughput_chart(
    buckets: Sequence[Any], *, step: float = 60.0, width: int = 640, height: int = 150
) -> Chart:
    """Stacked bars (completed below, failed above) for `Stats.throughput`
    (one a minute) or `History.buckets` (`step` seconds each)."""
    left, top, bottom = 34.0, 8.0, 20.0
    plot_h = height - top - bottom
    base = height - bottom
    peak = max((b.completed + b.failed for b in buckets), default=0)
    scale = plot_h / peak if peak else 0.0
    slot = (width - left) / max(len(buckets), 1)
    bars: list[Bar] = []
    for i, bucket in enumerate(buckets):
        completed_h = bucket.completed * scale
        failed_h = bucket.failed * scale
        start = datetime.fromtimestamp(bucket.start, timezone.utc)
        title = f"{start:%a %d %b %H:%M}" if step >= 3600 else f"{start:%H:%M}"
        title += f" UTC: {bucket.completed} completed, {bucket.failed} failed"
        bars.append(
            Bar(
                x=round(left + i * slot + 1, 2),
                width=round(max(slot - 2, 1), 2),
                completed_y=round(base - completed_h, 2),
                completed_h=round(completed_h, 2),
                failed_y=round(base - completed_h - failed_h, 2),
                failed_h=round(failed_h, 2),
                title=title,
            )
        )
    ticks: list[tuple[float, str]] = []
    if buckets:
        count = len(buckets)
        for index in (0, count // 2):
            ticks.append((left + index * slot, _before((count - index) * step)))
        ticks.append((float(width), "now"))
    return Chart(
        width=width,
        height=height,
        base=base,
        peak=peak,
        bars=bars,
        completed=sum(b.completed for b in buckets),
        failed=sum(b.failed for b in buckets),
        ticks=ticks,
    )


def _before(seconds: float) -> str:
    """A tick's label: ``"-60 min"``, ``"-12 h"``, ``"-3.5 d"``."""
    if seconds >= 2 * 86400:
        return f"-{seconds / 86400:g} d"
    if seconds >= 2 * 3600:
        return f"-{seconds / 3600:g} h"
    return f"-{seconds / 60:g} min"


def failure_rate(rate: float | None) -> str:
    """``"12.5 %"``, ``"0 %"``; empty for None (nothing ended)."""
    if rate is None:
        return ""
    return f"{rate * 100:.3g} %" if rate else "0 %"


# ── dependency graph (laid out by `_workflow.workflow_graph`) ─────────────
NODE_W, NODE_H, GAP_X, GAP_Y, PAD = 188, 46, 64, 16, 12


@attrs.frozen(kw_only=True)
class Node:
    job_id: str
    title: str
    status: str
    x: int
    y: int
    focus: bool
    #: False for a job that is no longer stored.
    link: bool


@attrs.frozen(kw_only=True)
class Edge:
    path: str


@attrs.frozen(kw_only=True)
class Graph:
    width: int
    height: int
    nodes: list[Node]
    edges: list[Edge]
    #: Jobs of the workflow found but not drawn (over `_workflow.MAX_WORKFLOW`).
    more: int = 0

    @property
    def node_w(self) -> int:
        return NODE_W

    @property
    def node_h(self) -> int:
        return NODE_H


# ── schedules ──────────────────────────────────────────────────────────
@attrs.frozen(kw_only=True)
class FireView:
    """One upcoming fire: local wall time, UTC, and the daylight-saving note."""

    local: str
    utc: str
    note: str | None
    skipped: bool


#: Keys of a stored trigger mapping that are not the trigger's own options.
_BOOKKEEPING = frozenset({"times", "key", "origin"})


def describe_trigger(trigger: Mapping[str, Any]) -> str:
    """``cron "0 2 * * *" in Europe/Berlin``, ``every 5 min``, ``at 2026-12-01 08:00:00``."""
    if "interval" in trigger:
        text = f"every {duration(float(trigger['interval']))}"
    elif "cron" in trigger:
        text = f"cron {trigger['cron']!s} in {trigger.get('tz') or 'UTC'}"
    else:
        text = ", ".join(
            f"{k} {v}" for k, v in trigger.items() if k not in _BOOKKEEPING and k != "tz"
        )
    if trigger.get("times"):
        text += f", {trigger['times']} times"
    return text


def describe_cron(expression: str) -> str:
    """A cron expression in plain English (``"0 2 * * 1"``: "At 02:00,
    only on Monday"), by the `cron-descriptor` library of the web extra.

    The expression itself when the library is not installed or cannot say
    it (a macro such as ``@daily``, a field it does not know): the page
    shows what is stored rather than nothing. It describes, it does not
    check: the cron trigger plugin decides what is valid.
    """
    try:
        from cron_descriptor import ExpressionDescriptor, Options
    except ImportError:  # the web extra without it: show the expression
        return expression
    options = Options()
    options.verbose = False
    # Its defaults follow the process's locale (a C locale gives another
    # wording): the dashboard is in English, with 24-hour times everywhere.
    options.locale_code = "en_US"
    options.use_24hour_time_format = True
    try:
        text = ExpressionDescriptor(expression, options).get_description()
    except Exception:  # any error of the library: the expression as stored
        return expression
    return str(text) or expression


@attrs.frozen(kw_only=True)
class EditValues:
    """What the schedules page's edit form starts with: the schedule's rule and arguments."""

    schedule: Any
    kind: str
    cron: str
    tz: str
    every: str
    args: str


def edit_values(schedule: Any) -> EditValues:
    """The edit form's values of `schedule` (a `ScheduleInfo`)."""
    trigger = schedule.trigger
    every = trigger.get("interval")
    return EditValues(
        schedule=schedule,
        kind="interval" if every is not None else "cron",
        cron=str(trigger.get("cron", "")),
        tz=str(trigger.get("tz") or "UTC"),
        every="" if every is None else f"{float(every):g}",
        args=json.dumps(dict(schedule.args), indent=2, sort_keys=True, ensure_ascii=False),
    )


def next_fires(
    trigger: Mapping[str, Any],
    next_run: float | None,
    resolve: Callable[[str], Any],
    *,
    count: int = 3,
) -> list[FireView]:
    """The next `count` fires from `next_run` on, as ``jobsched schedule preview`` shows them.

    A trigger whose factory (`resolve(name)`, the plugin manager's
    ``resolve("triggers", name)``) has ``preview`` (cron) gives its fires with
    their daylight-saving notes, skipped wall times included; an interval
    adds its period; anything else shows `next_run` alone.
    """
    if next_run is None or not math.isfinite(next_run):
        return []
    if "interval" in trigger:
        period = float(trigger["interval"])
        return [_utc_fire(next_run + k * period) for k in range(count)] if period > 0 else []
    trigger_obj = _build(trigger, resolve)
    preview = getattr(trigger_obj, "preview", None)
    if not callable(preview):
        return [_utc_fire(next_run)]
    fires: list[FireView] = []
    for fire in preview(next_run - 1e-3, count):
        note = fire.note
        more = getattr(fire, "more_skipped", 0)
        if more:
            note = f"{note} (and {more} more skipped)"
        if fire.skipped:
            fires.append(FireView(local=str(fire.wall), utc="", note=note, skipped=True))
        else:
            fires.append(
                FireView(
                    local=f"{fire.at:%Y-%m-%d %H:%M:%S %Z (%z)}",
                    utc=f"{fire.at.astimezone(timezone.utc):%Y-%m-%d %H:%M:%S}Z",
                    note=note,
                    skipped=False,
                )
            )
    return fires


def _utc_fire(ts: float) -> FireView:
    at = datetime.fromtimestamp(ts, timezone.utc)
    return FireView(local=f"{at:%Y-%m-%d %H:%M:%S} UTC", utc="", note=None, skipped=False)


def _build(trigger: Mapping[str, Any], resolve: Callable[[str], Any]) -> Any:
    """The trigger object a stored mapping describes (None if no plugin makes it)."""
    for name, spec in trigger.items():
        if name in _BOOKKEEPING:
            continue
        try:
            factory = resolve(name)
        except PluginError:
            continue
        options = {k: v for k, v in trigger.items() if k != name and k not in _BOOKKEEPING}
        try:
            return factory(spec, **options)
        except (TypeError, ValueError):
            return None
    return None


def limit_percent(in_use: int, limit: int) -> float:
    """How full a limit is, 0..100 (a limit of 0 is full)."""
    return 100.0 if limit <= 0 else max(0.0, min(100.0, 100.0 * in_use / limit))


def unique(items: Iterable[str]) -> list[str]:
    """`items` without repeats, first occurrence kept."""
    return list(dict.fromkeys(items))


def install_filters(env: Any) -> None:
    """Give the Jinja2 environment `env` the filters the page templates use."""
    env.filters.update(
        when=when,
        ago=ago,
        duration=duration,
        pretty_json=pretty_json,
        compact_json=compact_json,
        cell_json=cell_json,
        page_json=page_json,
        clip=clip,
        status_name=status_name,
        describe_cron=describe_cron,
        progress_view=progress_view,
        limit_percent=limit_percent,
        failure_rate=failure_rate,
    )
