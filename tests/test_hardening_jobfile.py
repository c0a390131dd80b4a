"""Hardening of job files, limits and triggers (issue 9): bad input is refused, clearly."""

from __future__ import annotations

import json
import math
import os
import textwrap
from datetime import datetime, timezone
from typing import Any

import pytest

from jobsched import (
    MAX_INTERVAL,
    MIN_INTERVAL,
    IntervalTrigger,
    JobScheduler,
    Limits,
    PluginManager,
    RecurringSchedule,
)
from jobsched.cli import main
from jobsched.jobfile import (
    MAX_DURATION,
    MAX_JOBFILE_BYTES,
    MAX_RETRIES,
    MAX_WORKERS,
    JobFileError,
    parse_jobfile,
)
from jobsched_plugins.cron_trigger import CronTrigger

SLEEP = 'type = "sleep"\nargs = { name = "a", seconds = 0 }\n'
JOB = f'[[job]]\nid = "a"\n{SLEEP}'


@pytest.fixture(scope="module")
def plugins() -> PluginManager:
    return PluginManager(autoload=False)


def parse(text: str, plugins: PluginManager) -> Any:
    return parse_jobfile(textwrap.dedent(text), source="t.toml", plugins=plugins)


# ── [limits] names (defect 5) ─────────────────────────────────────────


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            'rates = { emial = "1/s" }',
            "t.toml:2: [limits]: rates: unknown job type 'emial'; did you mean 'email'?",
        ),
        (
            "executors = { proces = 1 }",
            "t.toml:2: [limits]: executors: unknown executor 'proces'; did you mean 'process'",
        ),
        (
            "job_types = { csv-exprot = 1 }",
            "t.toml:2: [limits]: job_types: unknown job type 'csv-exprot'; "
            "did you mean 'csv-export'?",
        ),
    ],
)
def test_a_typo_in_limits_is_refused_with_did_you_mean(
    plugins: PluginManager, line: str, message: str
) -> None:
    with pytest.raises(JobFileError) as info:
        parse(f"[limits]\n{line}\n\n{JOB}", plugins)
    assert message in str(info.value)


def test_a_typo_in_limits_exits_2_from_the_cli(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "jobs.toml"
    path.write_text(f'[limits]\nrates = {{ emial = "1/s" }}\n\n{JOB}')
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "did you mean 'email'?" in err


def test_registered_limit_names_are_accepted(plugins: PluginManager) -> None:
    jobfile = parse(
        f"[limits]\nexecutors = {{ process = 1 }}\njob_types = {{ sleep = 1 }}\n"
        f'rates = {{ email = "1/s" }}\n\n{JOB}',
        plugins,
    )
    assert jobfile.tables["limits"].rates


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        (
            {"executors": {"proces": 1}},
            "limits.executors['proces']: unknown executor 'proces'; did you mean 'process'",
        ),
        (
            Limits(rates={"emial": "1/s"}),
            "limits.rates['emial']: unknown job type 'emial'; did you mean 'email'?",
        ),
        (
            {"job_types": {"csv-exprot": 1}},
            "limits.job_types['csv-exprot']: unknown job type 'csv-exprot'; "
            "did you mean 'csv-export'?",
        ),
    ],
)
def test_the_api_refuses_limit_typos(limits: Any, message: str) -> None:
    with pytest.raises(ValueError) as info:
        JobScheduler(limits=limits)
    assert message in str(info.value)


def test_the_api_accepts_limits_on_functions_and_classes() -> None:
    # A function job's type is its qualified name, which no registry lists.
    scheduler = JobScheduler(limits={"job_types": {"send_report": 1}, "rates": {"Mailer.send": 1}})
    assert scheduler.limiter is not None


# ── job-file size (defect 6) and files without jobs ───────────────────


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["run", *args])
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err  # one line
    return code, err


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_a_device_is_not_read_as_a_job_file(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run_cli(capsys, "/dev/zero")
    assert code == 2
    assert err == "jobsched: error: /dev/zero: not a job file but a device; give a TOML file\n"


def test_a_job_file_over_64_mib_is_refused(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "big.toml"
    with open(path, "wb") as file:
        file.truncate(MAX_JOBFILE_BYTES + 1)  # sparse: no disk space used
    assert MAX_JOBFILE_BYTES == 64 * 1024 * 1024
    code, err = run_cli(capsys, str(path))
    assert code == 2
    assert err.endswith("big.toml: the job file is larger than 64 MiB\n")


def test_a_job_file_without_jobs_exits_2_and_creates_no_store(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "empty.toml"
    path.write_text("[scheduler]\nworkers = 2\n")
    store = tmp_path / "j.db"
    code, err = run_cli(capsys, str(path), "--store", f"sqlite:///{store}")
    assert code == 2
    assert "empty.toml: no jobs in this file" in err
    assert list(tmp_path.iterdir()) == [path]  # no store, no lock file


# ── triggers (defect 8) ───────────────────────────────────────────────


class SteppedClock:
    """A clock that reads whatever the test sets: both timebases at once."""

    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t

    def time(self) -> float:
        return self.t


ORIGIN = 10_000_000.1  # a monotonic clock of a machine up for four months


def test_interval_fires_are_computed_not_summed() -> None:
    # Summing 0.3 s a million times from ORIGIN drifts by 0.75 ms.
    schedule = RecurringSchedule(lambda: None, 0.3, ORIGIN)  # type: ignore[arg-type, return-value]
    clock = SteppedClock()
    fires = 1_000_000
    for _ in range(fires):
        clock.t = schedule.next_fire  # type: ignore[assignment]
        schedule.take_due(clock)  # type: ignore[arg-type]
    assert schedule.next_fire == ORIGIN + fires * 0.3
    assert schedule.fired == 0 and schedule.coalesced == 0  # one due fire each time


def test_the_interval_triggers_millionth_fire_is_exact() -> None:
    trigger = IntervalTrigger(0.3)
    millionth = trigger.fire_time(ORIGIN, 1_000_000)
    assert millionth == ORIGIN + 1_000_000 * 0.3
    assert trigger.last_index(ORIGIN, millionth) == 1_000_000
    assert trigger.last_index(ORIGIN, math.nextafter(millionth, 0)) == 999_999
    assert trigger.last_index(ORIGIN, ORIGIN - 1) == -1


def utc(*parts: int) -> float:
    return datetime(*parts, tzinfo=timezone.utc).timestamp()  # type: ignore[misc]


def fires(expr: str, after: float, count: int, tz: str = "UTC") -> list[float]:
    return [f.timestamp for f in CronTrigger(expr, tz=tz).preview(after, count)]


NEW_YEAR = utc(2026, 1, 1)  # a Thursday


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        # Saturday and Sunday: SUN at the end of a range is 7, not 0.
        ("0 9 * * SAT-SUN", [utc(2026, 1, 3, 9), utc(2026, 1, 4, 9), utc(2026, 1, 10, 9)]),
        ("0 9 * * sat-sun", [utc(2026, 1, 3, 9), utc(2026, 1, 4, 9), utc(2026, 1, 10, 9)]),
        ("0 9 * * 6-0", [utc(2026, 1, 3, 9), utc(2026, 1, 4, 9), utc(2026, 1, 10, 9)]),
        ("0 9 * * FRI-SUN/2", [utc(2026, 1, 2, 9), utc(2026, 1, 4, 9), utc(2026, 1, 9, 9)]),
        ("0 9 * * SUN-SUN", [utc(2026, 1, 4, 9), utc(2026, 1, 11, 9), utc(2026, 1, 18, 9)]),
        ("0 0 9 * * SAT-SUN", [utc(2026, 1, 3, 9), utc(2026, 1, 4, 9), utc(2026, 1, 10, 9)]),
        # Every day of the week, whichever way it is spelled.
        ("0 9 * * MON-SUN", [utc(2026, 1, d, 9) for d in (1, 2, 3, 4, 5, 6, 7)]),
        ("0 9 * * 1-7", [utc(2026, 1, d, 9) for d in (1, 2, 3, 4, 5, 6, 7)]),
        ("0 9 * * 1,SAT-SUN", [utc(2026, 1, 3, 9), utc(2026, 1, 4, 9), utc(2026, 1, 5, 9)]),
        # Vixie cron's shorthands.
        ("@hourly", [utc(2026, 1, 1, 1), utc(2026, 1, 1, 2), utc(2026, 1, 1, 3)]),
        ("@daily", [utc(2026, 1, 2), utc(2026, 1, 3), utc(2026, 1, 4)]),
        ("@midnight", [utc(2026, 1, 2), utc(2026, 1, 3), utc(2026, 1, 4)]),
        ("@weekly", [utc(2026, 1, 4), utc(2026, 1, 11), utc(2026, 1, 18)]),
        ("@monthly", [utc(2026, 2, 1), utc(2026, 3, 1), utc(2026, 4, 1)]),
        ("@yearly", [utc(2027, 1, 1), utc(2028, 1, 1), utc(2029, 1, 1)]),
        ("@annually", [utc(2027, 1, 1), utc(2028, 1, 1), utc(2029, 1, 1)]),
        ("  @Daily ", [utc(2026, 1, 2), utc(2026, 1, 3), utc(2026, 1, 4)]),
    ],
)
def test_cron_syntax_users_type(expr: str, expected: list[float]) -> None:
    assert fires(expr, NEW_YEAR, len(expected)) == expected


def test_cron_shorthands_follow_the_time_zone() -> None:
    # @daily in Berlin is 23:00 UTC in winter.
    assert fires("@daily", NEW_YEAR, 2, tz="Europe/Berlin") == [
        utc(2026, 1, 1, 23),
        utc(2026, 1, 2, 23),
    ]


def test_an_unknown_cron_shorthand_is_refused() -> None:
    with pytest.raises(ValueError, match=r"invalid cron expression '@reboot': unknown shorthand"):
        CronTrigger("@reboot")


@pytest.mark.parametrize("expr", ["0 9 * * SAT-SUN", "@weekly"])
def test_schedule_preview_accepts_them(expr: str, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["schedule", "preview", expr, "--after", "2026-01-01T00:00", "--next", "2", "--json"]
    assert main(args) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["utc"] for r in rows] == [
        "2026-01-03T09:00:00+00:00" if "SAT" in expr else "2026-01-04T00:00:00+00:00",
        "2026-01-04T09:00:00+00:00" if "SAT" in expr else "2026-01-11T00:00:00+00:00",
    ]


def test_a_job_file_takes_them(plugins: PluginManager) -> None:
    jobfile = parse(
        f'[[recurring]]\nid = "r"\n{SLEEP}times = 1\ntrigger = {{ cron = "@hourly" }}\n'
        f'[[recurring]]\nid = "w"\n{SLEEP}times = 1\ntrigger = {{ cron = "0 9 * * SAT-SUN" }}\n',
        plugins,
    )
    assert [r.trigger for r in jobfile.recurring] == [
        {"cron": "@hourly"},
        {"cron": "0 9 * * SAT-SUN"},
    ]


# ── bounds on job-file values ─────────────────────────────────────────


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            f"{JOB}retry = {{ max_retries = 1e9 }}",
            "t.toml:5: job 'a': retry max_retries must be an integer from 0 to 1000, "
            "got float 1000000000.0",
        ),
        (f"{JOB}retry = {{ max_retries = 2.5 }}", "max_retries must be an integer from 0 to 1000"),
        (f"{JOB}retry = {{ max_retries = 1001 }}", "max_retries must be an integer from 0 to 1000"),
        (f"{JOB}retry = {{ max_retries = -1 }}", "max_retries must be an integer from 0 to 1000"),
        (
            f"{JOB}retry = {{ base_delay = 1e308 }}",
            "t.toml:5: job 'a': retry base_delay must be at most 31536000 seconds (one year)",
        ),
        (
            f'{JOB}retry = {{ policy = "fixed", seconds = 1e308 }}',
            "retry seconds must be at most 31536000 seconds (one year)",
        ),
        (
            f"{JOB}delay = 1e308",
            "t.toml:5: job 'a': delay must be at most 31536000 seconds (one year), got 1e+308",
        ),
        (f'{JOB}timeout = "9000h"', "timeout must be at most 31536000 seconds (one year)"),
        (
            f'[[recurring]]\nid = "r"\n{SLEEP}times = 2\nevery = 1e-9',
            "t.toml:6: recurring 'r': every must be at least 0.001 seconds (1ms), got 1e-09",
        ),
        (
            f'[[recurring]]\nid = "r"\n{SLEEP}times = 2\nevery = "9000h"',
            "every must be at most 31536000 seconds (one year)",
        ),
        (
            f'[[recurring]]\nid = "r"\n{SLEEP}times = 2\ntrigger = {{ interval = 1e-9 }}',
            "interval must be from 0.001 to 31536000 seconds (1ms to one year), got 1e-09",
        ),
        (
            f"[scheduler]\nworkers = 100000\n\n{JOB}",
            "t.toml:2: [scheduler]: workers must be at most 1024, got 100000",
        ),
    ],
)
def test_values_beyond_their_bounds_are_refused(
    plugins: PluginManager, body: str, message: str
) -> None:
    with pytest.raises(JobFileError) as info:
        parse(body, plugins)
    assert message in str(info.value)


def test_values_at_their_bounds_are_accepted(plugins: PluginManager) -> None:
    jobfile = parse(
        f"[scheduler]\nworkers = {MAX_WORKERS}\n\n{JOB}delay = {MAX_DURATION}\n"
        f"retry = {{ max_retries = {MAX_RETRIES}, max_delay = {MAX_DURATION} }}\n"
        f'[[recurring]]\nid = "r"\n{SLEEP}times = 2\nevery = "1ms"\n',
        plugins,
    )
    assert jobfile.scheduler.workers == 1024
    assert jobfile.jobs[0].retry == {"max_retries": 1000, "max_delay": 31_536_000.0}
    assert jobfile.recurring[0].every == 0.001


def test_the_interval_trigger_has_the_same_bounds() -> None:
    assert (MIN_INTERVAL, MAX_INTERVAL) == (0.001, MAX_DURATION)
    IntervalTrigger(MIN_INTERVAL)
    IntervalTrigger(MAX_INTERVAL)
    for seconds in (1e-9, MAX_INTERVAL * 2, math.inf):
        with pytest.raises(ValueError, match=r"interval must be from 0\.001 to 31536000 seconds"):
            IntervalTrigger(seconds)
    with pytest.raises(ValueError, match=r"interval must be from 0\.001"):
        JobScheduler().schedule_recurring(lambda: None, 1e-9)  # type: ignore[arg-type, return-value]
