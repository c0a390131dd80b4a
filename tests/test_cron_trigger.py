"""The cron and date triggers as pure rules: fire times across daylight-saving changes."""

from __future__ import annotations

import itertools
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from jobsched_plugins.cron_trigger import CronTrigger, format_preview, preview
from jobsched_plugins.date_trigger import DateTrigger

NY = ZoneInfo("America/New_York")
BERLIN = ZoneInfo("Europe/Berlin")
UTC = timezone.utc


def utc(*args: int) -> float:
    return datetime(*args, tzinfo=UTC).timestamp()  # type: ignore[misc]


def fires(trigger: CronTrigger, after: datetime, n: int) -> list[datetime]:
    out = []
    t: float | None = after.timestamp()
    for _ in range(n):
        assert t is not None
        t = trigger.next_fire(t)
        assert t is not None
        out.append(datetime.fromtimestamp(t, UTC))
    return out


# ── 0 2 * * * in New York: the "done when" case ─────────────────
# 2026-03-08: 02:00 EST -> 03:00 EDT (02:00-02:59 do not exist)
# 2026-11-01: 02:00 EDT -> 01:00 EST (01:00-01:59 happen twice; 02:00 once)


@pytest.mark.parametrize("gap", ["shift", "transition"])
def test_new_york_0200_on_spring_forward_runs_at_0300_edt(gap: str) -> None:
    trigger = CronTrigger("0 2 * * *", tz="America/New_York", gap=gap)  # type: ignore[arg-type]
    got = fires(trigger, datetime(2026, 3, 7, 12, tzinfo=NY), 2)
    assert got == [
        datetime(2026, 3, 8, 7, 0, tzinfo=UTC),  # 03:00 EDT, the instant of the jump
        datetime(2026, 3, 9, 6, 0, tzinfo=UTC),  # 02:00 EDT
    ]
    assert got[0].astimezone(NY).strftime("%H:%M %Z") == "03:00 EDT"


def test_new_york_0200_on_spring_forward_with_gap_skip_does_not_run_that_day() -> None:
    trigger = CronTrigger("0 2 * * *", tz="America/New_York", gap="skip")
    got = fires(trigger, datetime(2026, 3, 7, 12, tzinfo=NY), 2)
    assert got == [datetime(2026, 3, 9, 6, 0, tzinfo=UTC), datetime(2026, 3, 10, 6, 0, tzinfo=UTC)]


@pytest.mark.parametrize("overlap", ["first", "second", "both"])
def test_new_york_0200_on_fall_back_runs_once_at_0200_est(overlap: str) -> None:
    trigger = CronTrigger("0 2 * * *", tz="America/New_York", overlap=overlap)  # type: ignore[arg-type]
    got = fires(trigger, datetime(2026, 10, 31, 3, tzinfo=NY), 3)
    assert got == [
        datetime(2026, 11, 1, 7, 0, tzinfo=UTC),  # 02:00 EST: 25 hours after the day before
        datetime(2026, 11, 2, 7, 0, tzinfo=UTC),
        datetime(2026, 11, 3, 7, 0, tzinfo=UTC),
    ]


# ── a wall time inside the gap: the three gap rules differ ──────────────


@pytest.mark.parametrize(
    ("zone", "day", "gap", "expected"),
    [
        # New York 2026-03-08: 02:30 does not exist
        ("America/New_York", (2026, 3, 8), "shift", (2026, 3, 8, 7, 30)),  # 03:30 EDT
        ("America/New_York", (2026, 3, 8), "transition", (2026, 3, 8, 7, 0)),  # 03:00 EDT
        ("America/New_York", (2026, 3, 8), "skip", (2026, 3, 9, 6, 30)),  # next day
        # Berlin 2026-03-29: 02:00 CET -> 03:00 CEST
        ("Europe/Berlin", (2026, 3, 29), "shift", (2026, 3, 29, 1, 30)),  # 03:30 CEST
        ("Europe/Berlin", (2026, 3, 29), "transition", (2026, 3, 29, 1, 0)),  # 03:00 CEST
        ("Europe/Berlin", (2026, 3, 29), "skip", (2026, 3, 30, 0, 30)),  # next day 02:30 CEST
    ],
)
def test_gap_rules(
    zone: str, day: tuple[int, int, int], gap: str, expected: tuple[int, ...]
) -> None:
    trigger = CronTrigger("30 2 * * *", tz=zone, gap=gap)  # type: ignore[arg-type]
    after = datetime(*day, 0, 0, tzinfo=ZoneInfo(zone))
    assert fires(trigger, after, 1) == [datetime(*expected, tzinfo=UTC)]  # type: ignore[misc]


# ── a wall time inside the overlap: the three overlap rules differ ──────


@pytest.mark.parametrize(
    ("zone", "expr", "day", "overlap", "expected"),
    [
        # New York 2026-11-01: 01:30 EDT (05:30Z), then 01:30 EST (06:30Z)
        ("America/New_York", "30 1 * * *", (2026, 11, 1), "first", [(5, 30)]),
        ("America/New_York", "30 1 * * *", (2026, 11, 1), "second", [(6, 30)]),
        ("America/New_York", "30 1 * * *", (2026, 11, 1), "both", [(5, 30), (6, 30)]),
        # Berlin 2026-10-25: 02:30 CEST (00:30Z), then 02:30 CET (01:30Z)
        ("Europe/Berlin", "30 2 * * *", (2026, 10, 25), "first", [(0, 30)]),
        ("Europe/Berlin", "30 2 * * *", (2026, 10, 25), "second", [(1, 30)]),
        ("Europe/Berlin", "30 2 * * *", (2026, 10, 25), "both", [(0, 30), (1, 30)]),
    ],
)
def test_overlap_rules(
    zone: str,
    expr: str,
    day: tuple[int, int, int],
    overlap: str,
    expected: list[tuple[int, int]],
) -> None:
    trigger = CronTrigger(expr, tz=zone, overlap=overlap)  # type: ignore[arg-type]
    after = datetime(*day, 0, 0, tzinfo=ZoneInfo(zone)).timestamp()
    end = after + 86400
    got = []
    t = trigger.next_fire(after)
    while t is not None and t < end:
        got.append(t)
        t = trigger.next_fire(t)
    assert got == [utc(*day, h, m) for h, m in expected]


def test_frequent_schedule_with_overlap_both_keeps_a_steady_utc_rhythm() -> None:
    trigger = CronTrigger("*/20 * * * *", tz="Europe/Berlin", overlap="both")
    got = fires(trigger, datetime(2026, 10, 25, 1, 30, tzinfo=BERLIN), 10)
    steps = {(b - a).total_seconds() for a, b in itertools.pairwise(got)}
    assert steps == {1200.0}  # every 20 real minutes, through the repeated hour


def test_frequent_schedule_with_overlap_first_pauses_for_the_repeated_hour() -> None:
    trigger = CronTrigger("*/20 * * * *", tz="Europe/Berlin", overlap="first")
    got = fires(trigger, datetime(2026, 10, 25, 2, 30, tzinfo=BERLIN), 3)
    # 02:40 CEST, then the repeated 02:00-02:59 CET is skipped, then 03:00 CET
    assert got == [
        datetime(2026, 10, 25, 0, 40, tzinfo=UTC),
        datetime(2026, 10, 25, 2, 0, tzinfo=UTC),
        datetime(2026, 10, 25, 2, 20, tzinfo=UTC),
    ]


def test_gap_shift_merges_shifted_times_with_real_ones_without_duplicates() -> None:
    trigger = CronTrigger("*/20 * * * *", tz="Europe/Berlin", gap="shift")
    got = fires(trigger, datetime(2026, 3, 29, 1, 30, tzinfo=BERLIN), 4)
    assert got == [
        datetime(2026, 3, 29, 0, 40, tzinfo=UTC),  # 01:40 CET
        datetime(2026, 3, 29, 1, 0, tzinfo=UTC),  # 03:00 CEST (02:00 shifted, and 03:00)
        datetime(2026, 3, 29, 1, 20, tzinfo=UTC),
        datetime(2026, 3, 29, 1, 40, tzinfo=UTC),
    ]


def test_next_fire_from_inside_the_shift_window_finds_the_shifted_fire() -> None:
    # At 03:10 EDT, 02:30 (shifted to 03:30 EDT) has not fired yet.
    trigger = CronTrigger("30 2 * * *", tz="America/New_York", gap="shift")
    after = datetime(2026, 3, 8, 3, 10, tzinfo=NY).timestamp()
    assert trigger.next_fire(after) == utc(2026, 3, 8, 7, 30)


def test_next_fire_during_the_first_pass_finds_the_second_occurrence() -> None:
    trigger = CronTrigger("30 1 * * *", tz="America/New_York", overlap="second")
    after = datetime(2026, 11, 1, 1, 40, tzinfo=NY, fold=0).timestamp()  # 01:40 EDT
    assert trigger.next_fire(after) == utc(2026, 11, 1, 6, 30)  # 01:30 EST


def test_half_hour_dst_zone() -> None:
    # Lord Howe Island moves its clocks by 30 minutes: 02:00 -> 02:30 on 2026-10-04.
    trigger = CronTrigger("15 2 * * *", tz="Australia/Lord_Howe", gap="shift")
    zone = ZoneInfo("Australia/Lord_Howe")
    (got,) = fires(trigger, datetime(2026, 10, 4, 0, 0, tzinfo=zone), 1)
    assert got.astimezone(zone).strftime("%H:%M") == "02:45"


def test_seconds_field_comes_first() -> None:
    trigger = CronTrigger("*/15 * * * * *")
    got = fires(trigger, datetime(2026, 1, 1, tzinfo=UTC), 3)
    assert [d.second for d in got] == [15, 30, 45]


def test_utc_is_the_default_zone() -> None:
    trigger = CronTrigger("0 12 * * *")
    assert trigger.first_fire(utc(2026, 1, 1)) == utc(2026, 1, 1, 12)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"expr": "61 * * * *"}, "invalid cron expression '61 * * * *'"),
        ({"expr": "* * *"}, "invalid cron expression"),
        ({"expr": ""}, "non-empty string"),
        ({"expr": "* * * * *", "tz": "Mars/Olympus"}, "unknown time zone 'Mars/Olympus'"),
        ({"expr": "* * * * *", "gap": "later"}, "gap must be one of"),
        ({"expr": "* * * * *", "overlap": "twice"}, "overlap must be one of"),
    ],
)
def test_bad_input_names_the_culprit(kwargs: dict[str, str], message: str) -> None:
    expr = kwargs.pop("expr")
    with pytest.raises(ValueError, match=message.replace("*", r"\*")):
        CronTrigger(expr, **kwargs)  # type: ignore[arg-type]


def test_preview_marks_moved_and_skipped_fires() -> None:
    rows = preview(
        "0 2 * * *",
        tz="America/New_York",
        count=3,
        after=datetime(2026, 3, 7, 12, tzinfo=NY),
        gap="skip",
    )
    # 03-08 (skipped: 02:00 does not exist), then 03-09, 03-10, 03-11
    assert [r.skipped for r in rows] == [True, False, False, False]
    assert rows[0].note is not None and "does not exist" in rows[0].note
    assert [r.wall.day for r in rows] == [8, 9, 10, 11]
    lines = list(format_preview(rows))
    assert "SKIPPED" in lines[0] and "DST" in lines[0]
    assert "DST" not in lines[1]
    after = datetime(2026, 3, 7, 12, tzinfo=NY)
    moved = preview("0 2 * * *", tz="America/New_York", count=2, after=after)
    assert moved[0].note is not None and "shifted +1:00" in moved[0].note
    assert moved[0].at.strftime("%H:%M %Z") == "03:00 EDT"
    assert moved[1].note is None


def test_preview_rejects_a_bad_count() -> None:
    with pytest.raises(ValueError, match="count must be >= 1"):
        preview("* * * * *", count=0)


# ── date trigger ─────────────────────────────────────────────────────────


def test_date_trigger_fires_once() -> None:
    trigger = DateTrigger("2026-12-01T09:00:00", tz="Europe/Berlin")
    first = trigger.first_fire(0.0)
    assert first == utc(2026, 12, 1, 8)
    assert trigger.next_fire(first) is None


def test_date_trigger_accepts_aware_datetimes_and_epoch_seconds() -> None:
    assert DateTrigger(datetime(2026, 1, 1, tzinfo=UTC)).timestamp == utc(2026, 1, 1)
    assert DateTrigger(1_800_000_000).timestamp == 1_800_000_000.0


@pytest.mark.parametrize("bad", ["tomorrow", True, None, [2026]])
def test_date_trigger_rejects_bad_dates(bad: object) -> None:
    with pytest.raises(ValueError, match="date trigger"):
        DateTrigger(bad)  # type: ignore[arg-type]


def test_the_kernel_never_imports_the_cron_library() -> None:
    import os
    import subprocess
    import sys

    # Only the cron plugin imports cronsim: with it disabled, nothing does.
    code = (
        "import sys, jobsched, jobsched.cli, jobsched.jobfile, jobsched.testing\n"
        "assert 'cronsim' not in sys.modules, 'importing jobsched imported cronsim'\n"
        "s = jobsched.JobScheduler(limits={'rates': {'x': '1/s'}})\n"
        "s.schedule_recurring(lambda: None, 1.0)\n"
        "assert 'cronsim' not in sys.modules, 'the kernel imported cronsim'\n"
        "assert 'cron' not in s.plugins.names('triggers')\n"
    )
    env = {**os.environ, "JOBSCHED_DISABLE_PLUGINS": "cron"}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, env=env
    )
    assert proc.returncode == 0, proc.stderr
