"""``trigger_rule=`` on dependents (in-memory schedulers and job files without a
store): when a job with ``depends_on`` runs, or is cancelled with the reason.
The stores' side is tests/test_trigger_rules_stores.py."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import jobsched
from jobsched import JobScheduler, JobStatus
from jobsched.jobfile import JobFileError, load_jobfile, run_jobfile

C, F, T, X = JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.TIMED_OUT, JobStatus.CANCELLED


def ok() -> str:
    return "ok"


def boom() -> None:
    raise ValueError("boom")


async def run_dag(ends: list[str], rule: str) -> tuple[jobsched.Job, list[jobsched.Job]]:
    """Upstreams that end as `ends` say ("ok", "fail", "cancel"), then one dependent."""
    gate = asyncio.Event()

    async def waits() -> None:
        await gate.wait()

    async with JobScheduler() as scheduler:
        ups = []
        for end in ends:
            if end == "ok":
                ups.append(scheduler.submit(ok, retry="none"))
            elif end == "fail":
                ups.append(scheduler.submit(boom, retry="none"))
            else:
                up = scheduler.submit(waits, retry="none")
                scheduler.cancel(up)
                ups.append(up)
        dependent = scheduler.submit(ok, depends_on=ups, trigger_rule=rule)
        await scheduler.join()
    return scheduler.get(dependent), [scheduler.get(u) for u in ups]


@pytest.mark.parametrize(
    ("rule", "ends", "status", "error"),
    [
        ("all_success", ["ok", "ok"], C, None),
        ("all_success", ["ok", "fail"], X, "upstream {1} failed"),
        ("all_done", ["fail", "cancel"], C, None),
        ("one_success", ["fail", "ok"], C, None),
        ("one_success", ["fail", "cancel"], X, "trigger rule 'one_success': no upstream completed"),
        ("one_failed", ["ok", "fail"], C, None),
        ("one_failed", ["ok", "cancel"], X, "trigger rule 'one_failed': no upstream failed"),
        ("none_failed", ["ok", "cancel"], C, None),
        ("none_failed", ["ok", "fail"], X, "trigger rule 'none_failed': upstream {1} failed"),
    ],
)
async def test_a_trigger_rule_decides_whether_the_dependent_runs(
    rule: str, ends: list[str], status: JobStatus, error: str | None
) -> None:
    dependent, ups = await run_dag(ends, rule)
    assert dependent.status is status
    expected = None if error is None else error.format(*(u.job_id for u in ups))
    assert dependent.last_error == expected


async def test_a_dependent_released_early_does_not_wait_for_the_rest() -> None:
    gate = asyncio.Event()
    order: list[str] = []

    async def slow_failure() -> None:
        await gate.wait()
        order.append("slow upstream")
        raise ValueError("late")

    async def dependent() -> None:
        order.append("dependent")
        gate.set()  # only now may the other upstream end, and it fails

    async with JobScheduler() as scheduler:
        slow = scheduler.submit(slow_failure, retry="none")
        fast = scheduler.submit(ok)
        after = scheduler.submit(dependent, depends_on=[slow, fast], trigger_rule="one_success")
        await scheduler.join()
    assert order == ["dependent", "slow upstream"]
    assert scheduler.get(after).status is C  # the later failure did not cancel it
    assert scheduler.get(slow).status is F


async def test_a_rule_already_decided_at_submit_applies_at_once() -> None:
    async with JobScheduler() as scheduler:
        failed = scheduler.submit(boom, retry="none")
        await scheduler.join()
        cleanup = scheduler.submit(ok, depends_on=[failed], trigger_rule="all_done")
        never = scheduler.submit(ok, depends_on=[failed], trigger_rule="none_failed")
        await scheduler.join()
    assert scheduler.get(cleanup).status is C
    assert scheduler.get(never).status is X
    assert (
        scheduler.get(never).last_error == f"trigger rule 'none_failed': upstream {failed} failed"
    )


async def test_the_cascade_goes_on_through_rules() -> None:
    async with JobScheduler() as scheduler:
        failed = scheduler.submit(boom, retry="none")
        notify = scheduler.submit(ok, depends_on=[failed], trigger_rule="one_failed")
        after_notify = scheduler.submit(ok, depends_on=[notify])
        skipped = scheduler.submit(ok, depends_on=[failed])
        after_skipped = scheduler.submit(ok, depends_on=[skipped], trigger_rule="all_done")
        await scheduler.join()
    statuses = [scheduler.get(j).status for j in (notify, after_notify, skipped, after_skipped)]
    assert statuses == [C, C, X, C]


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        (
            {"depends_on": ["x"], "trigger_rule": "all_doen"},
            ValueError,
            "unknown trigger_rule 'all_doen'; did you mean 'all_done'? (trigger rules: "
            "all_success, all_done, one_success, one_failed, none_failed)",
        ),
        ({"trigger_rule": "all_done"}, ValueError, "trigger_rule='all_done' needs depends_on"),
    ],
)
async def test_a_bad_trigger_rule_is_refused(
    kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    async with JobScheduler() as scheduler:
        with pytest.raises(error) as caught:
            scheduler.submit(ok, **kwargs)
    assert str(caught.value) == message


async def test_a_task_job_takes_a_trigger_rule_too() -> None:
    from task_examples import add

    async with JobScheduler() as scheduler:
        failed = scheduler.submit(boom, retry="none")
        total = scheduler.submit(add.job(1), depends_on=[failed], trigger_rule="all_done")
        await scheduler.join()
    assert scheduler.get(total).result == 1.5


# ── job files ──────────────────────────────────────────────────────────
JOBFILE = """\
[[job]]
id = "fail"
type = "flaky-upload"
args = {{ path = "x", failures = 5 }}
retry = "none"

[[job]]
id = "cleanup"
type = "sleep"
args = {{ name = "cleanup", seconds = 0 }}
depends_on = ["fail"]
{rule}
"""


async def test_a_job_file_sets_a_trigger_rule(tmp_path: Path) -> None:
    path = tmp_path / "jobs.toml"
    path.write_text(JOBFILE.format(rule='trigger_rule = "all_done"'))
    result = await run_jobfile(load_jobfile(path, plugins=jobsched.default_plugin_manager()))
    assert {o.id: o.status for o in result.outcomes} == {"fail": F, "cleanup": C}
    path.write_text(JOBFILE.format(rule=""))
    result = await run_jobfile(load_jobfile(path, plugins=jobsched.default_plugin_manager()))
    assert {o.id: o.status for o in result.outcomes} == {"fail": F, "cleanup": X}


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        (
            'trigger_rule = "sometimes"',
            "jobs.toml:12: job 'cleanup': trigger_rule must be one of all_success, all_done, "
            "one_success, one_failed, none_failed, got string 'sometimes'",
        ),
    ],
)
def test_a_job_file_with_a_bad_trigger_rule_is_refused(
    tmp_path: Path, rule: str, message: str
) -> None:
    path = tmp_path / "jobs.toml"
    path.write_text(JOBFILE.format(rule=rule))
    with pytest.raises(JobFileError) as caught:
        load_jobfile(path, plugins=jobsched.default_plugin_manager())
    assert str(caught.value).endswith(message)


def test_a_trigger_rule_without_depends_on_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "jobs.toml"
    path.write_text(
        JOBFILE.format(rule="").replace('depends_on = ["fail"]', 'trigger_rule = "all_done"')
    )
    with pytest.raises(JobFileError, match="trigger_rule 'all_done' needs depends_on"):
        load_jobfile(path, plugins=jobsched.default_plugin_manager())
