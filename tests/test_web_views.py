"""What the dashboard's pages draw: the chart, the dependency graph, the next
fires of a schedule with their daylight-saving marks, and the formatting."""

from __future__ import annotations

import hashlib
import math
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import attrs
import pytest

from jobsched import PluginManager
from jobsched.web import _views
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


# ── dependency graph ───────────────────────────────────────────────────
def test_the_graph_puts_dependencies_left_and_dependents_right() -> None:
    jobs = {
        "a": Job(job_id="a", name="extract"),
        "b": Job(job_id="b", name="transform", depends_on=("a", "gone"), submitted_at=1),
        "c": Job(job_id="c", status="failed", depends_on=("b",), submitted_at=2),
        "d": Job(job_id="d", status="pending", depends_on=("c",), submitted_at=3),
        "e": Job(job_id="e", status="pending", depends_on=("d",), submitted_at=4),
    }
    graph = _views.dependency_graph(jobs["b"], jobs)
    nodes = {n.job_id: n for n in graph.nodes}
    # Two levels each way: e (three after b) is left out.
    assert set(nodes) == {"a", "gone", "b", "c", "d"}
    assert nodes["a"].x == nodes["gone"].x < nodes["b"].x < nodes["c"].x < nodes["d"].x
    assert nodes["b"].focus and not nodes["a"].focus
    assert (nodes["c"].status, nodes["c"].title, nodes["c"].link) == ("failed", "email", True)
    # A dependency no longer stored: a grey node without a link.
    assert (nodes["gone"].title, nodes["gone"].link) == ("(not stored)", False)
    assert len(graph.edges) == 4  # a->b, gone->b, b->c, c->d
    assert graph.width >= nodes["d"].x + graph.node_w
    assert graph.height >= max(n.y for n in graph.nodes) + graph.node_h


def test_a_crowded_column_is_summed_up() -> None:
    focus = Job(job_id="f")
    jobs: dict[str, Job] = {"f": focus}
    for i in range(12):
        jobs[f"k{i:02d}"] = Job(job_id=f"k{i:02d}", depends_on=("f",), submitted_at=1 + i)
    graph = _views.dependency_graph(focus, jobs)
    column = [n for n in graph.nodes if not n.focus]
    assert len(column) == _views.MAX_PER_COLUMN + 1
    assert column[-1].title == f"and {12 - _views.MAX_PER_COLUMN} more"
    assert not column[-1].link
    assert len(graph.edges) == _views.MAX_PER_COLUMN


def test_dependents_given_by_id_are_drawn_in_their_order_and_counted() -> None:
    focus = Job(job_id="f")
    ids = [f"k{i:02d}" for i in range(12)]
    # Records only for the ones a column shows (the page reads no more), and
    # submitted_at against the given order: the given order wins.
    jobs: dict[str, Job] = {"f": focus}
    for n, job_id in enumerate(ids[: _views.MAX_PER_COLUMN]):
        jobs[job_id] = Job(job_id=job_id, depends_on=("f",), submitted_at=100 - n)
    graph = _views.dependency_graph(focus, jobs, dependents=ids, depth=1)
    column = [n for n in graph.nodes if not n.focus]
    assert [n.job_id for n in column[:-1]] == ids[: _views.MAX_PER_COLUMN]
    assert all(n.link for n in column[:-1])
    assert (column[-1].title, column[-1].link) == ("and 4 more", False)
    assert len(graph.edges) == _views.MAX_PER_COLUMN


def test_a_job_alone_is_one_node() -> None:
    focus = Job(job_id="solo")
    graph = _views.dependency_graph(focus, {"solo": focus})
    assert [n.job_id for n in graph.nodes] == ["solo"] and graph.edges == []


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
