"""The web app under test on each kind of store, for the tests of the dashboard.

`make_env` builds one: an in-process scheduler on the memory store
(``create_app(scheduler=...)``), or a shared store - an in-memory queue
(``memory://NAME``: no database), a SQLite file in shared mode or a
PostgreSQL schema - (``create_app(store_url)``, with a worker scheduler in the
test's loop running the jobs), reached through httpx's ASGI transport: no
server, no network. `EventStream` reads ``GET /api/events`` by driving the
ASGI app directly (httpx's transport buffers whole answers).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
from starlette.applications import Starlette

from jobsched import AsyncJob, Job, JobScheduler, PluginManager, hookimpl
from jobsched.hookspecs import Register
from jobsched.web import create_app

TOKEN = "correct horse battery staple"
BEARER = {"Authorization": f"Bearer {TOKEN}"}


# ── the jobs the tests run ─────────────────────────────────────────────
@attrs.define(eq=False)
class Gate(AsyncJob):
    """Fails while the file `path` does not exist, then succeeds: a retried job can pass.

    It is not retried by itself: a failure is final until someone retries it.
    """

    path: str

    def __attrs_post_init__(self) -> None:
        Job.__init__(self, "gate")

    async def run(self) -> Any:
        if not os.path.exists(self.path):
            raise RuntimeError(f"gate closed: {self.path}")
        return "opened"


@attrs.define(eq=False)
class Echo(AsyncJob):
    """Returns its text."""

    text: str

    def __attrs_post_init__(self) -> None:
        Job.__init__(self, "echo")

    async def run(self) -> Any:
        return self.text


class WebJobs:
    @hookimpl
    def jobsched_register_job_types(self, register: Register) -> None:
        register("gate", Gate)
        register("echo", Echo)


def plugins() -> PluginManager:
    return PluginManager([WebJobs()], autoload=False)


# ── the app under test, on each store ──────────────────────────────────
@attrs.define
class Env:
    """One app under test: its HTTP client (no credentials) and its operator client."""

    kind: str
    app: Starlette
    http: httpx.AsyncClient
    client: Any
    #: The in-process scheduler of ``create_app(scheduler=...)`` (memory), else None.
    scheduler: JobScheduler | None = None

    async def submit(self, job: Job, **options: Any) -> str:
        if isinstance(job, Gate) and self.scheduler is None:
            # A Client stores a job's type and arguments, not the policy of the instance.
            options["retry"] = "none"
        job_id: str = await self.client.submit(job, **options)
        return job_id

    async def wait(self, job_id: str) -> Any:
        return await self.client.wait(job_id, timeout=60)

    async def add_schedule(self, text: str) -> str:
        """A schedule of ``Echo(text)`` every hour, first due in an hour."""
        if self.scheduler is not None:
            return self.scheduler.schedule_recurring(
                functools.partial(Echo, text), 3600, start_in=3600
            )
        schedule_id: str = await self.client.add_schedule(Echo(text), every=3600, start_in=3600)
        return schedule_id


@contextlib.asynccontextmanager
async def serving(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    """`app` started (its lifespan) with an httpx client over it."""
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
            yield http


@contextlib.asynccontextmanager
async def make_env(
    kind: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    token: str | None,
    **options: Any,
) -> AsyncIterator[Env]:
    """The app of `kind` with `token` (and `create_app`'s other `options`)."""
    if kind == "memory":
        async with JobScheduler(num_workers=2, plugins=plugins()) as scheduler:
            app = create_app(scheduler=scheduler, token=token, **options)
            async with serving(app) as http:
                yield Env(kind, app, http, app.state.dashboard.client, scheduler)
        return
    if kind == "memory-queue":
        url = f"memory://{uuid.uuid4().hex}"
    elif kind == "sqlite":
        url = f"sqlite:///{tmp_path / 'jobs.db'}"
    else:
        url = request.getfixturevalue("pg_schema")[0]
    app = create_app(url, token=token, plugins=plugins(), **options)
    async with (
        JobScheduler(num_workers=2, plugins=plugins(), store=url, shared=True),
        serving(app) as http,
    ):
        yield Env(kind, app, http, app.state.dashboard.client)


STORES = ["memory", "memory-queue", "sqlite", "postgresql"]


async def get_json(env: Env, path: str, expect: int = 200, **params: Any) -> Any:
    answer = await env.http.get(path, params=params)
    assert answer.status_code == expect, answer.text
    assert answer.headers["content-type"] == "application/json"
    return answer.json()


async def post_json(env: Env, path: str, expect: int = 200, **kw: Any) -> Any:
    kw.setdefault("headers", BEARER)
    answer = await env.http.post(path, **kw)
    assert answer.status_code == expect, answer.text
    return answer.json()


class EventStream:
    """``GET /api/events`` read by driving the ASGI app: its events as they are sent."""

    def __init__(self, app: Starlette) -> None:
        self.app = app
        self.messages: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.left = asyncio.Event()
        self.buffer = ""

    async def receive(self) -> dict[str, Any]:
        await self.left.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        await self.messages.put(message)

    async def run(self) -> None:
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": "/api/events",
            "raw_path": b"/api/events",
            "root_path": "",
            "query_string": b"",
            "headers": [(b"host", b"testserver")],
            "client": ("127.0.0.1", 1),
            "server": ("testserver", 80),
            "state": {},
        }
        await self.app(scope, self.receive, self.send)

    async def next_event(self) -> tuple[str, Any]:
        """The next event (name, data); heartbeat comments are skipped."""
        while True:
            while "\n\n" in self.buffer:
                block, self.buffer = self.buffer.split("\n\n", 1)
                fields = dict(line.split(": ", 1) for line in block.splitlines())
                if "event" in fields:
                    return fields["event"], json.loads(fields["data"])
            message = await asyncio.wait_for(self.messages.get(), timeout=60)
            if message["type"] == "http.response.start":
                assert message["status"] == 200
                assert dict(message["headers"])[b"content-type"].startswith(b"text/event-stream")
                continue
            self.buffer += message.get("body", b"").decode()
