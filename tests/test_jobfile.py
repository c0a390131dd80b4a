"""Job files in-process: parsing details and how a run orders and ends its jobs."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

from jobsched import Job, JobPriority, JobScheduler, JobStatus, PluginManager
from jobsched.jobfile import (
    JobEntry,
    JobFileError,
    RecurringEntry,
    duration,
    keys_of,
    load_jobfile,
    parse_jobfile,
    run_jobfile,
)

EMAIL = 'type = "email"\nargs = { to = "x@corp", subject = "s", latency = 0.001 }\n'


@pytest.fixture(scope="module")
def plugins() -> PluginManager:
    return PluginManager(autoload=False)


def parse(text: str, plugins: PluginManager | None = None) -> Any:
    return parse_jobfile(textwrap.dedent(text), source="t.toml", plugins=plugins)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("100ms", 0.1),
        ("2s", 2.0),
        ("5m", 300.0),
        ("1h", 3600.0),
        (" 1.5 s ", 1.5),
        (3, 3.0),
        (0.25, 0.25),
        ("7", 7.0),
        (".5s", 0.5),
    ],
)
def test_durations(value: object, seconds: float) -> None:
    assert duration(value) == pytest.approx(seconds)


@pytest.mark.parametrize("value", ["", "fast", "1d", "1 fortnight", True, [1], "nan", None])
def test_bad_durations(value: object) -> None:
    with pytest.raises(ValueError, match="duration"):
        duration(value)


def test_every_key_is_declared_once_in_the_model() -> None:
    assert list(keys_of(JobEntry)) == [
        "id",
        "type",
        "args",
        "priority",
        "timeout",
        "retry",
        "deadline",
        "result_ttl",
        "keep_result",
        "retry_on",
        "no_retry_on",
        "queue",
        "group",
        "delay",
        "depends_on",
        "trigger_rule",
        "cancel_after",
        "unique_key",
    ]
    assert list(keys_of(RecurringEntry))[-9:] == [
        "every",
        "trigger",
        "misfire_grace_time",
        "coalesce",
        "jitter",
        "times",
        "until",
        "start_in",
        "allow_overlap",
    ]


def test_a_parsed_file_keeps_every_value(plugins: PluginManager) -> None:
    jobfile = parse(
        f"""
        [scheduler]
        strategy = "edf"
        workers = 2
        seed = 3

        [[job]]
        id = "a"
        {EMAIL}priority = "HIGH"
        timeout = false
        retry = {{ policy = "fixed", seconds = 0.5 }}
        deadline = "2s"
        delay = "10ms"
        depends_on = ["b", "b"]
        cancel_after = "1m"

        [[job]]
        id = "b"
        type = "csv-export"
        [job.args]
        table = "t"

        [[recurring]]
        id = "r"
        {EMAIL}every = "5m"
        until = "1h"
        allow_overlap = true
        """,
        plugins,
    )
    assert (jobfile.scheduler.strategy, jobfile.scheduler.workers, jobfile.scheduler.seed) == (
        "edf",
        2,
        3,
    )
    a, b = jobfile.jobs
    assert (a.priority, a.timeout, a.retry) == ("high", False, {"policy": "fixed", "seconds": 0.5})
    assert (a.deadline, a.delay, a.depends_on, a.cancel_after) == (2.0, 0.01, ("b",), 60.0)
    assert b.args == {"table": "t"}
    assert [j.id for j in jobfile.submit_order] == ["b", "a"]
    (r,) = jobfile.recurring
    assert (r.every, r.times, r.until, r.allow_overlap) == (300.0, None, 3600.0, True)
    assert a.job_options(100.0) == {
        "name": "a",
        "priority": "high",
        "timeout": None,
        "retry": {"policy": "fixed", "seconds": 0.5},
        "deadline": 102.0,
    }


def test_without_plugins_names_are_not_checked() -> None:
    jobfile = parse('[scheduler]\nstrategy = "mine"\n[[job]]\nid = "a"\ntype = "custom"\n')
    assert jobfile.jobs[0].type == "custom"


def test_errors_carry_the_file_line_and_column(plugins: PluginManager) -> None:
    with pytest.raises(JobFileError) as info:
        parse('\n\n[[job]]\nid = "a"\n' + EMAIL + "bogus = 1\n", plugins)
    assert (info.value.source, info.value.line) == ("t.toml", 7)
    assert str(info.value).startswith("t.toml:7: job 'a': unknown key 'bogus'")
    with pytest.raises(JobFileError) as info:
        parse("x = [1,\n  = 2]\n")
    assert (info.value.line, info.value.column) == (2, 3)


def test_load_reads_files(tmp_path: Any, plugins: PluginManager) -> None:
    path = tmp_path / "f.toml"
    path.write_text(f'[[job]]\nid = "a"\n{EMAIL}')
    assert load_jobfile(path, plugins=plugins).jobs[0].id == "a"


def test_an_executor_that_is_not_available_is_bad_input() -> None:
    plugins = PluginManager(autoload=False, deny=["process"])
    with pytest.raises(JobFileError, match="runs on an executor that is not available"):
        parse('[[job]]\nid = "p"\ntype = "prime-count"\nargs = { n = 10 }\n', plugins)


# ── running ────────────────────────────────────────────────────────────
async def _run(text: str, plugins: PluginManager) -> tuple[Any, list[str]]:
    started: list[str] = []

    def watch(scheduler: JobScheduler) -> None:
        def listener(job: Job, old: JobStatus, new: JobStatus) -> None:
            if new is JobStatus.RUNNING:
                started.append(job.name)

        scheduler.add_listener(listener)

    result = await run_jobfile(parse(text, plugins), plugins=plugins, on_scheduler=watch)
    return result, started


async def test_deadlines_are_relative_to_the_start_and_order_edf(plugins: PluginManager) -> None:
    result, started = await _run(
        f"""
        [scheduler]
        strategy = "edf"
        workers = 1
        [[job]]
        id = "late"
        {EMAIL}deadline = 60
        [[job]]
        id = "soon"
        {EMAIL}deadline = "1s"
        [[job]]
        id = "none"
        {EMAIL}
        """,
        plugins,
    )
    assert result.ok and result.exit_code == 0
    assert started == ["soon", "late", "none"]


async def test_priorities(plugins: PluginManager) -> None:
    result, started = await _run(
        f"""
        [scheduler]
        workers = 1
        [[job]]
        id = "low"
        {EMAIL}priority = 0
        [[job]]
        id = "high"
        {EMAIL}priority = "high"
        [[job]]
        id = "medium"
        {EMAIL}
        """,
        plugins,
    )
    assert result.ok
    assert started == ["high", "medium", "low"]
    assert [o.id for o in result.outcomes] == ["low", "high", "medium"]  # the file's order


async def test_a_delayed_job_never_starts_early(plugins: PluginManager) -> None:
    jobs: list[Job] = []

    def watch(scheduler: JobScheduler) -> None:
        scheduler.add_listener(lambda job, old, new: jobs.append(job))

    jobfile = parse(f'[[job]]\nid = "d"\n{EMAIL}delay = "30ms"\n', plugins)
    result = await run_jobfile(jobfile, plugins=plugins, on_scheduler=watch)
    assert result.ok
    job = jobs[0]
    assert job.started_at is not None
    assert job.started_at - job.submitted_at >= 0.03


async def test_a_recurring_entry_fires_exactly_times_runs(plugins: PluginManager) -> None:
    result, _ = await _run(
        f'[[recurring]]\nid = "r"\n{EMAIL}every = "1ms"\ntimes = 4\npriority = "low"\n',
        plugins,
    )
    assert [o.id for o in result.outcomes] == ["r#1", "r#2", "r#3", "r#4"]
    assert all(o.recurring == "r" and o.status is JobStatus.COMPLETED for o in result.outcomes)


async def test_a_failing_recurring_run_fails_the_run(plugins: PluginManager) -> None:
    result, _ = await _run(
        '[[recurring]]\nid = "r"\ntype = "flaky-upload"\nargs = { path = "p", failures = 9 }\n'
        'every = "1ms"\ntimes = 2\nretry = "none"\n',
        plugins,
    )
    assert [o.status for o in result.outcomes] == [JobStatus.FAILED, JobStatus.FAILED]
    assert result.exit_code == 1
    assert result.counts()["failed"] == 2


@pytest.mark.parametrize("text", ["", "[scheduler]\nworkers = 2\n", "[limits]\n"])
def test_a_file_without_jobs_is_refused(plugins: PluginManager, text: str) -> None:
    with pytest.raises(JobFileError, match=r"^t.toml: no jobs in this file"):
        parse(text, plugins)


def test_priority_names_match_the_kernel() -> None:
    assert [p.name.lower() for p in JobPriority] == ["low", "medium", "high", "critical"]
