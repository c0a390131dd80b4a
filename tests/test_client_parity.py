"""`Client` and `LocalClient` take the same `submit`/`submit_many` calls and give
the same observable jobs: a `Client` on a shared SQLite file, a `LocalClient`
on an in-memory scheduler, both with their queue paused so nothing runs."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from jobsched import (
    Client,
    Job,
    JobInfo,
    JobScheduler,
    LocalClient,
    Submission,
    UnknownJobError,
    build_job,
)

Api = Any  # a Client or a LocalClient: the same coroutines


@pytest.fixture(params=["client", "local"])
async def api(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Api]:
    if request.param == "client":
        async with Client(f"sqlite:///{tmp_path / 'jobs.db'}") as client:
            await client.pause_queue()
            yield client
    else:
        async with JobScheduler() as scheduler, LocalClient(scheduler) as local:
            await local.pause_queue()
            yield local


def email(to: str, **options: Any) -> Job:
    return build_job("email", {"to": to, "subject": "hello", "latency": 0}, **options)


def observed(infos: list[JobInfo], ids: list[str]) -> list[dict[str, Any]]:
    """What either client shows of each job, with ids as positions in `ids`
    (each client makes its own ids) and no times."""
    position = {job_id: i for i, job_id in enumerate(ids)}
    return [
        {
            "type": info.type,
            "args": info.args,
            "status": info.status,
            "name": info.name,
            "priority": info.priority,
            "key": info.key,
            "unique_key": info.unique_key,
            "depends_on": [position.get(d, d) for d in info.depends_on],
            "trigger_rule": info.trigger_rule,
            "delayed": info.run_at > info.submitted_at,
            "options": {k: v for k, v in info.options.items() if k != "deadline"},
        }
        for info in infos
    ]


async def _batch(api: Api) -> list[str]:
    first = email("a@example.com")
    second = email("b@example.com", name="second")
    return list(
        await api.submit_many(
            [
                first,
                Submission(
                    second,
                    depends_on=[first],
                    priority="high",
                    timeout=30,
                    retry="none",
                    name="renamed",
                    result_ttl=60,
                    keep_result=True,
                ),
                Submission(email("c@example.com"), delay=3600, unique_key="daily"),
                Submission(email("d@example.com"), unique_key="daily"),
                Submission(
                    email("e@example.com"),
                    depends_on=[first, second],
                    trigger_rule="all_done",
                    keep_result=False,
                ),
                Submission(email("f@example.com"), key="external-1"),
            ]
        )
    )


async def _singles(api: Api) -> list[str]:
    job = email("g@example.com")
    upstream = await api.submit(job, priority=3, timeout=None, name="single", key="k-1")
    return [
        upstream,
        await api.submit(email("h@example.com"), key="k-1"),  # known key: that job's id
        await api.submit(
            email("i@example.com"),
            depends_on=[upstream],
            trigger_rule="one_failed",
            result_ttl=5,
            delay=60,
        ),
        await api.submit(email("j@example.com"), unique_key="u-1", retry={"policy": "fixed"}),
        await api.submit(email("k@example.com"), unique_key="u-1"),
    ]


SCENARIOS: dict[str, Callable[[Api], Any]] = {"batch": _batch, "singles": _singles}


async def _run(api: Api, scenario: str) -> list[dict[str, Any]]:
    ids = await SCENARIOS[scenario](api)
    infos = [await api.get(job_id) for job_id in ids]
    return observed(infos, ids)


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
async def test_client_and_local_client_show_the_same_jobs(scenario: str, tmp_path: Path) -> None:
    async with Client(f"sqlite:///{tmp_path / 'jobs.db'}") as client:
        await client.pause_queue()
        shared = await _run(client, scenario)
    async with JobScheduler() as scheduler, LocalClient(scheduler) as local:
        await local.pause_queue()
        here = await _run(local, scenario)
    assert here == shared
    # The scenarios set every option, and dedup returned the first job's id.
    assert any(job["unique_key"] for job in shared)
    assert any(job["trigger_rule"] != "all_success" for job in shared)


async def test_options_leave_the_callers_job_as_it_was(api: Api) -> None:
    job = email("a@example.com")
    name = job.name
    job_id = await api.submit(job, priority="critical", name="other", result_ttl=9)
    info = await api.get(job_id)
    assert (info.name, info.priority.name, info.options["result_ttl"]) == ("other", "CRITICAL", 9)
    assert (job.name, job.priority.name, job.result_ttl) == (name, "MEDIUM", None)
    assert job.status.value == "pending" and job.seq == 0


BAD: dict[str, tuple[Callable[[Api], Any], type[Exception], str]] = {
    "priority": (
        lambda api: api.submit(email("a@example.com"), priority="urgent"),
        ValueError,
        "priority must be one of",
    ),
    "priority in a batch": (
        lambda api: api.submit_many([Submission(email("a@example.com"), priority=7)]),
        ValueError,
        "priority must be one of",
    ),
    "trigger_rule": (
        lambda api: api.submit(email("a@example.com"), trigger_rule="sometimes"),
        ValueError,
        "sometimes",
    ),
    "trigger_rule without depends_on": (
        lambda api: api.submit(email("a@example.com"), trigger_rule="all_done"),
        ValueError,
        "needs depends_on",
    ),
    "unknown dependency": (
        lambda api: api.submit(email("a@example.com"), depends_on=["no-such-job"]),
        UnknownJobError,
        "no-such-job",
    ),
    "unknown dependency in a batch": (
        lambda api: api.submit_many(
            [email("a@example.com"), Submission(email("b@example.com"), depends_on=["nope"])]
        ),
        UnknownJobError,
        "nope",
    ),
    "a Job not earlier in the batch": (
        lambda api: api.submit_many(
            [Submission(email("a@example.com"), depends_on=[email("b@example.com")])]
        ),
        ValueError,
        "not an earlier job of this batch",
    ),
    "delay": (
        lambda api: api.submit(email("a@example.com"), delay=-1),
        ValueError,
        "delay must be >= 0",
    ),
    "empty key": (
        lambda api: api.submit(email("a@example.com"), key=""),
        ValueError,
        "key must be a non-empty string",
    ),
    "timeout": (
        lambda api: api.submit(email("a@example.com"), timeout=-5),
        ValueError,
        "timeout must be a positive number",
    ),
    "options for a workflow": (
        lambda api: api.submit(_workflow(), priority="high"),
        TypeError,
        "takes depends_on only",
    ),
}


def _workflow() -> Any:
    from jobsched import chain

    return chain(email("a@example.com"), email("b@example.com"))


async def test_a_workflow_takes_depends_on_and_the_unset_options(api: Api) -> None:
    upstream = await api.submit(email("z@example.com"))
    last = await api.submit(_workflow(), depends_on=[upstream], trigger_rule="all_success")
    infos = [await api.get(info.job_id) for info in await api.jobs()]
    assert [info.job_id for info in infos][-1] == last
    assert [list(info.depends_on) for info in infos] == [[], [upstream], [infos[1].job_id]]


@pytest.mark.parametrize("case", sorted(BAD))
async def test_bad_submits_fail_alike_and_submit_nothing(api: Api, case: str) -> None:
    call, error, text = BAD[case]
    with pytest.raises(error, match=text):
        await call(api)
    assert await api.jobs() == []
