"""The dashboard's throughput history (issue 24, the Overview): ``GET
/api/history`` and the Overview's history panel, on an in-process scheduler
(``create_app(scheduler=...)``), memory://, a SQLite file in shared mode and
PostgreSQL, through httpx's ASGI transport. The workers of the shared stores
run in the test's loop with a short lease, so they flush their history
every 0.1 s; the test waits for the flush, never for a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from jobsched import Client, JobScheduler, JobStatus
from jobsched.web import create_app
from jobsched_plugins.memory_queue import SharedMemoryStore
from web_support import TOKEN, Echo, Env, Gate, get_json, plugins, serving

pytestmark = pytest.mark.timeout(120)

KINDS = ["memory", "memory-queue", "sqlite", "postgresql"]


@contextlib.asynccontextmanager
async def history_env(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """`make_env` with workers that flush their history every 0.1 s."""
    if kind == "memory":
        async with JobScheduler(queues={"default": 2, "bulk": 1}, plugins=plugins()) as scheduler:
            app = create_app(scheduler=scheduler, token=TOKEN)
            async with serving(app) as http:
                yield Env(kind, app, http, app.state.dashboard.client, scheduler)
        return
    if kind == "memory-queue":
        url = f"memory://{uuid.uuid4().hex}?lease=0.3"
    elif kind == "sqlite":
        url = f"sqlite:///{tmp_path / 'jobs.db'}?lease=0.3"
    else:
        url = request.getfixturevalue("pg_schema")[0] + "&lease=0.3"
    app = create_app(url, token=TOKEN, plugins=plugins())
    worker = JobScheduler(
        plugins=plugins(), store=url, shared=True, queues={"default": 2, "bulk": 1}
    )
    async with worker, serving(app) as http:
        yield Env(kind, app, http, app.state.dashboard.client)


@pytest.fixture(params=KINDS)
async def env(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Env]:
    async with history_env(request.param, request, tmp_path) as made:
        yield made


async def ran(env: Env, tmp_path: Path) -> None:
    """Three echoes in the default queue and a failing gate in "bulk", ended
    and flushed: what every test below reads."""
    echoes = [await env.submit(Echo(f"echo {i}")) for i in range(3)]
    gate = await env.submit(Gate(str(tmp_path / "never")), queue="bulk", retry="none")
    for job_id in echoes:
        assert (await env.wait(job_id)).status is JobStatus.COMPLETED
    assert (await env.wait(gate)).status is JobStatus.FAILED
    give_up = time.monotonic() + 30
    while (await get_json(env, "/api/history", window="1h"))["completed"] < 3:
        assert time.monotonic() < give_up, "the worker never flushed its history"
        await asyncio.sleep(0.01)
    while (await get_json(env, "/api/history", window="1h"))["failed"] < 1:
        assert time.monotonic() < give_up, "the worker never flushed its history"
        await asyncio.sleep(0.01)


async def test_the_history_route_answers_the_record_and_filters(env: Env, tmp_path: Path) -> None:
    await ran(env, tmp_path)
    found = await get_json(env, "/api/history")  # 24 h by default
    assert (found["window"], found["step"], len(found["buckets"])) == ("24h", 300.0, 288)
    assert (found["completed"], found["failed"]) == (3, 1)
    assert found["failure_rate"] == pytest.approx(0.25)
    assert found["p50"] is not None and found["p50"] <= found["p95"]
    assert [(t["type"], t["completed"], t["failed"]) for t in found["types"]] == [
        ("echo", 3, 0),
        ("gate", 0, 1),
    ]
    assert found["backlog_age"] is None
    assert sum(b["completed"] for b in found["buckets"]) == 3
    week = await get_json(env, "/api/history", window="7d", type="echo")
    assert (week["step"], len(week["buckets"]), week["type"]) == (3600.0, 168, "echo")
    assert [t["type"] for t in week["types"]] == ["echo"]
    bulk = await get_json(env, "/api/history", window="1h", queue="bulk")
    assert (bulk["queue"], bulk["completed"], bulk["failed"]) == ("bulk", 0, 1)
    # Empty values are no filter, as in the Overview's form.
    assert (await get_json(env, "/api/history", type="", queue=""))["completed"] == 3


@pytest.mark.parametrize(
    ("params", "error"),
    [
        ({"window": "30d"}, "window must be one of 1h, 24h, 7d, got '30d'"),
        ({"queue": " bulk"}, "queue must be a non-empty name without surrounding spaces"),
        ({"type": "a\x00b"}, "type must not contain a NUL character"),
        ({"queue": "q" * 300}, "queue must be at most"),
    ],
)
async def test_a_bad_history_query_is_one_line_400(
    params: dict[str, str], error: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    async with history_env("memory", request, tmp_path) as env:
        answer = await get_json(env, "/api/history", 400, **params)
        assert answer["error"].startswith(error), answer
        page = await env.http.get("/", params=params)
        assert page.status_code == 400 and "Bad filter" in page.text


async def test_the_overview_shows_the_history_per_type_and_the_backlog(
    env: Env, tmp_path: Path
) -> None:
    await ran(env, tmp_path)
    waiting = await env.submit(Echo("later"), delay=3600)
    text = (await env.http.get("/", params={"window": "24h"})).text
    assert 'data-testid="history-chart"' in text
    assert re.search(r'data-testid="history-completed">3<', text)
    assert re.search(r'data-testid="history-failure-rate">25 %<', text)
    assert '<tr data-type="echo">' in text and '<tr data-type="gate">' in text
    assert '<option value="7d">7 days</option>' in text
    # The per-queue backlog: the delayed job, queued and not due, in "default".
    assert '<tr data-queue="default">' in text and '<tr data-queue="bulk">' not in text
    # Filtered by type and queue (the live fragment keeps the filters).
    fragment = (
        await env.http.get(
            "/",
            params={"window": "7d", "type": "gate", "queue": "bulk"},
            headers={"HX-Request": "true"},
        )
    ).text
    assert fragment.lstrip().startswith('<div id="region">')
    assert '<option value="7d" selected>' in fragment
    assert '<option value="gate" selected>' in fragment
    assert '<option value="bulk" selected>' in fragment
    assert '<tr data-type="gate">' in fragment and 'data-type="echo"' not in fragment
    assert re.search(r'data-testid="history-failed">1<', fragment)
    assert (await env.client.get(waiting)).status is JobStatus.PENDING


class NoHistory:
    """A memory:// store without the history role (a third party's, say)."""

    def __init__(self, url: str) -> None:
        self._store = SharedMemoryStore(url)

    def __getattr__(self, name: str) -> Any:
        if name in ("add_history", "history", "backlog"):
            raise AttributeError(name)
        return getattr(self._store, name)


async def test_a_store_without_the_history_role_says_so(tmp_path: Path) -> None:
    store = NoHistory(f"memory://{uuid.uuid4().hex}")
    async with Client(store, plugins=plugins()) as client:
        app = create_app(client=client, token=TOKEN)
        async with serving(app) as http:
            answer = await http.get("/api/history")
            assert answer.status_code == 501
            assert answer.json()["error"] == (
                f"store {store.url!r} cannot serve a Client's history: it lacks the history "
                "role (add_history, history, backlog) (docs/plugins.md#store-roles says which "
                "roles serve what)"
            )
            text = (await http.get("/")).text
            assert 'data-testid="history-lacking"' in text and "lacks the history role" in text
