"""jobsched.integrations.starlette: the lifespan on plain Starlette apps, and
the FastAPI example app (examples/fastapi_app) on a shared store served by a
``jobsched worker --import fastapi_app.tasks`` process (SQLite, PostgreSQL)
and on its own in-process scheduler."""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from asgi_support import served
from jobsched import (
    Client,
    FIFOStrategy,
    JobScheduler,
    JobStatus,
    LocalClient,
    SchedulerError,
    SchedulerStoppedError,
)
from jobsched.integrations.starlette import STATE_KEY, client, lifespan
from obs_support import worker_process
from task_examples import send_email

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def app_with(jobs_lifespan: Any, seen: list[Any] | None = None) -> Starlette:
    """A Starlette app whose routes use the client: POST /emails submits, GET /jobs/ID
    waits for the result, GET / names the client (each client seen goes to `seen`)."""

    async def describe(request: Request) -> JSONResponse:
        jobs = client(request)
        if seen is not None:
            seen.append(jobs)
        return JSONResponse(
            {"client": type(jobs).__name__, "in_state": request.state.jobsched is jobs}
        )

    async def submit(request: Request) -> JSONResponse:
        body = await request.json()
        job_id = await client(request).submit(send_email.job(body["to"]))
        return JSONResponse({"job_id": job_id})

    async def result(request: Request) -> JSONResponse:
        jobs = client(request)
        return JSONResponse(await jobs.result(request.path_params["job_id"], timeout=60))

    routes = [
        Route("/", describe),
        Route("/emails", submit, methods=["POST"]),
        Route("/jobs/{job_id}", result),
    ]
    return Starlette(routes=routes, lifespan=jobs_lifespan)


def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'jobs.db'}"


# ── a Client on a shared store ─────────────────────────────────────────
async def test_a_store_lifespan_opens_a_client_for_the_apps_lifetime(tmp_path: Path) -> None:
    seen: list[Any] = []
    async with served(app_with(lifespan(sqlite_url(tmp_path)), seen)) as (http, state):
        assert (await http.get("/")).json() == {"client": "Client", "in_state": True}
        job_id = (await http.post("/emails", json={"to": "a@b.c"})).json()["job_id"]
        assert seen == [state[STATE_KEY]]
    # No worker ran it: it waits in the store, and the app's client is closed.
    async with Client(sqlite_url(tmp_path)) as other:
        assert (await other.get(job_id)).status is JobStatus.PENDING
    with pytest.raises(SchedulerError, match="is closed"):
        await seen[0].get(job_id)


async def test_client_options_reach_the_client(tmp_path: Path) -> None:
    jobs_lifespan = lifespan(sqlite_url(tmp_path), strategy="fifo")
    async with served(app_with(jobs_lifespan)) as (_, state):
        assert isinstance(state[STATE_KEY].strategy, FIFOStrategy)


async def test_a_store_that_is_not_shared_fails_the_startup() -> None:
    with pytest.raises(SchedulerError, match="'memory://' is not a shared store"):
        async with served(app_with(lifespan("memory://"))):
            pass


# ── a scheduler in the app's process ───────────────────────────────────
async def test_a_scheduler_lifespan_runs_it_and_hands_out_a_local_client() -> None:
    seen: list[Any] = []
    async with served(app_with(lifespan(scheduler=JobScheduler), seen)) as (http, _):
        assert (await http.get("/")).json() == {"client": "LocalClient", "in_state": True}
        job_id = (await http.post("/emails", json={"to": "a@b.c"})).json()["job_id"]
        assert (await http.get(f"/jobs/{job_id}")).json() == "sent 'hello' to a@b.c"
    (jobs,) = seen
    assert isinstance(jobs, LocalClient)
    with pytest.raises(SchedulerStoppedError):
        jobs.scheduler.submit(send_email.job("c@d.e"))


async def test_a_function_makes_a_fresh_scheduler_each_time_the_app_starts() -> None:
    seen: list[Any] = []
    app = app_with(lifespan(scheduler=functools.partial(JobScheduler, num_workers=2)), seen)
    for _ in range(2):
        async with served(app) as (http, _):
            await http.get("/")
    first, second = (jobs.scheduler for jobs in seen)
    assert first is not second and second.num_workers == 2


async def test_a_scheduler_instance_runs_once() -> None:
    app = app_with(lifespan(scheduler=JobScheduler()))
    async with served(app) as (http, _):
        assert (await http.get("/")).status_code == 200
    with pytest.raises(SchedulerStoppedError, match="cannot be started again"):
        async with served(app):
            pass


async def test_a_function_that_makes_no_scheduler_fails_the_startup() -> None:
    with pytest.raises(TypeError, match=r"scheduler= made 42, not a JobScheduler"):
        async with served(app_with(lifespan(scheduler=lambda: 42))):
            pass


async def test_a_worker_scheduler_beside_a_client_on_the_same_store(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    worker = functools.partial(JobScheduler, store=url, shared=True)
    async with served(app_with(lifespan(url, scheduler=worker))) as (http, state):
        assert isinstance(state[STATE_KEY], Client)
        job_id = (await http.post("/emails", json={"to": "a@b.c"})).json()["job_id"]
        assert (await http.get(f"/jobs/{job_id}")).json() == "sent 'hello' to a@b.c"


# ── the app's own lifespan ─────────────────────────────────────────────
async def test_the_apps_own_lifespan_runs_inside_and_its_state_is_merged() -> None:
    scheduler = JobScheduler()
    events: list[str] = []

    @contextlib.asynccontextmanager
    async def own(app: Starlette) -> AsyncIterator[dict[str, Any]]:
        # The scheduler runs already: a job submitted now is run.
        warm_up = scheduler.submit(send_email.job("warm@up"))
        events.append("app started")
        yield {"warm_up": warm_up}
        scheduler.submit(send_email.job("still@running"))  # not stopped yet
        events.append("app stopped")

    async def warm_up(request: Request) -> JSONResponse:
        job_id = request.state.warm_up
        return JSONResponse(await client(request).result(job_id, timeout=60))

    app = Starlette(
        routes=[Route("/warm-up", warm_up)], lifespan=lifespan(scheduler=scheduler, inner=own)
    )
    async with served(app) as (http, state):
        assert sorted(state) == [STATE_KEY, "warm_up"]
        assert (await http.get("/warm-up")).json() == "sent 'hello' to warm@up"
    assert events == ["app started", "app stopped"]
    with pytest.raises(SchedulerStoppedError):
        scheduler.submit(send_email.job("too@late"))


async def test_the_apps_lifespan_can_enter_jobscheds_and_use_its_client(tmp_path: Path) -> None:
    jobs_lifespan = lifespan(sqlite_url(tmp_path))
    submitted: list[str] = []

    @contextlib.asynccontextmanager
    async def app_lifespan(app: Starlette) -> AsyncIterator[dict[str, Any]]:
        async with jobs_lifespan(app) as state:
            submitted.append(await state[STATE_KEY].submit(send_email.job("boot@x")))
            yield state

    async with served(app_with(app_lifespan)) as (http, _):
        assert (await http.get("/")).json() == {"client": "Client", "in_state": True}
    async with Client(sqlite_url(tmp_path)) as other:
        assert (await other.get(submitted[0])).status is JobStatus.PENDING


@contextlib.asynccontextmanager
async def state_with_jobsched(app: Starlette) -> AsyncIterator[dict[str, Any]]:
    yield {"jobsched": "mine"}


@contextlib.asynccontextmanager
async def failing_startup(app: Starlette) -> AsyncIterator[None]:
    raise ConnectionError("the database is down")
    yield


@pytest.mark.parametrize(
    ("own", "error", "message"),
    [
        (state_with_jobsched, ValueError, "the app's lifespan state has a 'jobsched' key already"),
        (failing_startup, ConnectionError, "the database is down"),
    ],
)
async def test_when_the_apps_lifespan_fails_jobsched_is_closed(
    tmp_path: Path, own: Any, error: type[Exception], message: str
) -> None:
    scheduler = JobScheduler()
    seen: list[Any] = []

    def remember() -> JobScheduler:
        seen.append(scheduler)
        return scheduler

    app = app_with(lifespan(scheduler=remember, inner=own))
    with pytest.raises(error, match=message):
        async with served(app):
            pass
    assert seen == [scheduler]
    with pytest.raises(SchedulerStoppedError):
        scheduler.submit(send_email.job("too@late"))


# ── mistakes ───────────────────────────────────────────────────────────
@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: lifespan(), r"lifespan\(\) needs store= \(a shared store's URL, for a Client\)"),
        (
            lambda: lifespan(scheduler=JobScheduler, strategy="fifo"),
            r"lifespan\(\) got Client options \(strategy\) without store=",
        ),
        (
            lambda: lifespan("sqlite:///jobs.db", stratgy="fifo"),
            "lifespan\\(\\) got an unexpected keyword argument 'stratgy'",
        ),
        (
            lambda: lifespan(scheduler=42),
            "scheduler must be a JobScheduler or a function making one, got 42",
        ),
        (
            lambda: lifespan("sqlite:///jobs.db", inner="mine"),
            "inner must be a lifespan \\(a function of the app\\), got 'mine'",
        ),
    ],
)
def test_bad_arguments_are_refused_when_the_lifespan_is_made(call: Any, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        call()


async def test_client_without_the_lifespan_names_the_fix() -> None:
    async def handler(request: Request) -> JSONResponse:
        client(request)
        raise AssertionError("client() returned without a lifespan")

    app = Starlette(routes=[Route("/signups", handler)])
    async with served(app) as (http, _):
        with pytest.raises(SchedulerError) as caught:
            await http.get("/signups")
    assert str(caught.value) == (
        "no jobsched client in the state of '/signups': give the app "
        "lifespan=jobsched.integrations.starlette.lifespan(...)"
    )


def python(code: str) -> str:
    """What `code` prints, run by a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    return done.stdout


def test_starlette_is_needed_and_fastapi_is_not() -> None:
    without = "import sys; sys.modules[{!r}] = None\n"
    attempt = (
        "try:\n"
        "    from jobsched.integrations.starlette import lifespan\n"
        "    print('imported')\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    assert python(without.format("fastapi") + attempt) == "imported\n"
    assert python(without.format("starlette") + attempt) == (
        "jobsched.integrations.starlette needs Starlette (FastAPI includes it): "
        "pip install starlette\n"
    )


def test_importing_jobsched_imports_no_web_framework() -> None:
    code = (
        "import sys, jobsched, jobsched.integrations\n"
        "print([m for m in sys.modules if m.split('.')[0] in ('starlette', 'fastapi')])"
    )
    assert python(code) == "[]\n"


# ── the FastAPI example app ────────────────────────────────────────────
@pytest.fixture
def example(monkeypatch: pytest.MonkeyPatch) -> Any:
    """examples/fastapi_app.app, imported as its workers import its tasks."""
    monkeypatch.syspath_prepend(str(EXAMPLES))
    return importlib.import_module("fastapi_app.app")


@pytest.fixture(params=["in-process", "sqlite", "postgresql"])
def example_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str | None]:
    """None (the app runs its own scheduler), or a shared store with a
    ``jobsched worker --import fastapi_app.tasks`` process serving it."""
    if request.param == "in-process":
        yield None
        return
    if request.param == "sqlite":
        url = sqlite_url(tmp_path)
    else:
        url = str(request.getfixturevalue("pg_schema")[0])
    path = os.pathsep.join(p for p in (str(EXAMPLES), os.environ.get("PYTHONPATH")) if p)
    with worker_process(url, "--import", "fastapi_app.tasks", env={"PYTHONPATH": path}):
        yield url


@pytest.mark.slow
async def test_the_example_app_enqueues_and_returns_the_result(
    example: Any, example_store: str | None
) -> None:
    async with served(example.create_app(example_store)) as (http, state):
        jobs = state[STATE_KEY]
        assert isinstance(jobs, LocalClient if example_store is None else Client)
        # While the queue is paused the job waits: the GET says so at once.
        await jobs.pause_queue()
        signup = await http.post("/signups", json={"email": "ann@example.com", "name": "Ann"})
        assert signup.status_code == 202
        job_id = signup.json()["job_id"]
        pending = await http.get(f"/jobs/{job_id}")
        assert (pending.status_code, pending.json()) == (202, {"status": "pending"})
        await jobs.resume_queue()
        done = await http.get(f"/jobs/{job_id}", params={"wait": 60})
        assert (done.status_code, done.json()) == (
            200,
            {"status": "completed", "result": "welcomed Ann at ann@example.com"},
        )
        # A failed job: its error, not a result.
        bad = (await http.post("/signups", json={"email": "nobody"})).json()["job_id"]
        failed = await http.get(f"/jobs/{bad}", params={"wait": 60})
        assert failed.json() == {
            "status": "failed",
            "error": "ValueError: not an address: 'nobody' "
            "(not retried: ValueError is in no_retry_on)",
        }
        assert (await http.get("/jobs/no-such-job")).status_code == 404
        assert (await http.get(f"/jobs/{job_id}", params={"wait": -1})).status_code == 422
        assert (await http.post("/signups", json={"name": "Ann"})).status_code == 422
