"""What the dashboard's pages draw: the chart, the workflow graph, the next
fires of a schedule with their daylight-saving marks, the cron expressions in
plain English, and the formatting."""

from __future__ import annotations

import hashlib
import math
import sys
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import attrs
import pytest

from jobsched import PluginManager
from jobsched.web import _views, _workflow
from jobsched_plugins.cron_trigger import preview

STATIC = Path(_views.__file__).parent / "static"


@attrs.frozen
class Bucket:
    start: float
    completed: int
    failed: int


@attrs.frozen(kw_only=True)
class Job:
    job_id: str
    status: str = "completed"
    type: str = "email"
    name: str | None = None
    depends_on: tuple[str, ...] = ()
    submitted_at: float = 0.0


@attrs.frozen
class Progress:
    done: float
    total: float | None
    message: str | None = None
    updated_at: float = 0.0


def resolve(name: str) -> Any:
    return PluginManager().resolve("triggers", name)


# ── the vendored script ────────────────────────────────────────────────
def test_the_vendored_htmx_is_the_release_the_notice_names() -> None:
    notice = (STATIC / "NOTICE").read_text()
    digest = hashlib.sha256((STATIC / "htmx.min.js").read_bytes()).hexdigest()
    assert f"sha256 {digest}" in notice
    assert "htmx 2.0.11" in notice and "Zero-Clause BSD" in notice


# ── throughput chart ───────────────────────────────────────────────────
def test_the_chart_stacks_failed_on_completed_scaled_to_the_busiest_minute() -> None:
    buckets = [Bucket(60.0 * i, 0, 0) for i in range(60)]
    buckets[10] = Bucket(600.0, 4, 1)
    buckets[59] = Bucket(3540.0, 1, 0)
    chart = _views.throughput_chart(buckets, width=640, height=150)
    assert (chart.peak, chart.completed, chart.failed) == (5, 5, 1)
    assert len(chart.bars) == 60
    busiest, last = chart.bars[10], chart.bars[59]
    plot = chart.base - 8  # the top margin
    assert busiest.completed_h == pytest.approx(plot * 4 / 5, abs=0.01)
    assert busiest.failed_h == pytest.approx(plot / 5, abs=0.01)
    assert busiest.failed_y + busiest.failed_h == pytest.approx(busiest.completed_y, abs=0.01)
    assert busiest.failed_y == pytest.approx(8, abs=0.01)  # the busiest minute fills the plot
    assert last.x > busiest.x and last.failed_h == 0
    assert "4 completed, 1 failed" in busiest.title
    assert [label for _, label in chart.ticks] == ["-60 min", "-30 min", "now"]


def test_an_idle_hour_draws_no_bar() -> None:
    chart = _views.throughput_chart([Bucket(60.0 * i, 0, 0) for i in range(60)])
    assert chart.peak == 0
    assert all(b.completed_h == 0 and b.failed_h == 0 for b in chart.bars)


# ── workflow graph ─────────────────────────────────────────────────────
def workflow(jobs: dict[str, Job | None], focus: str, more: int = 0) -> _workflow.Workflow:
    """`jobs` as `read_workflow` returns them: edges from each one's depends_on."""
    edges = frozenset(
        (up, job_id)
        for job_id, job in jobs.items()
        if job is not None
        for up in job.depends_on
        if up in jobs
    )
    return _workflow.Workflow(focus=focus, jobs=dict(jobs), edges=edges, more=more)


def test_layers_put_each_job_one_right_of_its_furthest_dependency() -> None:
    # a -> b -> d, a -> d (a shortcut), c alone: d is on layer 2, not 1.
    edges = {("a", "b"), ("b", "d"), ("a", "d")}
    assert _workflow.layers(["a", "b", "c", "d"], edges) == {"a": 0, "b": 1, "c": 0, "d": 2}
    # An edge to a job not drawn counts for nothing; a cycle (never stored) ends.
    assert _workflow.layers(["x", "y"], {("gone", "x"), ("x", "y")}) == {"x": 0, "y": 1}
    cycle = _workflow.layers(["p", "q", "r"], {("p", "q"), ("q", "p"), ("q", "r")})
    assert set(cycle) == {"p", "q", "r"}


def test_a_chord_is_three_layers_with_every_member_status_and_link() -> None:
    # extract -> (three parallel parts) -> report: a chain into a group into a chord.
    jobs: dict[str, Job | None] = {"x": Job(job_id="x", name="extract")}
    for n, status in enumerate(("completed", "failed", "running")):
        jobs[f"p{n}"] = Job(job_id=f"p{n}", status=status, depends_on=("x",), submitted_at=n + 1)
    jobs["r"] = Job(job_id="r", status="pending", name="report", depends_on=("p0", "p1", "p2"))
    jobs["gone"] = None  # a member no longer stored
    jobs["x"] = Job(job_id="x", name="extract", depends_on=("gone",))
    graph = _workflow.workflow_graph(workflow(jobs, focus="p1", more=4))
    nodes = {n.job_id: n for n in graph.nodes}
    assert nodes["gone"].x < nodes["x"].x < nodes["p0"].x == nodes["p1"].x == nodes["p2"].x
    assert nodes["p2"].x < nodes["r"].x
    # A column in submit order (all under one dependency), centred on the tallest.
    assert nodes["p0"].y < nodes["p1"].y < nodes["p2"].y
    assert nodes["x"].y == nodes["p1"].y == nodes["r"].y
    assert [nodes[k].status for k in ("p0", "p1", "p2", "r")] == [
        "completed",
        "failed",
        "running",
        "pending",
    ]
    assert nodes["p1"].focus and sum(n.focus for n in graph.nodes) == 1
    assert (nodes["gone"].title, nodes["gone"].link) == ("(not stored)", False)
    assert all(n.link for k, n in nodes.items() if k != "gone")
    assert len(graph.edges) == 7  # gone->x, x->p0..2, p0..2->r
    assert graph.more == 4
    assert graph.width >= nodes["r"].x + graph.node_w
    assert graph.height >= max(n.y for n in graph.nodes) + graph.node_h


def test_a_column_follows_its_dependencies_rows() -> None:
    # Two chains side by side: the second column keeps each job beside its parent.
    jobs: dict[str, Job | None] = {
        "a": Job(job_id="a", submitted_at=1),
        "b": Job(job_id="b", submitted_at=2),
        "a2": Job(job_id="a2", depends_on=("a",), submitted_at=4),
        "b2": Job(job_id="b2", depends_on=("b",), submitted_at=3),
    }
    nodes = {n.job_id: n for n in _workflow.workflow_graph(workflow(jobs, "a")).nodes}
    assert nodes["a"].y < nodes["b"].y
    assert nodes["a2"].y == nodes["a"].y and nodes["b2"].y == nodes["b"].y


def test_a_job_alone_is_one_node() -> None:
    graph = _workflow.workflow_graph(workflow({"solo": Job(job_id="solo")}, "solo"))
    assert [n.job_id for n in graph.nodes] == ["solo"] and graph.edges == []


# ── cron in plain English ──────────────────────────────────────────────
@pytest.mark.parametrize(
    ("expression", "text"),
    [
        ("0 2 * * 1", "At 02:00, only on Monday"),
        ("*/5 * * * *", "Every 5 minutes"),
        ("0 9 * * 1-5", "At 09:00, Monday through Friday"),
        ("30 6 1 * *", "At 06:30, on day 1 of the month"),
    ],
)
def test_a_cron_expression_is_described_in_plain_english(expression: str, text: str) -> None:
    assert _views.describe_cron(expression) == text


@pytest.mark.parametrize("expression", ["@daily", "not cron", ""])
def test_what_the_describer_cannot_say_shows_as_the_expression(expression: str) -> None:
    assert _views.describe_cron(expression) == expression


def test_without_the_library_the_expression_is_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cron_descriptor", None)  # import fails
    assert _views.describe_cron("0 2 * * 1") == "0 2 * * 1"


def test_the_edit_form_starts_with_the_schedules_rule_and_arguments() -> None:
    @attrs.frozen
    class Info:
        trigger: dict[str, Any]
        args: dict[str, Any]

    cron = _views.edit_values(Info({"cron": "0 2 * * 1", "tz": "Europe/Berlin"}, {"b": 1, "a": 2}))
    assert (cron.kind, cron.cron, cron.tz, cron.every) == ("cron", "0 2 * * 1", "Europe/Berlin", "")
    assert cron.args == '{\n  "a": 2,\n  "b": 1\n}'
    every = _views.edit_values(Info({"interval": 3600.0, "origin": 5.0}, {}))
    assert (every.kind, every.every, every.tz, every.args) == ("interval", "3600", "UTC", "{}")


# ── schedules ──────────────────────────────────────────────────────────
def berlin(*args: int) -> float:
    return datetime(*args, tzinfo=ZoneInfo("Europe/Berlin")).timestamp()  # type: ignore[misc]


def test_cron_fires_carry_the_daylight_saving_notes_schedule_preview_shows() -> None:
    trigger = {"cron": "30 2 * * *", "tz": "Europe/Berlin", "key": "k"}
    first = berlin(2027, 3, 27, 2, 30)
    fires = _views.next_fires(trigger, first, resolve, count=3)
    expected = preview("30 2 * * *", tz="Europe/Berlin", after=first - 1, count=3)
    assert [f.note for f in fires] == [f.note for f in expected]
    assert fires[0].note is None and fires[1].note  # 28 March: the clocks skip 02:00-03:00
    assert fires[0].local == "2027-03-27 02:30:00 CET (+0100)"
    assert fires[0].utc == "2027-03-27 01:30:00Z"
    assert fires[1].local == f"{expected[1].at:%Y-%m-%d %H:%M:%S %Z (%z)}"


def test_a_skipped_wall_time_is_listed_as_skipped() -> None:
    trigger = {"cron": "30 2 * * *", "tz": "Europe/Berlin", "gap": "skip"}
    fires = _views.next_fires(trigger, berlin(2027, 3, 27, 2, 30), resolve, count=3)
    skipped = [f for f in fires if f.skipped]
    assert len(skipped) == 1 and skipped[0].note and skipped[0].utc == ""
    assert len([f for f in fires if not f.skipped]) == 3


def test_interval_fires_are_a_period_apart_and_an_ended_schedule_has_none() -> None:
    fires = _views.next_fires({"interval": 300.0}, 1_800_000_000.0, resolve, count=3)
    assert [f.local for f in fires] == [
        "2027-01-15 08:00:00 UTC",
        "2027-01-15 08:05:00 UTC",
        "2027-01-15 08:10:00 UTC",
    ]
    assert _views.next_fires({"interval": 300.0}, None, resolve) == []
    assert _views.next_fires({"interval": 300.0}, math.inf, resolve) == []


def test_a_trigger_without_a_preview_shows_its_next_fire() -> None:
    fires = _views.next_fires({"nonsuch": 1}, 1_800_000_000.0, resolve)
    assert [f.local for f in fires] == ["2027-01-15 08:00:00 UTC"]


def test_triggers_are_described_in_words() -> None:
    assert _views.describe_trigger({"interval": 300.0}) == "every 5 min"
    assert (
        _views.describe_trigger({"cron": "0 2 * * *", "tz": "Europe/Berlin", "times": 3})
        == "cron 0 2 * * * in Europe/Berlin, 3 times"
    )
    assert _views.describe_trigger({"cron": "@hourly"}) == "cron @hourly in UTC"


# ── formatting ─────────────────────────────────────────────────────────
@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.25, "250 ms"),
        (12.5, "12.5 s"),
        (200, "3 min 20 s"),
        (3600, "1 h"),
        (7500, "2 h 5 min"),
        (90000, "1 d 1 h"),
        (None, ""),
    ],
)
def test_durations(seconds: float | None, text: str) -> None:
    assert _views.duration(seconds) == text


def test_times_relative_to_now() -> None:
    assert _views.ago(1000.0, now=1012.4) == "12 s ago"
    assert _views.ago(1000.0, now=1000.0 - 180) == "in 3 min"
    assert _views.ago(1000.0, now=1000.0 + 7300) == "2 h ago"
    assert _views.ago(1000.0, now=1000.2) == "just now"
    assert _views.ago(None) == ""
    assert _views.when(1_800_000_000.0) == "2027-01-15 08:00:00"


def test_progress_bars() -> None:
    bar = _views.progress_view(Progress(3, 4, "three of four"))
    assert bar is not None and (bar.percent, bar.label) == (75.0, "3 / 4 (75%)")
    unknown = _views.progress_view(Progress(2.5, None))
    assert unknown is not None and (unknown.percent, unknown.label) == (None, "2.50")
    assert _views.progress_view(Progress(9, 4)).percent == 100.0  # type: ignore[union-attr]
    assert _views.progress_view(None) is None


def test_limit_use_and_json() -> None:
    assert _views.limit_percent(3, 4) == 75.0
    assert _views.limit_percent(5, 4) == 100.0 and _views.limit_percent(0, 0) == 100.0
    assert _views.compact_json({"b": 1, "a": "<x>"}) == '{"a": "<x>", "b": 1}'
    assert _views.pretty_json({"a": object()}).startswith('{\n  "a": "<object object')
