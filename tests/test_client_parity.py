"""`JobScheduler`, `LocalClient`, `Client` and `BlockingClient` take the same
`submit`/`submit_many` calls, options on `Job` objects included, and give the
same observable jobs and the same errors: a `JobScheduler` and a `LocalClient`
in memory, a `Client` and a `BlockingClient` on a shared SQLite file, a
`Client` on PostgreSQL, each with its queue paused so nothing runs."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Protocol

import pytest

from jobsched import (
    BlockingClient,
    Client,
    Job,
    JobInfo,
    JobScheduler,
    LocalClient,
    OperatorAPI,
    SchedulerError,
    Submission,
    UnknownJobError,
    UnknownScheduleError,
    build_job,
)
from task_examples import add, send_email


class Api(Protocol):
    """What the scenarios call: `OperatorAPI`'s submitting and reading part,
    which a `JobScheduler` and a `BlockingClient` are made to offer alike."""

    async def submit(self, job: Any, **options: Any) -> str: ...
    async def submit_many(self, jobs: Any) -> list[str]: ...
    async def get(self, job_id: str) -> JobInfo: ...
    async def jobs(self) -> list[JobInfo]: ...


#: Every API that submits: the same calls, the same jobs, the same errors.
APIS = ("scheduler", "local", "client", "blocking", "postgres")


@pytest.fixture(params=APIS)
async def api(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Api]:
    """Each API on its store: `JobScheduler` and `LocalClient` in memory,
    `Client` and `BlockingClient` on a shared SQLite file, `Client` on
    PostgreSQL."""
    async with _opened(request.param, _url(request.param, request, tmp_path)) as opened:
        yield opened


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
            # Every store lists dependencies by id, and each API makes its own
            # ids: "job-9..." sorts after "job-10...". Compared as positions.
            "depends_on": sorted(position.get(d, d) for d in info.depends_on),
            "trigger_rule": info.trigger_rule,
            "delayed": info.run_at > info.submitted_at,
            "options": {k: v for k, v in info.options.items() if k != "deadline"},
            # A deadline is monotonic seconds of the process that submitted it.
            "has_deadline": "deadline" in info.options,
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


async def _job_options(api: Api) -> list[str]:
    """Every option of submit on Job objects, one call each."""
    first = await api.submit(
        email("a@example.com"), priority="low", timeout=False, retry="none", name="first"
    )
    return [
        first,
        await api.submit(email("b@example.com"), priority=3, timeout=None, key="ext-b"),
        await api.submit(email("c@example.com"), timeout=30, retry="exponential"),
        await api.submit(
            email("d@example.com"),
            retry={"policy": "fixed", "seconds": 2, "max_retries": 4},
            unique_key="d-once",
        ),
        await api.submit(email("e@example.com", deadline=50.0), priority="critical", delay=60),
        await api.submit(
            email("f@example.com"),
            depends_on=[first],
            trigger_rule="all_done",
            result_ttl=30,
            keep_result=False,
        ),
        await api.submit(email("g@example.com"), key="ext-b", priority="high"),  # b's id
        await api.submit(email("h@example.com"), unique_key="d-once", timeout=5),  # d's id
    ]


async def _job_options_in_a_batch(api: Api) -> list[str]:
    """The same options as `Submission`s of one `submit_many`."""
    first = email("a@example.com")
    return list(
        await api.submit_many(
            [
                Submission(first, priority="low", timeout=False, retry="none", name="first"),
                Submission(email("b@example.com"), priority=3, timeout=None, key="ext-b"),
                Submission(
                    email("c@example.com", deadline=50.0),
                    retry={"policy": "fixed", "seconds": 2, "max_retries": 4},
                    unique_key="c-once",
                    delay=60,
                ),
                Submission(
                    email("d@example.com"),
                    depends_on=[first],
                    trigger_rule="one_failed",
                    result_ttl=30,
                    keep_result=True,
                ),
            ]
        )
    )


async def _task_jobs(api: Api) -> list[str]:
    """A task's jobs take the same options, over the task's own."""
    upstream = await api.submit(
        add.job(1, 2), priority="low", timeout=False, retry="none", name="sum", key="sum-1"
    )
    return [
        upstream,
        await api.submit(
            send_email.job("a@example.com"),
            depends_on=[upstream],
            trigger_rule="none_failed",
            retry={"policy": "fixed", "seconds": 1, "max_retries": 2},
            result_ttl=60,
            unique_key="mail-a",
        ),
        *await api.submit_many([Submission(add.job(3), timeout=9, keep_result=False, delay=30)]),
    ]


SCENARIOS: dict[str, Callable[[Api], Any]] = {
    "batch": _batch,
    "singles": _singles,
    "job options": _job_options,
    "job options in a batch": _job_options_in_a_batch,
    "task jobs": _task_jobs,
}


async def _run(api: Api, scenario: str) -> list[dict[str, Any]]:
    ids = await SCENARIOS[scenario](api)
    infos = [await api.get(job_id) for job_id in ids]
    return observed(infos, ids)


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
async def test_every_api_shows_the_same_jobs(
    scenario: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    seen: dict[str, list[dict[str, Any]]] = {}
    for kind in ("client", "scheduler", "local", "blocking"):
        async with _opened(kind, _url(kind, request, tmp_path)) as api:
            seen[kind] = await _run(api, scenario)
    shared = seen.pop("client")
    for kind, here in seen.items():
        assert here == shared, kind
    # The scenarios set every option, and dedup returned the first job's id.
    assert any(job["unique_key"] for job in shared)
    assert any(job["trigger_rule"] != "all_success" for job in shared)
    if scenario.startswith("job options"):
        first = shared[0]
        assert (first["name"], first["priority"].name, first["options"]["timeout"]) == (
            "first",
            "LOW",
            None,
        )
        assert any(job["has_deadline"] for job in shared)


async def test_client_on_postgres_shows_the_same_jobs(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    for scenario in sorted(SCENARIOS):
        seen = []
        for kind in ("postgres", "scheduler"):
            async with _opened(kind, _url(kind, request, tmp_path)) as api:
                seen.append(await _run(api, scenario))
        assert seen[0] == seen[1], scenario


async def test_options_leave_the_callers_job_as_it_was(api: Api) -> None:
    job = email("a@example.com", timeout=7)
    before = (job.name, job.priority, job.timeout, job.retry, job.result_ttl, job.keep_result)
    job_id = await api.submit(
        job,
        priority="critical",
        timeout=False,
        retry="none",
        name="other",
        result_ttl=9,
        keep_result=False,
    )
    info = await api.get(job_id)
    assert (info.name, info.priority.name, info.options["timeout"]) == ("other", "CRITICAL", None)
    assert (info.options["result_ttl"], info.options["keep_result"]) == (9, False)
    after = (job.name, job.priority, job.timeout, job.retry, job.result_ttl, job.keep_result)
    assert after == before
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


# ── every API: JobScheduler, LocalClient, Client, BlockingClient ──────────
class _OnScheduler:
    """`JobScheduler`'s own submit calls; the jobs read back as `JobInfo`s."""

    def __init__(self, scheduler: JobScheduler) -> None:
        self.scheduler = scheduler
        self.reader = LocalClient(scheduler)

    async def submit(self, job: Any, *args: Any, **options: Any) -> str:
        return self.scheduler.submit(job, *args, **options)

    async def submit_many(self, jobs: Any) -> list[str]:
        return self.scheduler.submit_many(jobs)

    async def get(self, job_id: str) -> JobInfo:
        return await self.reader.get(job_id)

    async def jobs(self) -> list[JobInfo]:
        return await self.reader.jobs()


class _OnBlocking:
    """`BlockingClient`'s plain calls, awaited like the others'."""

    def __init__(self, client: BlockingClient) -> None:
        self.client = client

    async def submit(self, job: Any, **options: Any) -> str:
        return self.client.submit(job, **options)

    async def submit_many(self, jobs: Any) -> list[str]:
        return self.client.submit_many(jobs)

    async def get(self, job_id: str) -> JobInfo:
        return self.client.get(job_id)

    async def jobs(self) -> list[JobInfo]:
        return self.client.jobs()


@contextlib.asynccontextmanager
async def _opened(kind: str, url: str) -> AsyncIterator[Api]:
    """One API with its queue paused, so nothing runs."""
    if kind in ("client", "postgres"):
        async with Client(url) as client:
            await client.pause_queue()
            yield client
    elif kind == "blocking":
        with BlockingClient(url) as blocking:
            blocking.pause_queue()
            yield _OnBlocking(blocking)
    else:
        async with JobScheduler() as scheduler, LocalClient(scheduler) as local:
            await local.pause_queue()
            yield local if kind == "local" else _OnScheduler(scheduler)


def _url(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if kind == "postgres":
        return str(request.getfixturevalue("pg_schema")[0])
    return f"sqlite:///{tmp_path / f'{kind}.db'}"


BAD_JOB_OPTIONS: dict[str, tuple[dict[str, Any], type[Exception], str]] = {
    "priority": ({"priority": "urgent"}, ValueError, "priority must be one of"),
    "timeout": ({"timeout": 0}, ValueError, "timeout must be a positive number"),
    "timeout True": ({"timeout": True}, ValueError, "timeout"),
    "retry by an unknown name": ({"retry": "sometimes"}, ValueError, "sometimes"),
    "max_retries": (
        {"retry": {"policy": "fixed", "seconds": 1, "max_retries": -1}},
        ValueError,
        "max_retries",
    ),
    "name": ({"name": ""}, ValueError, "name must be a non-empty string"),
    "result_ttl": ({"result_ttl": -1}, ValueError, "result_ttl"),
    "keep_result": ({"keep_result": "yes"}, ValueError, "keep_result"),
    "unique_key": ({"unique_key": ""}, ValueError, "unique_key must be a non-empty string"),
}


@pytest.mark.parametrize("case", sorted(BAD_JOB_OPTIONS))
async def test_bad_options_on_a_job_fail_alike_on_every_api(api: Api, case: str) -> None:
    options, error, text = BAD_JOB_OPTIONS[case]
    with pytest.raises(error, match=text):
        await api.submit(email("a@example.com"), **options)
    with pytest.raises(error, match=text):
        await api.submit_many(
            [email("b@example.com"), Submission(email("c@example.com"), **options)]
        )
    assert await api.jobs() == []


# ── functions: the in-process APIs run them, the shared ones refuse them ──
def resize(image: str, width: int = 100) -> str:
    return f"{image}@{width}"


def resize_cat() -> str:
    return resize("cat.png")


FUNCTION_OPTIONS: dict[str, Any] = {
    "priority": "high",
    "timeout": 5,
    "retry": {"policy": "fixed", "seconds": 1, "max_retries": 2},
    "name": "resize-cat",
    "key": "resize-1",
    "result_ttl": 30,
}


def _in_process(api: Api) -> bool:
    return isinstance(api, LocalClient | _OnScheduler)


async def test_options_on_a_function_mean_the_same_on_every_api(api: Api) -> None:
    if not _in_process(api):
        # No other process could run it: refused with the reason, nothing stored.
        with pytest.raises(SchedulerError, match="a plain function cannot be stored"):
            await api.submit(resize, **FUNCTION_OPTIONS)
        with pytest.raises(SchedulerError, match="a plain function cannot be stored"):
            await api.submit_many([Submission(resize_cat, priority="high")])
        assert await api.jobs() == []
        return
    job_id = await api.submit(resize, "cat.png", **FUNCTION_OPTIONS)
    again = await api.submit(resize, "dog.png", key="resize-1")  # known key: that job's id
    (batched,) = await api.submit_many([Submission(resize_cat, timeout=False, name="later")])
    info, later = await api.get(job_id), await api.get(batched)
    assert again == job_id
    assert (info.name, info.priority.name, info.key) == ("resize-cat", "HIGH", "resize-1")
    assert (info.options["timeout"], info.result_expires) == (5, None)
    assert (later.name, later.options["timeout"]) == ("later", None)


@pytest.mark.parametrize("case", sorted(BAD_JOB_OPTIONS))
async def test_bad_options_on_a_function_fail_alike_on_every_api(api: Api, case: str) -> None:
    options, error, text = BAD_JOB_OPTIONS[case]
    if not _in_process(api):
        error, text = SchedulerError, "a plain function cannot be stored"
    with pytest.raises(error, match=text):
        await api.submit(resize_cat, **options)
    with pytest.raises(error, match=text):
        await api.submit_many([email("b@example.com"), Submission(resize_cat, **options)])
    assert await api.jobs() == []


# ── one contract: OperatorAPI ─────────────────────────────────────────────
#: The members of the protocol (its coroutines), by name.
OPERATOR_METHODS = sorted(
    name
    for name, value in vars(OperatorAPI).items()
    if inspect.iscoroutinefunction(value) and not name.startswith("__")
)


def _parameters(function: Any) -> dict[str, tuple[Any, Any]]:
    return {
        p.name: (p.kind, p.default)
        for p in inspect.signature(function).parameters.values()
        if p.kind is not p.VAR_POSITIONAL and p.kind is not p.VAR_KEYWORD
    }


@pytest.mark.parametrize("implementation", [Client, LocalClient])
def test_both_clients_implement_the_operator_api(implementation: type[OperatorAPI]) -> None:
    assert {"submit", "get", "page", "retry", "wait_for_change"} <= set(OPERATOR_METHODS)
    for name in OPERATOR_METHODS:
        method = getattr(implementation, name)
        assert inspect.iscoroutinefunction(method), name
        wanted = _parameters(getattr(OperatorAPI, name))
        # The protocol's parameters, of the same kind, with its defaults; an
        # implementation may add its own (Client.jobs's schedule).
        here = _parameters(method)
        assert {p: here.get(p) for p in wanted} == wanted, name
        positional = [p for p, (kind, _) in wanted.items() if kind is not kind.KEYWORD_ONLY]
        assert [p for p in here if p in positional] == positional, name


def test_the_blocking_client_has_every_operator_call_as_a_plain_call(tmp_path: Path) -> None:
    client = BlockingClient(f"sqlite:///{tmp_path / 'jobs.db'}")
    for name in OPERATOR_METHODS:
        if name in ("open", "close"):  # its own: plain calls of a client with a thread
            continue
        call = getattr(client, name)
        assert not inspect.iscoroutinefunction(call), name
        wanted = _parameters(getattr(OperatorAPI, name))
        wanted.pop("self")
        here = _parameters(call)
        assert {p: here.get(p) for p in wanted} == wanted, name
        assert call.__doc__ == getattr(Client, name).__doc__, name


async def test_every_client_is_an_operator_api(tmp_path: Path) -> None:
    async with JobScheduler() as scheduler, LocalClient(scheduler) as local:
        assert isinstance(local, OperatorAPI)
    async with Client(f"sqlite:///{tmp_path / 'jobs.db'}") as client:
        assert isinstance(client, OperatorAPI)
    assert not isinstance(scheduler, OperatorAPI)


#: Bad arguments of the operator calls: the same error from every client.
BAD_QUERIES: dict[str, tuple[Callable[[Any], Any], type[Exception], str]] = {
    "wait_for_change timeout": (
        lambda c: c.wait_for_change(-1),
        ValueError,
        "timeout must be a finite number of seconds >= 0",
    ),
    "wait_for_change timeout True": (
        lambda c: c.wait_for_change(True),
        TypeError,
        "timeout must be a number of seconds",
    ),
    "page limit": (lambda c: c.page(limit=0), ValueError, "limit must be between 1 and 1000"),
    "page status": (lambda c: c.page(status="lost"), ValueError, "unknown status 'lost'"),
    "jobs limit": (lambda c: c.jobs(limit="3"), TypeError, "limit must be an integer"),
    "jobs ids a string": (
        lambda c: c.jobs(ids="job-1"),
        TypeError,
        "ids takes a collection of job ids, got the string 'job-1'",
    ),
    "dependents_of a string": (
        lambda c: c.dependents_of("job-1"),
        TypeError,
        "dependents_of takes a collection of job ids",
    ),
    "schedule_runs limit": (
        lambda c: c.schedule_runs("sched-1", 0),
        ValueError,
        "limit must be between 1 and 100, got 0",
    ),
    "add_schedule both rules": (
        lambda c: c.add_schedule(email("a@example.com"), every=60, trigger={"cron": "* * * * *"}),
        TypeError,
        "a schedule takes an interval",
    ),
    "update_schedule unknown": (
        lambda c: c.update_schedule("sched-nope", every=60),
        UnknownScheduleError,
        "sched-nope",
    ),
    "requeue status": (
        lambda c: c.requeue(status="running"),
        ValueError,
        "requeue takes failed, timed_out or cancelled jobs",
    ),
    "purge older_than": (
        lambda c: c.purge(older_than=-1),
        ValueError,
        "older_than must be a finite number of seconds >= 0",
    ),
    "purge status": (
        lambda c: c.purge(older_than=0, status="pending"),
        ValueError,
        "purge deletes finished jobs only",
    ),
    "unknown job": (lambda c: c.retry("job-nope"), UnknownJobError, "job-nope"),
    "worker id": (
        lambda c: c.drain_worker(7),
        TypeError,
        "a worker id is a non-empty string, got 7",
    ),
    "empty worker id": (
        lambda c: c.stop_worker(""),
        TypeError,
        "a worker id is a non-empty string, got ''",
    ),
    "retry_many of one string": (
        lambda c: c.retry_many("job-1"),
        TypeError,
        "retry_many takes a collection of job ids, got the string 'job-1'",
    ),
    "cancel_many id": (
        lambda c: c.cancel_many(["job-1", 7]),
        TypeError,
        "a job id is a string, got integer 7",
    ),
    "purge_many id": (lambda c: c.purge_many(["job\x00"]), ValueError, "NUL"),
    "history window": (
        lambda c: c.history(window="30d"),
        ValueError,
        "window must be one of 1h, 24h, 7d, got '30d'",
    ),
    "history type": (lambda c: c.history(type=3), TypeError, "type must be a string, got 3"),
    "history queue": (
        lambda c: c.history(queue=" q"),
        ValueError,
        "queue must be a non-empty name without surrounding spaces",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_QUERIES))
@pytest.mark.parametrize("kind", ["client", "local"])
async def test_bad_operator_arguments_fail_alike_on_both_clients(
    kind: str, case: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    call, error, text = BAD_QUERIES[case]
    async with _opened(kind, _url(kind, request, tmp_path)) as client:
        with pytest.raises(error, match=text):
            await call(client)
