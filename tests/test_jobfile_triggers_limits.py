"""Job-file keys for triggers, limits and unique jobs, and `jobsched schedule preview`."""

from __future__ import annotations

import json
import textwrap
from typing import Any

import pytest

from jobsched import JobScheduler, JobStatus, PluginManager, Rate
from jobsched.cli import main
from jobsched.jobfile import JobFileError, LimitsSettings, parse_jobfile, run_jobfile
from jobsched_plugins.cron_trigger import CronTrigger

EMAIL = 'type = "email"\nargs = { to = "x@corp", subject = "s", latency = 0.001 }\n'


@pytest.fixture(scope="module")
def plugins() -> PluginManager:
    return PluginManager(autoload=False)


def parse(text: str, plugins: PluginManager) -> Any:
    return parse_jobfile(textwrap.dedent(text), source="t.toml", plugins=plugins)


def test_limits_table_is_parsed(plugins: PluginManager) -> None:
    jobfile = parse(
        """
        [limits]
        executors = { process = 2 }
        job_types = { csv-export = 1 }
        rates = { email = "10/s", prime-count = { rate = "1/min", burst = 3 } }

        [[job]]
        id = "a"
        type = "email"
        args = { to = "x@corp", subject = "s" }
        """,
        plugins,
    )
    limits: LimitsSettings = jobfile.tables["limits"]
    assert limits.executors == {"process": 2}
    assert limits.job_types == {"csv-export": 1}
    assert limits.rates == {"email": Rate(10.0), "prime-count": Rate(1 / 60, 3)}


def test_trigger_keys_are_parsed(plugins: PluginManager) -> None:
    jobfile = parse(
        f"""
        [[recurring]]
        id = "nightly"
        {EMAIL}
        trigger = {{ cron = "0 2 * * *", tz = "America/New_York", gap = "skip" }}
        misfire_grace_time = "10m"
        coalesce = "all"
        jitter = "30s"
        times = 1
        """,
        plugins,
    )
    (entry,) = jobfile.recurring
    assert entry.every is None
    assert entry.trigger == {"cron": "0 2 * * *", "tz": "America/New_York", "gap": "skip"}
    assert (entry.misfire_grace_time, entry.coalesce, entry.jitter) == (600.0, "all", 30.0)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("[limits]\njob_types = { x = 0 }", "t.toml:2: [limits]: job_types 'x' must be a positive"),
        ('[limits]\nrates = { email = "fast" }', "rates 'email': rate 'fast'"),
        ("[limits]\nexecutor = { a = 1 }", "unknown key 'executor'; did you mean 'executors'?"),
        (
            f'[[recurring]]\nid = "r"\n{EMAIL}times = 1\ntrigger = {{ crom = "* * * * *" }}',
            "t.toml:6: recurring 'r': trigger {'crom': '* * * * *'}: exactly one key must name a "
            "trigger (such as 'cron', 'interval' or 'date'), found none: unknown trigger 'crom'; "
            "did you mean 'cron'?",
        ),
        (
            f'[[recurring]]\nid = "r"\n{EMAIL}times = 1\ntrigger = {{ cron = "99 * * * *" }}',
            "invalid cron expression '99 * * * *'",
        ),
        (
            f'[[recurring]]\nid = "r"\n{EMAIL}times = 1\n'
            'trigger = { cron = "* * * * *", tz = "Mars/Base" }',
            "unknown time zone 'Mars/Base'",
        ),
        (
            f'[[recurring]]\nid = "r"\n{EMAIL}times = 1\ntrigger = {{}}',
            "must name a trigger",
        ),
        (
            f'[[recurring]]\nid = "r"\n{EMAIL}times = 1\nevery = 1\ntrigger = {{ interval = 1 }}',
            "needs `every` or `trigger` (one of them)",
        ),
        (f'[[recurring]]\nid = "r"\n{EMAIL}times = 1', "needs `every` or `trigger`"),
        (
            f'[[recurring]]\nid = "r"\n{EMAIL}times = 1\nstart_in = 1\n'
            "trigger = { interval = 1 }",
            "start_in is for `every`",
        ),
        (
            f'[[recurring]]\nid = "r"\n{EMAIL}times = 1\nevery = 1\ncoalesce = "some"',
            "coalesce must be one of one, all, none",
        ),
        (f'[[job]]\nid = "j"\n{EMAIL}unique_key = 5', "unique_key must be a non-empty string"),
    ],
)
def test_bad_keys_name_file_line_and_key(plugins: PluginManager, body: str, message: str) -> None:
    with pytest.raises(JobFileError) as info:
        parse_jobfile(body, source="t.toml", plugins=plugins)
    assert message in str(info.value)


async def test_a_run_applies_limits_unique_keys_and_triggers(plugins: PluginManager) -> None:
    jobfile = parse(
        f"""
        [scheduler]
        workers = 4

        [limits]
        job_types = {{ email = 1 }}
        rates = {{ email = "1000/s" }}

        [[job]]
        id = "a"
        {EMAIL}
        unique_key = "mail:x"

        [[job]]
        id = "b"
        {EMAIL}
        unique_key = "mail:x"

        [[job]]
        id = "after-b"
        {EMAIL}
        depends_on = ["b"]

        [[recurring]]
        id = "tick"
        {EMAIL}
        trigger = {{ interval = 0.01 }}
        jitter = "1ms"
        times = 3
        """,
        plugins,
    )
    seen: list[JobScheduler] = []
    result = await run_jobfile(jobfile, plugins=plugins, on_scheduler=seen.append)
    assert result.ok
    # "b" was deduplicated into "a"; "after-b" waited for "a".
    assert [o.id for o in result.outcomes] == ["a", "after-b", "tick#1", "tick#2", "tick#3"]
    assert result.peak_running == 1  # one email at a time
    limiter = seen[0].limiter
    assert limiter is not None
    assert limiter.limits.rates == {"email": Rate(1000.0)}
    assert all(o.status is JobStatus.COMPLETED for o in result.outcomes)


# ── jobsched schedule preview ─────────────────────────────────────────────


def test_preview_json(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "schedule",
            "preview",
            "0 2 * * *",
            "--tz",
            "America/New_York",
            "--after",
            "2026-03-07T12:00",
            "--next",
            "2",
            "--json",
        ]
    )
    assert code == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["utc"] for r in rows] == ["2026-03-08T07:00:00+00:00", "2026-03-09T06:00:00+00:00"]
    assert rows[0]["local"] == "2026-03-08T03:00:00-04:00"
    assert "does not exist" in rows[0]["dst"]
    assert rows[1]["dst"] is None


def test_preview_table_marks_skipped_and_moved(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["schedule", "preview", "30 2 * * *", "--tz", "Europe/Berlin", "--next", "2"]
    assert main([*args, "--after", "2026-03-28T12:00", "--gap", "skip"]) == 0
    out = capsys.readouterr().out
    assert "SKIPPED: 02:30:00 does not exist" in out
    assert "2026-03-30 02:30:00 CEST" in out
    assert "2 fire times, 0 on a daylight-saving change, 1 skipped" in out
    assert main([*args, "--after", "2026-10-24T12:00", "--overlap", "second"]) == 0
    out = capsys.readouterr().out
    assert "2026-10-25 02:30:00 CET (+0100)" in out and "second (CET)" in out


def test_preview_defaults_to_now_in_utc(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schedule", "preview", "* * * * *", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 5 and all(r["local"].endswith("+00:00") for r in rows)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["61 * * * *"], "invalid cron expression '61 * * * *': Bad minute"),
        (["* * * * *", "--tz", "Nowhere/Land"], "unknown time zone 'Nowhere/Land'"),
        (["* * * * *", "--after", "soon"], "--after 'soon' is not an ISO 8601 time"),
    ],
)
def test_preview_bad_input_exits_2(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert main(["schedule", "preview", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("jobsched: error: ") and message in err


def test_preview_bad_count_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["schedule", "preview", "* * * * *", "--next", "0"])
    assert info.value.code == 2
    assert "must be a positive integer" in capsys.readouterr().err


def test_preview_matches_the_trigger() -> None:
    trigger = CronTrigger("*/20 * * * *", tz="Europe/Berlin", overlap="both")
    fires = trigger.preview(1_792_886_400.0, 4)  # 2026-10-25T00:00:00Z
    assert [f.timestamp for f in fires] == [1_792_886_400.0 + 1200 * i for i in range(1, 5)]
