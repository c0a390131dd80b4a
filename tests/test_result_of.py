"""``jobsched.result_of``: an upstream's result passed to a task's argument,
in one process (memory, a SQLite file one scheduler owns) and across
processes (a ``jobsched worker`` on SQLite and PostgreSQL); its failure
paths; and mypy accepting it for any parameter."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from flow_tasks import echo, extract, fail, odd, total
from jobsched import (
    BlockingClient,
    Client,
    JobScheduler,
    JobSpec,
    JobSpecError,
    JobStatus,
    UnknownJobError,
    build_job,
    group,
    job_spec,
    result_of,
)
from jobsched._codec import JobCodec
from jobsched._plugins import default_plugin_manager
from typing_support import mypy_errors


# ── in one process ─────────────────────────────────────────────────────
async def test_a_dependent_gets_its_upstreams_result_by_job_or_by_id() -> None:
    async with JobScheduler() as scheduler:
        rows = extract.job(4)
        first = scheduler.submit(rows)
        by_job = scheduler.submit(total.job(result_of(rows), title="by job"))
        by_id = scheduler.submit(total.job(rows=result_of(first)))
        await scheduler.join()
    assert scheduler.get(by_job).result == "by job: 6"
    assert scheduler.get(by_id).result == "total: 6"
    # The marker made the upstream a dependency: no depends_on was given.
    assert scheduler.kernel.graph.depends_on(by_job) == (first,)


async def test_a_dependent_submitted_after_its_upstream_finished_gets_the_result() -> None:
    async with JobScheduler() as scheduler:
        upstream = scheduler.submit(extract.job(3))
        await scheduler.join()
        dependent = scheduler.submit(total.job(result_of(upstream)))
        await scheduler.join()
    assert scheduler.get(dependent).result == "total: 3"


async def test_markers_nested_in_lists_and_tables_are_resolved() -> None:
    async with JobScheduler() as scheduler:
        a, b = extract.job(2), extract.job(3)
        both = scheduler.submit_many([a, b, echo.job({"a": result_of(a), "b": [result_of(b), 7]})])
        await scheduler.join()
    assert scheduler.get(both[-1]).result == {"a": [0, 1], "b": [[0, 1, 2], 7]}
    assert set(scheduler.kernel.graph.depends_on(both[-1])) == {a.job_id, b.job_id}


async def test_in_memory_a_result_that_is_not_json_is_passed_as_the_object() -> None:
    async with JobScheduler() as scheduler:
        upstream = scheduler.submit(odd.job())
        dependent = scheduler.submit(echo.job(result_of(upstream)))
        await scheduler.join()
    assert scheduler.get(dependent).result == {1, 2}


async def test_a_failed_upstream_cancels_the_dependent() -> None:
    async with JobScheduler() as scheduler:
        upstream = scheduler.submit(fail.job("boom"))
        dependent = scheduler.submit(echo.job(result_of(upstream)))
        await scheduler.join()
    job = scheduler.get(dependent)
    assert job.status is JobStatus.CANCELLED
    assert job.last_error == f"upstream {upstream} failed"


async def test_under_a_trigger_rule_an_upstream_that_did_not_complete_gives_none() -> None:
    async with JobScheduler() as scheduler:
        good = scheduler.submit(extract.job(2))
        bad = scheduler.submit(fail.job("boom"))
        cleanup = scheduler.submit(
            echo.job([result_of(good), result_of(bad)]), trigger_rule="all_done"
        )
        await scheduler.join()
    assert scheduler.get(cleanup).status is JobStatus.COMPLETED
    assert scheduler.get(cleanup).result == [[0, 1], None]


async def test_a_result_that_does_not_fit_the_parameter_fails_the_dependent() -> None:
    async with JobScheduler() as scheduler:
        upstream = scheduler.submit(echo.job("not rows"))
        dependent = scheduler.submit(total.job(result_of(upstream)))
        await scheduler.join()
    job = scheduler.get(dependent)
    assert job.status is JobStatus.FAILED
    assert job.attempts == 1
    assert job.last_error is not None
    assert job.last_error.startswith("ResultUnavailableError: an upstream's result does not fit")
    assert "argument 'rows' must be list of int, got string 'not rows'" in job.last_error


async def test_an_upstream_that_keeps_no_result_fails_the_dependent() -> None:
    async with JobScheduler() as scheduler:
        upstream = scheduler.submit(extract.job(2), keep_result=False)
        dependent = scheduler.submit(total.job(result_of(upstream)))
        await scheduler.join()
    job = scheduler.get(dependent)
    assert job.status is JobStatus.FAILED
    assert job.last_error == (
        f"ResultUnavailableError: result_of({upstream!r}): its job keeps no result "
        "(keep_result=False)"
    )


async def test_an_expired_result_fails_the_dependent() -> None:
    async with JobScheduler() as scheduler:
        upstream = scheduler.submit(extract.job(2), result_ttl=0)
        dependent = scheduler.submit(total.job(result_of(upstream)))
        await scheduler.join()
    assert scheduler.get(dependent).last_error == (
        f"ResultUnavailableError: result_of({upstream!r}): its result expired (result_ttl 0s)"
    )


async def test_an_upstream_past_the_history_limit_fails_the_dependent() -> None:
    async with JobScheduler(history_limit=1) as scheduler:
        upstream = scheduler.submit(extract.job(2))
        gate = scheduler.submit(fail.job("hold"))  # finishes after upstream...
        await scheduler.join()
        # ...so the upstream is forgotten; a dependent that names it by id:
        with pytest.raises(UnknownJobError, match=upstream):
            scheduler.submit(total.job(result_of(upstream)))
    assert scheduler.get(gate).status is JobStatus.FAILED


async def test_an_unknown_upstream_is_refused_at_submit() -> None:
    async with JobScheduler() as scheduler:
        with pytest.raises(UnknownJobError, match="job-nope"):
            scheduler.submit(total.job(result_of("job-nope")))


async def test_a_durable_store_refuses_to_pass_on_a_result_that_is_not_json(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    async with JobScheduler(store=url) as scheduler:
        upstream = scheduler.submit(odd.job())
        dependent = scheduler.submit(echo.job(result_of(upstream)))
        rows = scheduler.submit(extract.job(3))
        fine = scheduler.submit(total.job(result_of(rows)))
        await scheduler.join()
    job = scheduler.get(dependent)
    assert job.status is JobStatus.FAILED
    assert job.last_error == (
        f"ResultUnavailableError: result_of({upstream!r}): its result is a set, not a JSON "
        "value: a store keeps results as JSON, so a result passed to another job must be one "
        "(str, number, bool, None, list, dict)"
    )
    assert scheduler.get(fine).result == "total: 3"
    # The store keeps the marker, not the value: a restart resolves it again.
    async with JobScheduler(store=url) as again:
        spec = job_spec(again.get(fine))
        assert spec is not None and spec.args == {"rows": {"$result_of": rows}}


async def test_a_dependent_restored_from_a_store_resolves_its_markers_again(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    async with JobScheduler(store=url) as scheduler:
        upstream = scheduler.submit(extract.job(3))
        dependent = scheduler.submit(total.job(result_of(upstream)), delay=3600)
        done = asyncio.Event()
        scheduler.add_listener(
            lambda job, old, new: done.set() if job.job_id == upstream and new.is_terminal else None
        )
        if not scheduler.get(upstream).status.is_terminal:
            await done.wait()
        await scheduler.flush()
    # Stopped with the dependent still waiting for its delay, its marker stored.
    async with JobScheduler(store=url) as again:
        restored = again.get(dependent)
        assert restored.status is JobStatus.PENDING
        # Rebuilt from the stored marker, then resolved from the restored upstream.
        assert restored.arguments == {"rows": [0, 1, 2]}  # type: ignore[attr-defined]
        again.cancel(dependent)


def test_the_marker_is_data_in_the_jobs_spec() -> None:
    rows = extract.job(2)
    dependent = total.job(result_of(rows))
    codec = JobCodec(default_plugin_manager())
    type_name, args, _ = codec.describe_data(dependent, 0.0)
    assert (type_name, args) == ("flow.total", {"rows": {"$result_of": rows.job_id}})
    a, b = extract.job(1), extract.job(2)
    group_args = codec.describe_data(echo.job(result_of(group(a, b))), 0.0)[1]
    assert group_args == {"value": {"$result_of": [a.job_id, b.job_id]}}
    # Its JSON form builds the same job back (what a store does).
    again = build_job("flow.total", {"rows": {"$result_of": "job-7"}})
    assert again.result_upstreams(str) == ["job-7"]
    assert job_spec(again) == JobSpec(type="flow.total", args={"rows": {"$result_of": "job-7"}})


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (3, "result_of() takes a job id, a job or a group, got int 3"),
        ("", "result_of() takes a job id, a job or a group, got ''"),
        (total, "result_of() takes a job id, a job or a group, got Task"),
    ],
)
def test_result_of_refuses_what_is_not_an_upstream(value: Any, message: str) -> None:
    with pytest.raises((TypeError, ValueError)) as info:
        result_of(value)
    assert str(info.value).startswith(message)


def test_a_job_type_that_is_not_a_task_refuses_the_marker() -> None:
    with pytest.raises(JobSpecError) as info:
        build_job("email", {"to": {"$result_of": "job-1"}, "subject": "hi"})
    assert str(info.value) == (
        "email job: argument 'to' is a result_of marker, but 'email' is not a task: an "
        "upstream's result can be passed to a task's arguments only"
    )


def test_a_malformed_marker_is_refused_naming_the_argument() -> None:
    with pytest.raises(JobSpecError, match="argument 'rows' must be list of int"):
        build_job("flow.total", {"rows": {"$result_of": 3}})


# ── across processes ───────────────────────────────────────────────────
@pytest.mark.slow
async def test_a_worker_process_passes_a_result_to_a_dependent(flow_worker: str) -> None:
    async with Client(flow_worker) as client:
        upstream = await client.submit(extract.job(5))
        dependent = await client.submit(total.job(result_of(upstream), title="rows"))
        # In one batch, an earlier Job of the batch stands for its id.
        rows = extract.job(3)
        batch = await client.submit_many([rows, total.job(result_of(rows))])
        assert await client.result(dependent, timeout=60) == "rows: 10"
        assert await client.result(batch[1], timeout=60) == "total: 3"
        info = await client.get(batch[1])
        assert info.args == {"rows": {"$result_of": batch[0]}}


@pytest.mark.slow
async def test_a_worker_passes_none_for_an_upstream_a_trigger_rule_let_fail(
    flow_worker: str,
) -> None:
    async with Client(flow_worker) as client:
        good = await client.submit(extract.job(2))
        bad = await client.submit(fail.job("boom"))
        cleanup = await client.submit(
            echo.job([result_of(good), result_of(bad)]), trigger_rule="all_done"
        )
        assert await client.result(cleanup, timeout=60) == [[0, 1], None]
        assert (await client.get(bad)).status is JobStatus.FAILED


@pytest.mark.slow
async def test_a_worker_fails_a_dependent_whose_upstream_result_is_not_json(
    flow_worker: str,
) -> None:
    async with Client(flow_worker) as client:
        upstream = await client.submit(odd.job())
        dependent = await client.submit(echo.job(result_of(upstream)))
        info = await client.wait(dependent, timeout=60)
    assert info.status is JobStatus.FAILED
    assert info.last_error == (
        f"ResultUnavailableError: result_of({upstream!r}): its result is a set, not a JSON "
        "value: a store keeps results as JSON, so a result passed to another job must be one "
        "(str, number, bool, None, list, dict)"
    )


@pytest.mark.slow
async def test_a_worker_fails_a_dependent_whose_upstream_result_is_gone(flow_worker: str) -> None:
    async with Client(flow_worker) as client:
        expired = await client.submit(extract.job(2), result_ttl=0)
        unkept = await client.submit(extract.job(2), keep_result=False)
        first = await client.submit(total.job(result_of(expired)))
        second = await client.submit(total.job(result_of(unkept)))
        errors = [(await client.wait(i, timeout=60)).last_error for i in (first, second)]
    assert errors == [
        f"ResultUnavailableError: result_of({expired!r}): its result expired (result_ttl)",
        f"ResultUnavailableError: result_of({unkept!r}): its job keeps no result "
        "(keep_result=False)",
    ]


@pytest.mark.slow
def test_a_blocking_client_refuses_an_unknown_upstream(flow_store_url: str) -> None:
    with BlockingClient(flow_store_url) as client:
        with pytest.raises(UnknownJobError, match="job-nope"):
            client.submit(total.job(result_of("job-nope")))
        rows = extract.job(2)
        with pytest.raises(JobSpecError, match="is not an earlier job of this batch"):
            client.submit(total.job(result_of(rows)))


# ── typed: result_of fits any parameter ───────────────────────────────
MYPY_SNIPPET = """\
import jobsched
from jobsched import result_of, task


@task
def extract(n: int) -> list[int]:
    return list(range(n))


@task
def send_report(rows: list[int], title: str = "daily") -> str:
    return title


x = extract.job(3)
send_report.job(rows=jobsched.result_of(x))
send_report.job(result_of("job-1"), title=result_of(x))
send_report.options(priority="high").job(rows=result_of(x))
send_report.job(rows=result_of(x), title=3)
"""


@pytest.mark.slow
def test_mypy_accepts_result_of_for_any_parameter(tmp_path: Path) -> None:
    errors, output = mypy_errors(tmp_path, MYPY_SNIPPET)
    # Only the last line is wrong (title=3 for a str), whatever result_of stands for.
    assert [line.split(":")[1] for line in errors] == ["19"], output
    assert 'Argument "title" to "job" of "Task" has incompatible type "int"' in errors[0]
