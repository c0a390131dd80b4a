"""The web app's JSON API (`jobsched.web.create_app`) over every kind of store.

Each test runs against an in-process scheduler on the memory store
(``create_app(scheduler=...)``), a SQLite file in shared mode and a
PostgreSQL schema (``create_app(store_url)``, with a worker scheduler in the
test's loop running the jobs), through httpx's ASGI transport: no server, no
network. The event stream is read by driving the ASGI app directly (httpx's
transport buffers whole answers). ``jobsched web`` itself is tested as the
console script it is.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.applications import Starlette
from starlette.routing import Mount

from jobsched import (
    BlockingClient,
    Client,
    JobStatus,
    PluginManager,
    Submission,
)
from jobsched.web import _workflow, create_app, template_environment
from web_support import (
    BEARER,
    STORES,
    TOKEN,
    Echo,
    Env,
    EventStream,
    Gate,
    WebJobs,
    get_json,
    make_env,
    post_json,
    serving,
)

pytestmark = pytest.mark.timeout(120)

XSS = "<script>alert(1)</script>"
READ_ONLY = "no token configured: start jobsched web with --token"


@pytest.fixture(params=STORES)
async def env(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Env]:
    async with make_env(request.param, request, tmp_path, TOKEN) as made:
        yield made


@pytest.fixture(params=STORES)
async def read_only_env(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Env]:
    async with make_env(request.param, request, tmp_path, None) as made:
        yield made


# ── reading ────────────────────────────────────────────────────────────
async def test_healthz_and_stats(env: Env) -> None:
    assert await get_json(env, "/healthz") == {"status": "ok", "read_only": False}
    done = await env.wait(await env.submit(Echo("hi")))
    assert done.status is JobStatus.COMPLETED
    stats = await get_json(env, "/api/stats")
    assert stats["counts"]["completed"] == 1
    assert stats["queue_paused"] is False
    assert len(stats["throughput"]) == 60
    assert sum(bucket["completed"] for bucket in stats["throughput"]) == 1


async def test_jobs_are_listed_newest_first_filtered_and_paged(env: Env, tmp_path: Path) -> None:
    echoes = [await env.submit(Echo(f"echo {i}")) for i in range(5)]
    gate = await env.submit(Gate(str(tmp_path / "never")))
    for job_id in [*echoes, gate]:
        await env.wait(job_id)

    listed = await get_json(env, "/api/jobs")
    assert [j["job_id"] for j in listed["jobs"]] == [gate, *reversed(echoes)]
    assert listed["total"] == 6 and listed["limit"] == 50 and listed["offset"] == 0
    assert "result" not in listed["jobs"][0]  # the detail has it

    page = await get_json(env, "/api/jobs", limit=2, offset=1)
    assert [j["job_id"] for j in page["jobs"]] == [echoes[4], echoes[3]]
    assert page["total"] == 6

    failed = await get_json(env, "/api/jobs", status="failed")
    assert [j["job_id"] for j in failed["jobs"]] == [gate]
    assert failed["jobs"][0]["status"] == "failed"
    both = await get_json(env, "/api/jobs", status="failed,completed")
    assert both["total"] == 6
    assert (await get_json(env, "/api/jobs", type="echo"))["total"] == 5
    assert [j["job_id"] for j in (await get_json(env, "/api/jobs", q="ECHO 3"))["jobs"]] == [
        echoes[3]
    ]


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"status": "lost"}, "unknown status 'lost'"),
        ({"limit": "many"}, "limit must be an integer, got 'many'"),
        ({"limit": "0"}, "limit must be 1 to 500, got 0"),
        ({"limit": "501"}, "limit must be 1 to 500, got 501"),
        ({"offset": "-1"}, "offset must be"),
    ],
)
async def test_a_bad_query_is_400_naming_it(env: Env, params: dict[str, str], message: str) -> None:
    answer = await get_json(env, "/api/jobs", 400, **params)
    assert answer["error"].startswith(message)


async def test_a_job_in_detail_with_its_dependency_neighbourhood(env: Env) -> None:
    first = await env.submit(Echo("first"))
    middle = await env.submit(Echo("middle"), depends_on=[first])
    last = await env.submit(Echo("last"), depends_on=[middle])
    await env.wait(last)

    detail = await get_json(env, f"/api/jobs/{middle}")
    assert detail["job_id"] == middle and detail["type"] == "echo"
    assert detail["status"] == "completed" and detail["result"] == "middle"
    assert detail["args"] == {"text": "middle"}
    assert detail["depends_on"] == [first]
    assert detail["upstream"] == [
        {"job_id": first, "type": "echo", "name": "echo", "status": "completed"}
    ]
    assert detail["downstream"] == [
        {"job_id": last, "type": "echo", "name": "echo", "status": "completed"}
    ]
    assert detail["attempts"] == 1 and detail["lease_owner"] is None


async def test_a_dependent_behind_more_than_500_newer_jobs_is_still_downstream(
    env: Env,
) -> None:
    first = await env.submit(Echo("first"))
    later = await env.submit(Echo("later"), depends_on=[first])
    await env.wait(later)
    fillers = [Echo(f"filler {i}") for i in range(600)]
    if env.scheduler is None:  # they need not run: one batch, due in an hour
        await env.client.submit_many([Submission(job, delay=3600) for job in fillers])
    else:
        await env.client.submit_many(fillers)
    assert (await get_json(env, "/api/jobs", limit=1))["total"] == 602

    detail = await get_json(env, f"/api/jobs/{first}")
    assert detail["downstream"] == [
        {"job_id": later, "type": "echo", "name": "echo", "status": "completed"}
    ]
    page = await env.http.get(f"/jobs/{first}")
    assert page.status_code == 200
    assert f'href="/jobs/{later}"' in page.text
    assert await env.client.dependents(first) == [later]


async def test_the_job_page_draws_the_workflow_up_to_its_cap_and_counts_the_rest(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_workflow, "MAX_WORKFLOW", 6)
    first = await env.submit(Echo("first"))
    below = [await env.submit(Echo(f"below {i}"), depends_on=[first]) for i in range(11)]
    detail = await get_json(env, f"/api/jobs/{first}")
    assert [d["job_id"] for d in detail["downstream"]] == below
    text = (await env.http.get(f"/jobs/{first}")).text
    drawn = below[:5]  # the cap counts the job itself; the walk reads in submit order
    assert all(f'href="/jobs/{job_id}"' in text for job_id in drawn)
    assert not any(f'href="/jobs/{job_id}"' in text for job_id in below[5:])
    assert '<strong data-testid="workflow-more">6 more not shown</strong>' in text
    assert text.count('<path class="edge"') == 5


class Counting:
    """An operator client that counts the calls made through it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)

        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] = self.calls.get(name, 0) + 1
            return await method(*args, **kwargs)

        return counted


async def test_a_workflow_is_read_in_two_batched_reads_a_step(env: Env) -> None:
    # root -> 20 parts -> end (a chord): three steps from root, whatever its width.
    root = await env.submit(Echo("root"), delay=3600)
    parts = [await env.submit(Echo(f"part {i}"), depends_on=[root]) for i in range(20)]
    end = await env.submit(Echo("end"), depends_on=parts)
    assert await env.client.dependents_of([root, "job-nope", parts[3]]) == {
        root: parts,
        parts[3]: [end],
    }
    counting = Counting(env.client)
    found = await _workflow.read_workflow(counting, await env.client.get(parts[7]))
    assert set(found.jobs) == {root, end, *parts} and found.more == 0
    assert len(found.edges) == 40
    # From parts[7]: root and end, then the 19 other parts, then nothing new.
    assert counting.calls == {"dependents_of": 3, "jobs": 2}
    graph = _workflow.workflow_graph(found)
    columns = sorted({n.x for n in graph.nodes})
    assert len(columns) == 3 and len(graph.nodes) == 22


async def test_an_unknown_job_is_404(env: Env) -> None:
    answer = await get_json(env, "/api/jobs/nope", 404)
    assert "nope" in answer["error"]
    answer = await post_json(env, "/api/jobs/nope/retry", 404)
    assert "nope" in answer["error"]
    answer = await env.http.get("/api/no-such-route")
    assert answer.status_code == 404 and answer.json() == {"error": "Not Found"}


async def test_a_job_argument_is_data_in_json_and_text_in_html(env: Env) -> None:
    job_id = await env.submit(Echo(XSS))
    await env.wait(job_id)
    answer = await env.http.get(f"/api/jobs/{job_id}")
    assert answer.headers["content-type"] == "application/json"
    assert answer.json()["args"] == {"text": XSS}
    # The pages' environment escapes what it prints, and JSON embedded in a page.
    environment = template_environment()
    page = environment.from_string(
        '{% extends "base.html" %}{% block content %}<td>{{ args.text }}</td>'
        "<div data-job='{{ args|tojson }}'></div>{% endblock %}"
    ).render(args=answer.json()["args"], root="", csrf_token="", read_only=False, logged_in=False)
    assert XSS not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "\\u003cscript\\u003e" in page
    # The job page shows it as text.
    page_answer = await env.http.get(f"/jobs/{job_id}")
    assert page_answer.status_code == 200
    assert XSS not in page_answer.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page_answer.text
    assert callable(environment.autoescape)
    assert environment.autoescape("jobs.html") is True


# ── acting ─────────────────────────────────────────────────────────────
async def test_retry_runs_a_failed_job_again_and_keeps_its_history(
    env: Env, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    job_id = await env.submit(Gate(str(gate)))
    assert (await env.wait(job_id)).status is JobStatus.FAILED

    gate.touch()
    retried = await post_json(env, f"/api/jobs/{job_id}/retry")
    assert retried["job_id"] == job_id
    assert retried["status"] in ("pending", "running", "completed")
    done = await env.wait(job_id)
    assert done.status is JobStatus.COMPLETED

    detail = await get_json(env, f"/api/jobs/{job_id}")
    assert detail["result"] == "opened" and detail["attempts"] == 1
    # The failed attempt is kept (the in-process scheduler keeps no history of
    # attempts that completed: only the shared stores list the second one).
    assert detail["history"][0]["status"] == "failed"
    assert "gate closed" in detail["history"][0]["error"]

    # A completed job cannot be retried: 409 naming its status.
    refused = await post_json(env, f"/api/jobs/{job_id}/retry", 409)
    assert "completed" in refused["error"]


async def test_cancel_a_waiting_job_then_cancel_again_is_409(env: Env) -> None:
    job_id = await env.submit(Echo("later"), delay=3600)
    cancelled = await post_json(env, f"/api/jobs/{job_id}/cancel")
    assert cancelled["job_id"] == job_id and cancelled["status"] == "cancelled"
    again = await post_json(env, f"/api/jobs/{job_id}/cancel", 409)
    assert again == {"error": f"job {job_id!r} already finished (cancelled)"}


async def test_schedules_are_listed_paused_resumed_and_triggered(env: Env) -> None:
    schedule_id = await env.add_schedule("tick")
    (listed,) = (await get_json(env, "/api/schedules"))["schedules"]
    assert listed["schedule_id"] == schedule_id and listed["paused"] is False

    assert await post_json(env, f"/api/schedules/{schedule_id}/pause") == {
        "schedule_id": schedule_id,
        "paused": True,
        "changed": True,
    }
    again = await post_json(env, f"/api/schedules/{schedule_id}/pause")
    assert again["changed"] is False
    (listed,) = (await get_json(env, "/api/schedules"))["schedules"]
    assert listed["paused"] is True

    resumed = await post_json(env, f"/api/schedules/{schedule_id}/resume")
    assert resumed["changed"] is True and resumed["paused"] is False
    (listed,) = (await get_json(env, "/api/schedules"))["schedules"]
    assert listed["paused"] is False
    next_fire = listed["next_run"]

    triggered = await post_json(env, f"/api/schedules/{schedule_id}/trigger")
    fired = await env.wait(triggered["job_id"])
    assert fired.status is JobStatus.COMPLETED
    (listed,) = (await get_json(env, "/api/schedules"))["schedules"]
    assert listed["last_job_id"] == triggered["job_id"]
    # A trigger does not move the period (the in-process scheduler converts its
    # monotonic clock to wall time on each call: equal to the microsecond).
    assert listed["next_run"] == pytest.approx(next_fire, abs=1e-3)

    unknown = await post_json(env, "/api/schedules/nope/pause", 404)
    assert "nope" in unknown["error"]


async def test_the_queue_is_paused_and_resumed(env: Env) -> None:
    assert await post_json(env, "/api/queue/pause") == {"queue_paused": True, "changed": True}
    assert (await post_json(env, "/api/queue/pause"))["changed"] is False
    assert (await get_json(env, "/api/stats"))["queue_paused"] is True
    job_id = await env.submit(Echo("after the pause"))
    assert await post_json(env, "/api/queue/resume") == {"queue_paused": False, "changed": True}
    assert (await env.wait(job_id)).status is JobStatus.COMPLETED
    assert (await get_json(env, "/api/stats"))["queue_paused"] is False


async def test_a_queue_is_listed_paused_and_resumed_by_name(env: Env) -> None:
    listed = await get_json(env, "/api/queues")
    assert listed["all_paused"] is False
    assert [q["name"] for q in listed["queues"]] == ["default"]
    assert await post_json(env, "/api/queues/default/pause") == {
        "queue": "default",
        "paused": True,
        "changed": True,
    }
    assert (await post_json(env, "/api/queues/default/pause"))["changed"] is False
    assert (await get_json(env, "/api/stats"))["queue_paused"] is False  # not every queue
    job_id = await env.submit(Echo("held by its queue"))
    [default] = (await get_json(env, "/api/queues"))["queues"]
    assert default["paused"] is True and default["depth"] == 1 and default["running"] == 0
    assert default["oldest_age"] is not None and default["oldest_age"] >= 0
    page = await env.http.get("/queues")
    assert page.status_code == 200
    assert 'data-queue="default"' in page.text and "/api/queues/default/resume" in page.text
    assert (await env.client.get(job_id)).status is JobStatus.PENDING
    resumed = await post_json(env, "/api/queues/default/resume")
    assert resumed == {"queue": "default", "paused": False, "changed": True}
    assert (await env.wait(job_id)).status is JobStatus.COMPLETED
    bad = await post_json(env, "/api/queues/%20x/pause", 400)
    assert bad["error"].startswith("queue must be a non-empty name without surrounding spaces")


# ── who may act ────────────────────────────────────────────────────────
ACTIONS = [
    "/api/jobs/{job}/retry",
    "/api/jobs/{job}/cancel",
    "/api/schedules",
    "/api/schedules/{schedule}/edit",
    "/api/schedules/{schedule}/pause",
    "/api/schedules/{schedule}/resume",
    "/api/schedules/{schedule}/trigger",
    "/api/queue/pause",
    "/api/queue/resume",
    "/api/queues/{queue}/pause",
    "/api/queues/{queue}/resume",
    "/api/workers/{worker}/drain",
    "/api/workers/{worker}/stop",
]


async def _targets(env: Env) -> dict[str, str]:
    return {
        "job": await env.submit(Echo("x"), delay=3600),
        "schedule": await env.add_schedule("tick"),
        "queue": "default",
        "worker": (await env.client.workers())[0].worker_id,
    }


async def test_every_action_needs_the_token(env: Env) -> None:
    targets = await _targets(env)
    for action in ACTIONS:
        path = action.format(**targets)
        answer = await env.http.post(path)
        assert answer.status_code == 401, path
        assert answer.json()["error"].startswith("authentication required"), path
        wrong = await env.http.post(path, headers={"Authorization": "Bearer guess"})
        assert wrong.status_code == 401 and wrong.json() == {"error": "wrong token"}, path
    # Nothing changed.
    assert (await env.client.get(targets["job"])).status is JobStatus.PENDING
    assert not await env.client.queue_paused()
    assert [w.command for w in await env.client.workers()] == [None]


async def test_without_a_token_the_app_is_read_only(read_only_env: Env) -> None:
    env = read_only_env
    assert (await get_json(env, "/healthz"))["read_only"] is True
    targets = await _targets(env)
    for action in ACTIONS:
        path = action.format(**targets)
        answer = await env.http.post(path, headers=BEARER)
        assert answer.status_code == 403, path
        assert answer.json() == {"error": READ_ONLY}
    login = await env.http.post("/login", data={"token": TOKEN})
    assert login.status_code == 403 and READ_ONLY in login.text
    assert "jobsched_session" not in login.cookies
    # Reading still works.
    listed = await get_json(env, "/api/jobs")
    assert listed["total"] == 1, listed


async def test_a_browser_session_needs_the_csrf_header(env: Env) -> None:
    wrong = await env.http.post("/login", data={"token": "guess"})
    assert wrong.status_code == 401 and "wrong token" in wrong.text
    assert "jobsched_session" not in env.http.cookies

    login = await env.http.post("/login", data={"token": TOKEN})
    assert login.status_code == 303 and login.headers["location"] == "/"
    cookies = {c.name: c for c in env.http.cookies.jar}
    session, csrf = cookies["jobsched_session"], cookies["jobsched_csrf"]
    assert TOKEN not in session.value  # an HMAC of it, not the token
    assert session.has_nonstandard_attr("HttpOnly")
    assert not csrf.has_nonstandard_attr("HttpOnly")  # the page reads it
    for header in login.headers.get_list("set-cookie"):
        assert "samesite=strict" in header.lower()

    refused = await env.http.post("/api/queue/pause")
    assert refused.status_code == 403 and "CSRF" in refused.json()["error"]
    forged = await env.http.post("/api/queue/pause", headers={"X-CSRF-Token": "forged"})
    assert forged.status_code == 403
    assert not await env.client.queue_paused()

    allowed = await env.http.post("/api/queue/pause", headers={"X-CSRF-Token": csrf.value})
    assert allowed.status_code == 200 and await env.client.queue_paused()

    logout = await env.http.post("/logout", headers={"X-CSRF-Token": csrf.value})
    assert logout.status_code == 303 and "jobsched_session" not in env.http.cookies
    after = await env.http.post("/api/queue/resume", headers={"X-CSRF-Token": csrf.value})
    assert after.status_code == 401


async def test_a_session_cookie_from_another_app_is_refused(env: Env) -> None:
    """The cookie is an HMAC under the app's own random key: the same token elsewhere
    (or the app restarted) gives another cookie."""
    other = create_app(client=env.client, token=TOKEN)
    transport = httpx.ASGITransport(app=other)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
        await http.post("/login", data={"token": TOKEN})
        stolen = {c.name: c.value for c in http.cookies.jar}
    transport = httpx.ASGITransport(app=env.app)
    async with httpx.AsyncClient(
        transport=transport, base_url="http://testserver", cookies=stolen
    ) as thief:
        answer = await thief.post(
            "/api/queue/pause", headers={"X-CSRF-Token": stolen["jobsched_csrf"]}
        )
    assert answer.status_code == 401


# ── failures ───────────────────────────────────────────────────────────
async def test_an_unexpected_error_is_500_without_a_traceback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    client = Client(f"sqlite:///{tmp_path / 'jobs.db'}")
    await client.open()
    await client.close()  # every call now raises
    app = create_app(client=client, token=TOKEN)
    async with serving(app) as http:
        for path in ("/api/jobs/x", "/api/stats", "/metrics", "/", "/jobs/x"):
            answer = await http.get(path)
            assert answer.status_code == 500, path
            if path.startswith("/jobs") or path == "/":
                assert answer.headers["content-type"].startswith("text/html")
                assert "The server logged the details." in answer.text
            else:
                assert answer.json() == {"error": "internal error: the server logged the details"}
            assert "Traceback" not in answer.text and "closed" not in answer.text


def test_create_app_needs_exactly_one_source() -> None:
    with pytest.raises(TypeError, match="exactly one of store_url, scheduler or client, got none"):
        create_app()
    with pytest.raises(TypeError, match="got store_url, client"):
        create_app("sqlite:///x.db", client=object())
    with pytest.raises(ValueError, match="must not be empty"):
        create_app("sqlite:///x.db", token=" ")


async def test_openapi_describes_every_route(env: Env) -> None:
    document = await get_json(env, "/api/openapi.json")
    assert document["openapi"].startswith("3.1")
    paths = set(document["paths"])
    for action in ACTIONS:
        formatted = action.format(
            job="{job_id}", schedule="{schedule_id}", queue="{name}", worker="{worker_id}"
        )
        assert formatted in paths
    assert {"/healthz", "/api/stats", "/api/jobs", "/api/jobs/{job_id}", "/api/schedules"} <= paths


# ── live updates ───────────────────────────────────────────────────────
async def test_events_send_stats_when_a_job_finishes(env: Env, tmp_path: Path) -> None:
    env.app.state.dashboard.min_interval = 0.0
    stream = EventStream(env.app)
    task = asyncio.create_task(stream.run())
    try:
        name, first = await stream.next_event()
        assert name == "stats" and first["counts"].get("completed", 0) == 0
        job_id = await env.submit(Echo("live"))
        await env.wait(job_id)
        # Events may come for the submit and the start too: the finish shows in one.
        while first["counts"].get("completed", 0) == 0:
            name, first = await stream.next_event()
            assert name == "stats"
        assert first["counts"]["completed"] == 1
    finally:
        stream.left.set()
        await asyncio.wait_for(task, timeout=60)


async def test_a_change_no_waiter_saw_is_sent_at_the_next_heartbeat(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A change made while the last event was read wakes no waiter: the
    # heartbeat looks at the counts itself. Every wake-up is missed here.
    board = env.app.state.dashboard
    board.heartbeat = 0.05

    async def never_woken(timeout: float) -> bool:
        await asyncio.sleep(timeout)
        return False

    monkeypatch.setattr(board.client, "wait_for_change", never_woken)
    stream = EventStream(env.app)
    task = asyncio.create_task(stream.run())
    try:
        name, first = await stream.next_event()
        assert name == "stats" and first["counts"].get("completed", 0) == 0
        await env.wait(await env.submit(Echo("missed")))
        while first["counts"].get("completed", 0) == 0:
            name, first = await stream.next_event()
            assert name == "stats"
        assert first["counts"]["completed"] == 1
    finally:
        stream.left.set()
        await asyncio.wait_for(task, timeout=60)


async def test_events_send_a_heartbeat_while_nothing_changes(env: Env) -> None:
    env.app.state.dashboard.heartbeat = 0.05
    stream = EventStream(env.app)
    task = asyncio.create_task(stream.run())
    try:
        name, _ = await stream.next_event()
        assert name == "stats"
        while ": heartbeat\n\n" not in stream.buffer:
            message = await asyncio.wait_for(stream.messages.get(), timeout=60)
            stream.buffer += message.get("body", b"").decode()
    finally:
        stream.left.set()
        await asyncio.wait_for(task, timeout=60)


# ── metrics ────────────────────────────────────────────────────────────
async def test_metrics_report_the_store_jobs_per_status(env: Env, tmp_path: Path) -> None:
    for text in ("a", "b"):
        await env.wait(await env.submit(Echo(text)))
    await env.wait(await env.submit(Gate(str(tmp_path / "never"))))
    answer = await env.http.get("/metrics")
    assert answer.status_code == 200, answer.text
    (family,) = [
        f for f in text_string_to_metric_families(answer.text) if f.name == "jobsched_store_jobs"
    ]
    counts = {s.labels["status"]: s.value for s in family.samples}
    assert counts["completed"] == 2 and counts["failed"] == 1 and counts["pending"] == 0


async def test_metrics_without_the_prometheus_plugin_say_how_to_get_it(env: Env) -> None:
    env.app.state.dashboard.plugins = PluginManager(
        [WebJobs()], deny=["prometheus"], autoload=False
    )
    answer = await get_json(env, "/metrics", 404)
    assert answer == {
        "error": "/metrics needs the prometheus plugin: pip install 'jobsched[prometheus]'"
    }


# ── mounting ───────────────────────────────────────────────────────────
async def test_the_app_mounts_under_a_prefix(tmp_path: Path) -> None:
    dashboard = create_app(f"sqlite:///{tmp_path / 'jobs.db'}", token=TOKEN)
    outer = Starlette(
        routes=[Mount("/jobs", app=dashboard)],
        # A mounted app's lifespan is not run by Starlette: the outer app runs it.
        lifespan=lambda app: dashboard.router.lifespan_context(dashboard),
    )
    async with serving(outer) as http:
        assert (await http.get("/jobs/healthz")).json()["status"] == "ok"
        login = await http.post("/jobs/login", data={"token": TOKEN})
        assert login.status_code == 303 and login.headers["location"] == "/jobs/"
        assert "Path=/jobs" in login.headers["set-cookie"]
        missing = await http.get("/jobs/api/nothing")
        assert missing.json() == {"error": "Not Found"}


# ── the console script ─────────────────────────────────────────────────
@pytest.fixture
def web_process(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    script = Path(sys.executable).parent / "jobsched"
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    BlockingClient(url).open().close()  # the dashboard serves a store that exists
    proc = subprocess.Popen(
        [str(script), "web", "--store", url, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "JOBSCHED_WEB_TOKEN": TOKEN},
    )
    assert proc.stdout is not None and proc.stderr is not None
    line = proc.stdout.readline()
    if not line.startswith("jobsched web: http://"):
        proc.kill()
        pytest.fail(f"no URL printed: {line!r} {proc.stderr.read()}")
    threading.Thread(target=proc.stderr.read, daemon=True).start()
    try:
        yield proc, line.split()[2]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.slow
def test_jobsched_web_serves_the_app_until_interrupted(
    web_process: tuple[subprocess.Popen[str], str],
) -> None:
    proc, url = web_process
    assert url.startswith("http://127.0.0.1:") and url.endswith("/")
    with httpx.Client(base_url=url, timeout=30) as http:
        assert http.get("healthz").json() == {"status": "ok", "read_only": False}
        assert http.post("api/queue/pause").status_code == 401
        assert http.post("api/queue/pause", headers=BEARER).json()["changed"] is True
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 0


@pytest.mark.slow
def test_jobsched_web_refuses_a_bad_store_and_a_bad_port(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "jobsched"
    for args, message in (
        (["--store", "nosuch://x"], "nosuch://x"),
        (["--store", f"sqlite:///{tmp_path / 'x.db'}", "--port", "70000"], "--port must be"),
    ):
        done = subprocess.run(
            [str(script), "web", *args], capture_output=True, text=True, timeout=60, check=False
        )
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith("jobsched: error: ") and message in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1


# ── docs/web.md ────────────────────────────────────────────────────────
DOC = Path(__file__).resolve().parent.parent / "docs" / "web.md"


@pytest.mark.parametrize("framework", ["starlette", "fastapi"])
async def test_the_mount_examples_of_docs_web_md_work_as_written(
    framework: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    starlette_example, fastapi_example, *_ = re.findall(
        r"```python\n(.*?)```", DOC.read_text(), flags=re.S
    )
    example = starlette_example if framework == "starlette" else fastapi_example
    assert f"from {framework}" in example
    assert 'Client("sqlite:///jobs.db")' in example
    monkeypatch.setenv("JOBSCHED_WEB_TOKEN", TOKEN)
    namespace: dict[str, Any] = {}
    exec(example.replace("sqlite:///jobs.db", f"sqlite:///{tmp_path / 'jobs.db'}"), namespace)
    async with serving(namespace["app"]) as http:
        assert (await http.get("/jobs/healthz")).json() == {"status": "ok", "read_only": False}
        paused = await http.post("/jobs/api/queue/pause", headers=BEARER)
        assert paused.json() == {"queue_paused": True, "changed": True}
        assert await namespace["client"].queue_paused()
        overview = await http.get("/jobs/")
        assert overview.status_code == 200 and 'href="/jobs/static/style.css"' in overview.text
