"""Issue 21 items 11, 12 and 14 on the command line: bad input is one line and
exit 2 (never a traceback), and a preview across a skipped hour is one walk
with its skipped fires bounded."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from jobsched import PluginManager, Rate
from jobsched_plugins.cron_trigger import SKIPPED_LISTED, CronTrigger
from test_cli import assert_bad_input, jobsched, write

pytestmark = pytest.mark.slow


# ── item 11: clean errors ─────────────────────────────────────────────
def test_a_rate_over_a_zero_period_is_one_line(tmp_path: Path) -> None:
    path = write(
        tmp_path / "jobs.toml",
        """
        [limits.rates]
        sleep = "1/0s"

        [[job]]
        id = "a"
        type = "sleep"
        args = { name = "s", seconds = 0 }
        """,
    )
    assert_bad_input(jobsched("run", str(path)), "rate '1/0s'", "period")
    with pytest.raises(ValueError, match="period must be longer than 0"):
        Rate.parse("5/0.0min")


@pytest.mark.parametrize("after", ["9999-12-31T23:00", "0001-01-01"])
def test_a_preview_outside_the_calendar_is_one_line(after: str) -> None:
    result = jobsched("schedule", "preview", "0 * * * *", "--after", after, "--next", "3")
    assert_bad_input(result, f"--after {after!r}", "0001-01-03", "9999-12-29")


def test_a_preview_ends_with_the_calendar_instead_of_failing() -> None:
    fires = CronTrigger("0 0 * * *").preview(datetime(9999, 12, 27), 10)
    assert [f.at.day for f in fires] == [28, 29]


def test_a_worker_with_too_many_workers_is_one_line(tmp_path: Path) -> None:
    result = jobsched(
        "worker", "--store", f"sqlite:///{tmp_path / 'jobs.db'}", "--workers", "100000"
    )
    assert_bad_input(result, "--workers", "1024", "100000")
    assert not (tmp_path / "jobs.db").exists()


@pytest.mark.parametrize("command", ["worker", "status"])
def test_a_postgresql_url_with_an_unknown_parameter_is_one_line(command: str) -> None:
    # Refused before any connection: no server is needed to say so.
    url = "postgresql://someone:secret@127.0.0.1:1/nowhere?bogus=1"
    result = jobsched(command, "--store", url)
    assert_bad_input(result, "bogus", "someone:***@")
    assert "secret" not in result.stderr


# ── item 12: the preview across a skipped hour ────────────────────────
def test_a_preview_across_a_skipped_hour_is_bounded_and_right() -> None:
    result = jobsched(
        "schedule",
        "preview",
        "* * 2 * * *",
        "--tz",
        "America/New_York",
        "--gap",
        "skip",
        "--after",
        "2026-03-07T12:00",
        "--next",
        "3",
        "--json",
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    skipped = [r for r in rows if r["skipped"]]
    fired = [r for r in rows if not r["skipped"]]
    # 3,600 seconds of 02:00-02:59 do not exist on 2026-03-08: the first
    # few are listed and the last listed one counts the rest.
    assert [r["wall"] for r in skipped] == [f"2026-03-08T02:00:0{n}" for n in range(SKIPPED_LISTED)]
    assert [r["more_skipped"] for r in skipped] == [0] * (SKIPPED_LISTED - 1) + [
        3600 - SKIPPED_LISTED
    ]
    assert [r["local"] for r in fired] == [
        "2026-03-09T02:00:00-04:00",
        "2026-03-09T02:00:01-04:00",
        "2026-03-09T02:00:02-04:00",
    ]
    assert len(rows) == SKIPPED_LISTED + 3

    table = jobsched(
        "schedule",
        "preview",
        "* * 2 * * *",
        "--tz",
        "America/New_York",
        "--gap",
        "skip",
        "--after",
        "2026-03-07T12:00",
        "--next",
        "3",
        timeout=120,
    )
    assert table.returncode == 0, table.stderr
    assert f"and {3600 - SKIPPED_LISTED} more skipped" in table.stdout
    assert "3 fire times, 0 on a daylight-saving change, 3600 skipped" in table.stdout


def test_the_dashboards_schedule_fires_are_bounded_across_a_skipped_hour() -> None:
    from jobsched.web import _views

    trigger = {"cron": "* * 2 * * *", "tz": "America/New_York", "gap": "skip"}
    start = datetime(2026, 3, 8, 2, tzinfo=ZoneInfo("America/New_York")).timestamp()
    resolve = PluginManager().resolve
    fires = _views.next_fires(trigger, start, lambda name: resolve("triggers", name), count=3)
    assert [f.skipped for f in fires] == [True] * SKIPPED_LISTED + [False] * 3
    assert fires[SKIPPED_LISTED - 1].note is not None
    assert fires[SKIPPED_LISTED - 1].note.endswith(f"(and {3600 - SKIPPED_LISTED} more skipped)")


def test_a_preview_of_both_occurrences_of_a_repeated_hour_is_one_walk() -> None:
    # Every second of 01:00-01:59 on 2026-11-01 happens twice: 7,200 fires in
    # time order, the second pass after the first.
    fires = CronTrigger("* * 1 * * *", tz="America/New_York", overlap="both").preview(
        datetime(2026, 11, 1), 7200
    )
    stamps = [f.timestamp for f in fires]
    assert stamps == sorted(set(stamps))
    assert len(fires) == 7200
    assert stamps[-1] - stamps[0] == 7199


# ── item 14: SQLite URLs on the command line ──────────────────────────
def test_a_sqlite_url_that_would_lose_a_character_is_one_line(tmp_path: Path) -> None:
    result = jobsched("status", "--store", "sqlite:relative.db", cwd=tmp_path)
    assert_bad_input(result, "sqlite:relative.db", "sqlite:///")
    assert list(tmp_path.iterdir()) == []
