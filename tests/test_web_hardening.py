"""The dashboard under attack (issue 21): request bodies, the Host header, sessions,
``jobsched web`` on a store that does not exist.

The app is driven through httpx's ASGI transport, or as an ASGI app directly
where the test must see what the app reads of a request body; ``jobsched
web`` runs as the console script it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import json
import sqlite3
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Iterator
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import httpx
import psycopg
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

from jobsched import (
    BlockingClient,
    Client,
    JobPriority,
    JobScheduler,
    JobStatus,
    StoreError,
    Submission,
)
from jobsched.store import unpack_sort_key
from jobsched.web import bound_hosts, create_app
from pg_support import base_dsn, with_query
from web_support import (
    BEARER,
    STORES,
    TOKEN,
    Echo,
    Env,
    EventStream,
    Gate,
    make_env,
    plugins,
    serving,
)
from worker_support import shared_store

pytestmark = pytest.mark.timeout(120)

SCRIPT = str(Path(sys.executable).parent / "jobsched")
T = TypeVar("T")


@contextlib.asynccontextmanager
async def memory_app(**options: Any) -> AsyncIterator[Starlette]:
    """The app over an in-process scheduler (memory store) with the token."""
    async with JobScheduler(num_workers=1) as scheduler:
        yield create_app(scheduler=scheduler, token=TOKEN, **options)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return shared_store(request, tmp_path)


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with memory_app() as app, serving(app) as client:
        yield client


# ── 1. request bodies ──────────────────────────────────────────────────
class Request:
    """One request driven through the ASGI app by hand: what the app read of its
    body (`chunks_read`) and what it answered."""

    def __init__(
        self,
        method: str,
        path: str,
        *,
        headers: dict[str, str] | None = None,
        chunk: bytes = b"",
        chunks: int = 0,
    ) -> None:
        self.method = method
        self.path = path
        self.headers = {"host": "testserver", **(headers or {})}
        self.chunk = chunk
        self.chunks = chunks
        self.chunks_read = 0
        self.status = 0
        self.response_headers: dict[str, str] = {}
        self.body = b""

    async def receive(self) -> dict[str, Any]:
        if self.chunks_read >= self.chunks:
            return {"type": "http.request", "body": b"", "more_body": False}
        self.chunks_read += 1
        return {"type": "http.request", "body": self.chunk, "more_body": True}

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.response_headers = {k.decode(): v.decode() for k, v in message["headers"]}
        elif message["type"] == "http.response.body":
            self.body += message.get("body", b"")

    async def run(self, app: Starlette) -> Request:
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": self.method,
            "scheme": "http",
            "path": self.path,
            "raw_path": self.path.encode(),
            "root_path": "",
            "query_string": b"",
            "headers": [(k.lower().encode(), v.encode()) for k, v in self.headers.items()],
            "client": ("127.0.0.1", 5000),
            "server": ("testserver", 80),
            "state": {},
        }
        await app(scope, self.receive, self.send)
        return self


FORM = {"content-type": "application/x-www-form-urlencoded"}


async def test_a_body_over_the_limit_is_413_before_it_is_read() -> None:
    huge = str(40 * 1024 * 1024)  # 40 MiB announced, none of it sent
    async with memory_app() as app:
        login = await Request(
            "POST", "/login", headers={**FORM, "content-length": huge}, chunk=b"a=1&" * 4096
        ).run(app)
        assert login.status == 413 and login.chunks_read == 0
        assert b"request body too large" in login.body
        api = await Request(
            "POST", "/api/queue/pause", headers={**BEARER, "content-length": huge}
        ).run(app)
        assert api.status == 413 and api.chunks_read == 0
        assert api.response_headers["content-type"] == "application/json"
        assert not await app.state.dashboard.client.queue_paused()


async def test_a_streamed_body_is_cut_off_at_the_limit() -> None:
    """A chunked body (no Content-Length) is read only up to the limit: 16 KiB
    chunks of ``a=1&...``, 2,560 of them (40 MiB) on offer."""
    async with memory_app() as app:
        login = await Request(
            "POST", "/login", headers=FORM, chunk=b"a=1&" * 4096, chunks=2560
        ).run(app)
        assert login.status == 413, login.body
        assert login.chunks_read <= 5  # 64 KiB is four chunks: the fifth passes it
        assert b"at most 65536 bytes" in login.body
        # A small form still logs in.
        done = await Request(
            "POST", "/login", headers=FORM, chunk=f"token={TOKEN}".encode(), chunks=1
        ).run(app)
        assert done.status == 303


async def test_a_form_of_too_many_fields_or_a_bad_length_is_400(http: httpx.AsyncClient) -> None:
    many = "&".join(f"f{i}=1" for i in range(100))
    answer = await http.post("/login", content=many, headers=FORM)
    assert answer.status_code == 400 and "too many fields" in answer.text
    async with memory_app() as app:
        bad = await Request("POST", "/login", headers={**FORM, "content-length": "x" * 999}).run(
            app
        )
    assert bad.status == 400 and b"is not a size" in bad.body and len(bad.body) < 200


# ── 2. the Host header ─────────────────────────────────────────────────
async def test_a_host_that_is_not_allowed_is_refused() -> None:
    hosts = ["jobs.example.com", "*.corp.example", "127.0.0.1", "10.0.0.0/8", "::1", "localhost"]
    async with memory_app(allowed_hosts=hosts) as app, serving(app) as http:
        for host in (
            "rebind.attacker.example",
            "jobs.example.com.attacker.example",
            "192.168.1.5",
            "[::2]:8000",
            "",
        ):
            answer = await http.get("/api/jobs", headers={"Host": host})
            assert answer.status_code == 400, host
            assert "not a name this dashboard answers to" in answer.json()["error"]
            assert "jobs" not in answer.json()
            page = await http.get("/jobs", headers={"Host": host})
            assert page.status_code == 400 and "<table" not in page.text
        for host in (
            "jobs.example.com",
            "JOBS.example.com:8765",
            "a.corp.example",
            "127.0.0.1:8765",
            "10.1.2.3",
            "[::1]:8000",
            "localhost:8000",
        ):
            answer = await http.get("/api/jobs", headers={"Host": host})
            assert answer.status_code == 200, host
        long_host = "x" * 5000 + ".example"
        answer = await http.get("/api/jobs", headers={"Host": long_host})
        assert answer.status_code == 400 and len(answer.text) < 400


def test_jobsched_web_answers_the_address_it_listens_on() -> None:
    assert bound_hosts("127.0.0.1") == ["127.0.0.0/8", "::1", "localhost"]
    assert bound_hosts("0.0.0.0") == ["0.0.0.0/0", "::/0", "localhost"]
    assert bound_hosts("::") == ["0.0.0.0/0", "::/0", "localhost"]
    assert bound_hosts("192.168.1.5") == ["192.168.1.5"]
    assert bound_hosts("myhost.lan") == ["myhost.lan"]


def test_a_bad_allowed_host_is_refused() -> None:
    for bad in ("jobs.example.com:80", "*", "a*.example.com", "http://x", ""):
        with pytest.raises(ValueError, match="is not a host name"):
            create_app("sqlite:///x.db", allowed_hosts=[bad])


async def test_mounted_in_an_app_the_host_check_still_holds(tmp_path: Path) -> None:
    """Without `allowed_hosts` the app checks no Host (its host app does); with them,
    mounted under /jobs, it refuses others in its own JSON shape."""
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    checked = create_app(url, token=TOKEN, allowed_hosts=["jobs.example.com"])
    outer = Starlette(
        routes=[Mount("/jobs", app=checked)],
        lifespan=lambda app: checked.router.lifespan_context(checked),
    )
    async with serving(outer) as http:
        refused = await http.get("/jobs/api/jobs", headers={"Host": "evil.example"})
        assert refused.status_code == 400 and "error" in refused.json()
        assert (await http.get("/jobs/api/jobs", headers={"Host": "jobs.example.com"})).json()[
            "total"
        ] == 0


# ── 3. sessions ────────────────────────────────────────────────────────
async def log_in(http: httpx.AsyncClient) -> tuple[str, str]:
    """Log `http` in; the session cookie and its CSRF token."""
    answer = await http.post("/login", data={"token": TOKEN})
    assert answer.status_code == 303, answer.text
    return http.cookies["jobsched_session"], http.cookies["jobsched_csrf"]


async def test_each_login_is_a_session_of_its_own_with_its_own_csrf_token() -> None:
    async with memory_app() as app, serving(app) as first, serving(app) as second:
        session_a, csrf_a = await log_in(first)
        session_b, csrf_b = await log_in(second)
        assert session_a != session_b and csrf_a != csrf_b
        # One session's CSRF token does not go with the other's cookie.
        crossed = await second.post("/api/queue/pause", headers={"X-CSRF-Token": csrf_a})
        assert crossed.status_code == 403 and "CSRF" in crossed.json()["error"]
        allowed = await second.post("/api/queue/pause", headers={"X-CSRF-Token": csrf_b})
        assert allowed.status_code == 200
        # The page carries its own session's token for live.js.
        page = await first.get("/")
        assert f'<meta name="csrf-token" content="{csrf_a}">' in page.text


async def test_logout_ends_the_session_and_needs_its_csrf_token() -> None:
    async with memory_app() as app, serving(app) as http:
        session, csrf = await log_in(http)
        forged = await http.post("/logout")  # what another site's form would send
        assert forged.status_code == 403 and "CSRF" in forged.text
        assert http.cookies.get("jobsched_session") == session
        assert app.state.dashboard.auth.sessions == 1
        page = await http.get("/")
        assert f'name="csrf_token" value="{csrf}"' in page.text  # the logout form's field
        done = await http.post("/logout", data={"csrf_token": csrf})
        assert done.status_code == 303
        assert app.state.dashboard.auth.sessions == 0
        # The cookie, kept by a thief, no longer works.
        http.cookies.set("jobsched_session", session)
        http.cookies.set("jobsched_csrf", csrf)
        stolen = await http.post("/api/queue/pause", headers={"X-CSRF-Token": csrf})
        assert stolen.status_code == 401
        assert not await app.state.dashboard.client.queue_paused()


async def test_a_session_expires() -> None:
    now = [1000.0]
    async with memory_app(session_ttl=600) as app, serving(app) as http:
        app.state.dashboard.auth.clock = lambda: now[0]
        answer = await http.post("/login", data={"token": TOKEN})
        assert "max-age=600" in answer.headers["set-cookie"].lower()
        csrf = http.cookies["jobsched_csrf"]
        now[0] += 599
        ok = await http.post("/api/queue/pause", headers={"X-CSRF-Token": csrf})
        assert ok.status_code == 200
        now[0] += 1
        late = await http.post("/api/queue/resume", headers={"X-CSRF-Token": csrf})
        assert late.status_code == 401
        assert app.state.dashboard.auth.sessions == 0


async def test_wrong_tokens_at_login_are_limited_per_address() -> None:
    now = [1000.0]
    async with memory_app() as app, serving(app) as http:
        app.state.dashboard.auth.throttle.clock = lambda: now[0]
        for _ in range(5):
            wrong = await http.post("/login", data={"token": "guess"})
            assert wrong.status_code == 401
        # Now even the right token waits (or a guesser could tell it apart).
        limited = await http.post("/login", data={"token": TOKEN})
        assert limited.status_code == 429 and "too many wrong tokens" in limited.text
        assert limited.headers["retry-after"] == "60"
        assert "jobsched_session" not in http.cookies
        # Bearer requests are not logins: they still work.
        assert (await http.post("/api/queue/pause", headers=BEARER)).status_code == 200
        now[0] += 60
        assert (await http.post("/login", data={"token": TOKEN})).status_code == 303


# ── 4. many event streams ──────────────────────────────────────────────
@pytest.fixture(params=STORES)
async def env(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Env]:
    async with make_env(request.param, request, tmp_path, TOKEN) as made:
        yield made


async def test_many_event_streams_read_the_stats_once_per_change(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """20 open streams: one stats read when they open, one per change after."""
    board = env.app.state.dashboard
    board.heartbeat, board.min_interval = 3600.0, 0.0
    change = asyncio.Event()

    async def woken_by_the_test(timeout: float) -> bool:
        await change.wait()
        change.clear()
        return True

    reads = {"n": 0}
    real_stats = board.client.stats

    async def counted_stats() -> Any:
        reads["n"] += 1
        return await real_stats()

    monkeypatch.setattr(board.client, "wait_for_change", woken_by_the_test)
    monkeypatch.setattr(board.client, "stats", counted_stats)
    streams = [EventStream(env.app) for _ in range(20)]
    tasks = [asyncio.create_task(stream.run()) for stream in streams]
    try:
        for stream in streams:
            name, first = await stream.next_event()
            assert name == "stats" and first["counts"]["completed"] == 0
        assert reads["n"] == 1
        for done in (1, 2):
            await env.wait(await env.submit(Echo(f"change {done}")))
            change.set()
            for stream in streams:
                name, stats = await stream.next_event()
                assert name == "stats" and stats["counts"]["completed"] == done
            assert reads["n"] == 1 + done
        # /api/stats and the pages read for themselves, as before.
        assert (await env.http.get("/api/stats")).json()["counts"]["completed"] == 2
    finally:
        for stream in streams:
            stream.left.set()
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=60)


async def true_counts(client: Client) -> dict[str, int]:
    """The jobs per status counted row by row (what the kept counts must equal)."""
    found = Counter(row.status for row in await client.store.jobs())
    return {status.value: found.get(status.value, 0) for status in JobStatus}


async def test_the_kept_counts_follow_every_change(store_url: str, tmp_path: Path) -> None:
    """Submits (one, a batch, one cancelled at once by its failed dependency),
    claims, outcomes, retries, cancels, a schedule's fire and trigger, purges:
    the stats' counts (kept by the store) equal the rows' after each."""
    gate = tmp_path / "gate"
    async with Client(store_url, plugins=plugins()) as client:

        async def same() -> None:
            assert (await client.stats()).counts == await true_counts(client)

        await same()
        async with JobScheduler(num_workers=2, plugins=plugins(), store=store_url, shared=True):
            failed = await client.submit(Gate(str(gate)), retry="none")
            batch = await client.submit_many([Echo(f"e{i}") for i in range(20)])
            for job_id in (failed, *batch):
                await client.wait(job_id, timeout=60)
            orphan = await client.submit(Echo("after"), depends_on=[failed])
            assert (await client.get(orphan)).status is JobStatus.CANCELLED
            await same()
            gate.touch()
            await client.retry(failed)
            await client.wait(failed, timeout=60)
            await same()
        later = await client.submit(Echo("later"), delay=3600)
        waiting = await client.submit(Echo("waiting"), delay=3600)
        await client.cancel(later)
        schedule_id = await client.add_schedule(Echo("tick"), every=3600, start_in=3600)
        await client.trigger_schedule(schedule_id)
        await same()
        assert set(await client.requeue(status="cancelled")) == {orphan, later}
        await same()
        assert await client.purge(older_than=0) > 0
        await same()
        assert (await client.get(waiting)).status is JobStatus.PENDING


def as_written_before_the_kept_counts(url: str) -> None:
    """Take the store back to the schema of the code before them (SQLite
    version 6, PostgreSQL 7): their migration and the later ones only add
    (PostgreSQL's version 18 converts the key, converted back here), so
    dropping what they added is that schema, with the jobs it holds."""
    if url.startswith("sqlite:"):
        with contextlib.closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as conn:
            conn.execute("DROP INDEX jobsched_shared_ready_group")
            conn.execute("DROP INDEX jobsched_shared_ready")
            conn.execute("ALTER TABLE jobsched_shared_jobs DROP COLUMN job_group")
            conn.execute("ALTER TABLE jobsched_shared_jobs DROP COLUMN queue")
            conn.execute(
                "CREATE INDEX jobsched_shared_ready ON jobsched_shared_jobs (sort_key, seq) "
                "WHERE status IN ('pending', 'retry_wait') AND unmet = 0"
            )
            conn.execute("DROP TABLE jobsched_shared_paused_queues")
            conn.execute("ALTER TABLE jobsched_shared_jobs DROP COLUMN lease_expiries")
            conn.execute("ALTER TABLE jobsched_shared_jobs DROP COLUMN last_traceback")
            conn.execute("ALTER TABLE jobsched_shared_attempts DROP COLUMN traceback")
            conn.execute("DROP TABLE jobsched_shared_workers")
            conn.execute("DROP TABLE jobsched_shared_history")
            for column in ("build_refusals", "last_refusal", "refused_by"):
                conn.execute(f"ALTER TABLE jobsched_shared_jobs DROP COLUMN {column}")
            conn.execute("DROP TRIGGER jobsched_shared_counted_update")
            conn.execute("DROP TRIGGER jobsched_shared_counted_delete")
            conn.execute("DROP TABLE jobsched_shared_counts")
            conn.execute("UPDATE jobsched_meta SET value = '6' WHERE name = 'schema_version'")
            conn.commit()
        return
    schema = url.split("schema=")[1].split("&")[0]
    with psycopg.connect(base_dsn(), autocommit=True) as conn:
        # Version 18: the keys back to float8[], each as it was packed.
        keys = conn.execute(f'SELECT job_id, sort_key FROM "{schema}".jobs').fetchall()
        conn.execute(
            f"ALTER TABLE \"{schema}\".jobs ALTER COLUMN sort_key TYPE float8[] USING '{{}}'"
        )
        for job_id, packed in keys:
            conn.execute(
                f'UPDATE "{schema}".jobs SET sort_key = %s WHERE job_id = %s',
                [list(unpack_sort_key(packed)), job_id],
            )
        conn.execute(f'DROP FUNCTION "{schema}".sort_key(float8[])')
        conn.execute(f'ALTER TABLE "{schema}".jobs DROP COLUMN job_group')  # and its indexes
        conn.execute(f'ALTER TABLE "{schema}".jobs DROP COLUMN queue')  # and its index
        conn.execute(
            f'CREATE INDEX jobs_ready ON "{schema}".jobs (sort_key, seq) '
            "WHERE status IN ('pending', 'retry_wait') AND unmet = 0"
        )
        conn.execute(f'DROP TABLE "{schema}".paused_queues')
        conn.execute(f'ALTER TABLE "{schema}".jobs DROP COLUMN lease_expiries')
        conn.execute(f'ALTER TABLE "{schema}".jobs DROP COLUMN last_traceback')
        conn.execute(f'ALTER TABLE "{schema}".attempts DROP COLUMN traceback')
        conn.execute(f'DROP TABLE "{schema}".workers')
        conn.execute(f'DROP TABLE "{schema}".history')
        for column in ("build_refusals", "last_refusal", "refused_by"):
            conn.execute(f'ALTER TABLE "{schema}".jobs DROP COLUMN {column}')
        conn.execute(f'DROP TABLE "{schema}".job_counts')
        for name in ("inserted", "updated", "deleted"):
            conn.execute(f'DROP FUNCTION "{schema}".count_{name}_jobs() CASCADE')
        conn.execute(f'DROP INDEX "{schema}".jobs_seq')
        conn.execute(f'DROP INDEX "{schema}".jobs_schedule')
        conn.execute(f'DELETE FROM "{schema}".schema_version WHERE version >= 8')


async def test_a_store_from_before_the_kept_counts_is_counted_when_it_migrates(
    store_url: str,
) -> None:
    async with Client(store_url, plugins=plugins()) as client:
        jobs = await client.submit_many([Submission(Echo(f"e{i}"), delay=3600) for i in range(7)])
        await client.cancel(jobs[0])
        await client.cancel(jobs[1])
    as_written_before_the_kept_counts(store_url)
    async with Client(store_url, plugins=plugins()) as client:
        counts = (await client.stats()).counts
        assert counts == await true_counts(client)
        assert (counts["pending"], counts["cancelled"]) == (5, 2)
        await client.submit(Echo("one more"))
        assert (await client.stats()).counts["pending"] == 6
        page = await client.page(status="pending", limit=1)
        assert page.total == 6


async def test_the_stats_read_the_kept_counts_not_the_rows(store_url: str) -> None:
    """What makes them cheap at 10^6 jobs: the counters are read, the jobs are
    not counted (a counter changed by hand shows)."""
    async with Client(store_url, plugins=plugins()) as client:
        await client.submit(Echo("one"), delay=3600)
        if store_url.startswith("sqlite:"):
            await client.store.call(
                lambda conn: conn.execute(
                    "UPDATE jobsched_shared_counts SET n = n + 1000000 WHERE status = 'pending'"
                )
            )
        else:
            async with client.store.db.connection() as conn:
                await conn.execute(
                    client.store.db.q("INSERT INTO {s}.job_counts VALUES ('pending', -7, 1000000)")
                )
        assert (await client.stats()).counts["pending"] == 1_000_001
        assert (await client.page(limit=1)).total == 1_000_001
        assert (await client.page(type="echo", limit=1)).total == 1  # a type: counted


async def test_postgresql_folds_the_counters_of_ended_connections(
    pg_schema: tuple[str, str],
) -> None:
    url, _ = pg_schema
    async with Client(url, plugins=plugins()) as client:
        await client.submit_many([Submission(Echo(f"e{i}"), delay=3600) for i in range(3)])
        db = client.store.db
        async with db.connection() as conn:  # 300 connections came and went
            await conn.execute(
                db.q(
                    "INSERT INTO {s}.job_counts SELECT 'pending', -g, 1 "
                    "FROM generate_series(1, 300) AS g"
                )
            )
        assert (await client.stats()).counts["pending"] == 303
        async with db.connection() as conn:
            cur = await conn.execute(db.q("SELECT count(*) AS r FROM {s}.job_counts"))
            rows = (await cur.fetchone() or {})["r"]
        assert rows < 10  # folded into shard 0 (and this connection's own rows)
        assert (await client.stats()).counts == await true_counts(client) | {"pending": 303}


# ── 5. bad query and path values ───────────────────────────────────────
BAD_REQUESTS = [
    ("/api/jobs?q=%00", "q must not contain a NUL character"),
    ("/api/jobs?type=%00", "type must not contain a NUL character"),
    ("/api/jobs?q=" + "a" * 1001, "q must be at most 1000 characters"),
    ("/api/jobs/job%00x", "job_id must not contain a NUL character"),
    ("/api/jobs/job%00x/retry", "job_id must not contain a NUL character"),
    ("/api/schedules/s%00/pause", "schedule_id must not contain a NUL character"),
    ("/api/jobs?offset=9223372036854775808", "offset must be 0 to"),
    ("/api/jobs?offset=" + "9" * 5000, "offset must be 0 to"),
    ("/api/jobs?limit=" + "x" * 5000, "limit must be an integer"),
    ("/api/jobs?status=" + "x" * 5000, "unknown status"),
    ("/api/jobs?status=", "unknown status ''"),
    ("/api/jobs?status=failed,", "unknown status ''"),
    ("/api/jobs?limit=", "limit must be an integer, got ''"),
    ("/jobs?q=%00", "q must not contain a NUL character"),
    ("/jobs?type=%00", "type must not contain a NUL character"),
    ("/jobs?offset=9223372036854775808", "offset must be 0 to"),
    ("/jobs?offset=" + "9" * 5000, "offset must be 0 to"),
    ("/jobs/job%00x", "job_id must not contain a NUL character"),
]


async def test_bad_values_are_400_naming_them_without_repeating_them(env: Env) -> None:
    await env.wait(await env.submit(Echo("one")))
    for path, message in BAD_REQUESTS:
        method = env.http.post if path.endswith(("retry", "pause")) else env.http.get
        answer = await method(path, headers=BEARER)
        assert answer.status_code == 400, (path, answer.text[:300])
        if path.startswith("/api/"):
            assert answer.json()["error"].startswith(message), path
            assert len(answer.text) < 300, path
        else:
            assert message in answer.text, path
            assert "9" * 100 not in answer.text, path
    # An unknown id is 404, naming it only as far as it is short.
    missing = await env.http.get("/api/jobs/" + "z" * 5000)
    assert missing.status_code == 404 and len(missing.text) < 300
    page = await env.http.get("/jobs/" + "z" * 5000)
    assert page.status_code == 404 and "z" * 100 not in page.text
    # Good values still work.
    assert (await env.http.get("/api/jobs", params={"q": "one", "offset": "0"})).json()[
        "total"
    ] == 1


async def test_openapi_declares_the_statuses_the_server_takes(env: Env) -> None:
    document = (await env.http.get("/api/openapi.json")).json()
    (status,) = [
        p for p in document["paths"]["/api/jobs"]["get"]["parameters"] if p["name"] == "status"
    ]
    assert status["schema"] == {"type": "array", "items": {"enum": [s.value for s in JobStatus]}}
    assert status["explode"] is True
    q = [p for p in document["paths"]["/api/jobs"]["get"]["parameters"] if p["name"] == "q"]
    assert q[0]["schema"]["maxLength"] == 1000


async def test_an_unexpected_error_logs_a_plain_traceback_without_local_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A rich traceback prints every frame's local variables (the SQL parameters
    of a failed query among them): ~600 lines for one error. The log gets the
    plain traceback instead, rendered here by structlog's console renderer."""
    import io

    import structlog

    import jobsched.web._app as web_app

    out = io.StringIO()
    rendering = structlog.wrap_logger(
        structlog.PrintLogger(out),
        processors=[
            structlog.processors.add_log_level,
            structlog.dev.ConsoleRenderer(colors=False),
        ],
    )
    monkeypatch.setattr(web_app, "logger", rendering)
    async with memory_app() as app, serving(app) as http:

        async def failing(*args: Any, **kwargs: Any) -> Any:
            params = ["s3cret-parameter"]  # a local the log must not show
            raise RuntimeError(f"the store failed on {len(params)} parameter")

        monkeypatch.setattr(app.state.dashboard.client, "stats", failing)
        answer = await http.get("/api/stats")
    assert answer.status_code == 500
    text = out.getvalue()
    assert "web request failed" in text and "RuntimeError: the store failed" in text
    assert "s3cret-parameter" not in text
    assert len(text.splitlines()) < 60, text


async def test_an_unexpected_error_is_one_bounded_log_entry_however_long_its_chain(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A chain of exceptions printed 12 frames each, and a message holding a
    whole argument printed in full: still one entry, of bounded size."""
    import jobsched.web._app as web_app

    entries: list[tuple[str, dict[str, Any]]] = []

    class Recorder:
        def error(self, event: str, **fields: Any) -> None:
            entries.append((event, fields))

    monkeypatch.setattr(web_app, "logger", Recorder())
    async with memory_app() as app, serving(app) as http:

        async def failing(*args: Any, **kwargs: Any) -> Any:
            error: BaseException | None = None
            for n in range(50):
                try:
                    raise RuntimeError(f"failure {n} on {'x' * 100_000}") from error
                except RuntimeError as exc:
                    error = exc
            assert error is not None
            raise error

        monkeypatch.setattr(app.state.dashboard.client, "stats", failing)
        answer = await http.get("/api/stats")
    assert answer.status_code == 500
    [(event, fields)] = entries
    trace = fields["exception"]
    assert event == "web request failed" and "RuntimeError: failure 49 on xxx" in trace
    assert len(trace.splitlines()) <= 60 and len(trace) < 70_000


# ── 6. "Run now" of a schedule whose job type this process lacks ───────
async def test_run_now_copies_the_stored_job_without_its_job_type(store_url: str) -> None:
    """The dashboard's process has no ``echo`` job type (a ``@task`` defined in
    the workers' code is the usual case): "Run now" submits the stored job."""
    async with Client(store_url, plugins=plugins()) as producer:
        job = Echo("tick")
        job.priority = JobPriority.HIGH
        schedule_id = await producer.add_schedule(job, every=3600)
    app = create_app(store_url, token=TOKEN)  # the installed plugins: no echo
    async with serving(app) as http:
        answer = await http.post(f"/api/schedules/{schedule_id}/trigger", headers=BEARER)
        assert answer.status_code == 200, answer.text
        job_id = answer.json()["job_id"]
        (listed,) = (await http.get("/api/schedules")).json()["schedules"]
        assert listed["last_job_id"] == job_id and listed["fired"] == 1
    async with (
        JobScheduler(num_workers=1, plugins=plugins(), store=store_url, shared=True),
        Client(store_url, plugins=plugins()) as reader,
    ):
        done = await reader.wait(job_id, timeout=60)
    assert done.status is JobStatus.COMPLETED and done.result == "tick"
    assert done.type == "echo" and done.args == {"text": "tick"}
    assert done.priority is JobPriority.HIGH and done.schedule_id == schedule_id


async def test_a_stored_job_that_cannot_be_submitted_is_409(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    async with Client(url, plugins=plugins()) as producer:
        schedule_id = await producer.add_schedule(Echo("tick"), every=3600)
    with sqlite3.connect(tmp_path / "jobs.db") as conn:  # a hand-changed row
        conn.execute("UPDATE jobsched_shared_schedules SET options = ?", ['{"priority": "urgent"}'])
    app = create_app(url, token=TOKEN)
    async with serving(app) as http:
        answer = await http.post(f"/api/schedules/{schedule_id}/trigger", headers=BEARER)
    assert answer.status_code == 409, answer.text
    assert answer.json()["error"].startswith(f"job of schedule {schedule_id}: ")
    assert "urgent" in answer.json()["error"]


@pytest.mark.slow
def test_schedules_trigger_of_a_task_schedule_needs_no_import(store_url: str) -> None:
    import task_examples

    with BlockingClient(store_url) as producer:
        schedule_id = producer.add_schedule(task_examples.add.job(a=1), every=3600)
        done = subprocess.run(
            [SCRIPT, "schedules", "trigger", schedule_id, "--store", store_url, "--json"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        job_id = json.loads(done.stdout)["job_id"]
        job = producer.get(job_id)
    assert job.type == "examples.add" and job.args == {"a": 1}
    assert job.priority is JobPriority.HIGH and job.status is JobStatus.PENDING
    assert job.schedule_id == schedule_id


# ── 7. a job with a big argument ───────────────────────────────────────
async def test_pages_show_bounded_previews_of_a_big_value(env: Env) -> None:
    """900 kB of argument (and of result: the job returns it) make pages of a
    few kB; the job page links to the whole values."""
    big = "x" * 900_000
    job_id = await env.submit(Echo(big))
    assert (await env.wait(job_id)).status is JobStatus.COMPLETED
    for path in ("/", "/jobs", f"/jobs?q={big[:50]}"):
        for headers in ({}, {"HX-Request": "true"}):
            page = await env.http.get(path, headers=headers)
            assert page.status_code == 200 and f'data-job="{job_id}"' in page.text, path
            assert len(page.text) < 50_000, (path, len(page.text))
            text = html.unescape(page.text)
            assert '{"text": "' + "x" * 150 in text and "x" * 300 not in text
    detail = await env.http.get(f"/jobs/{job_id}")
    assert detail.status_code == 200 and len(detail.text) < 100_000, len(detail.text)
    assert "x" * 19_000 in detail.text and "x" * 20_001 not in detail.text
    for part in ("args", "result"):
        assert f'href="/api/jobs/{job_id}/{part}"' in detail.text
    assert detail.text.count("the whole value") == 2
    assert (await env.http.get(f"/api/jobs/{job_id}/args")).json() == {"text": big}
    assert (await env.http.get(f"/api/jobs/{job_id}/result")).json() == big
    assert (await env.http.get("/api/jobs/nope/args")).status_code == 404


# ── 8. the store unreachable ───────────────────────────────────────────
class Proxy:
    """A TCP proxy to PostgreSQL that the test can cut: cut, it takes connections
    and answers nothing, as a server gone from the network does."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.forwarding = True
        self.open: set[asyncio.StreamWriter] = set()
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        port: int = self.server.sockets[0].getsockname()[1]
        return port

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.open.add(writer)
        try:
            if not self.forwarding:
                await reader.read()  # held, never answered, until the test closes it
                return
            up_reader, up_writer = await asyncio.open_connection(*self.target)
            self.open.add(up_writer)

            async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
                with contextlib.suppress(OSError):
                    while data := await src.read(65536):
                        dst.write(data)
                        await dst.drain()
                dst.close()

            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        finally:
            writer.close()

    def _drop_all(self) -> None:
        for writer in list(self.open):
            writer.close()
        self.open.clear()

    def cut(self) -> None:
        self.forwarding = False
        self._drop_all()

    def mend(self) -> None:
        self.forwarding = True
        self._drop_all()

    async def stop(self) -> None:
        self._drop_all()
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()


async def within(what: Awaitable[T]) -> T:
    """`what`, which must end long before a lost connection's ~50 s of retries."""
    return await asyncio.wait_for(what, 20)


async def test_healthz_and_requests_fail_fast_while_postgresql_is_unreachable(
    pg_schema: tuple[str, str],
) -> None:
    url, _ = pg_schema
    parts = urlsplit(url)
    proxy = Proxy(parts.hostname or "127.0.0.1", parts.port or 5432)
    port = await proxy.start()
    proxied = urlunsplit(parts._replace(netloc=f"{parts.username}@127.0.0.1:{port}"))
    app = create_app(proxied, token=TOKEN)
    board = app.state.dashboard
    board.health.timeout, board.health.probe_timeout = 1.0, 0.5
    board.health.retry_after = 3600.0  # no request tries the store again by itself here
    try:
        async with serving(app) as http:
            assert (await http.get("/healthz")).json() == {"status": "ok", "read_only": False}
            assert (await http.get("/api/stats")).status_code == 200

            proxy.cut()
            stats = await within(http.get("/api/stats"))
            assert stats.status_code == 503, stats.text
            assert stats.json() == {"error": "the store did not answer within 1 s"}
            assert stats.headers["retry-after"].isdigit()
            # While it is down, requests are answered at once, the store untouched.
            reads = {"n": 0}
            real_page = board.client.page

            async def counted_page(*args: Any, **kwargs: Any) -> Any:
                reads["n"] += 1
                return await real_page(*args, **kwargs)

            board.client.page = counted_page
            jobs = await within(http.get("/api/jobs"))
            assert jobs.status_code == 503 and "did not answer" in jobs.json()["error"]
            page = await within(http.get("/jobs"))
            assert page.status_code == 503 and "The store is unavailable" in page.text
            events = await within(http.get("/api/events"))
            assert events.status_code == 503
            assert reads["n"] == 0
            health = await within(http.get("/healthz"))
            assert health.status_code == 503
            assert health.json() == {
                "status": "unavailable",
                "read_only": False,
                "error": "the store did not answer within 0.5 s",
            }

            proxy.mend()
            # /healthz tries the store whatever the state: it answers, so all do again.
            health = await within(http.get("/healthz"))
            assert health.json() == {"status": "ok", "read_only": False}, health.text
            assert (await within(http.get("/api/jobs"))).json()["total"] == 0
            assert reads["n"] == 1
            assert (await within(http.get("/jobs"))).status_code == 200
    finally:
        await proxy.stop()


async def test_a_store_error_fails_its_own_request_only(monkeypatch: pytest.MonkeyPatch) -> None:
    async with memory_app() as app, serving(app) as http:

        async def locked() -> Any:
            raise StoreError("sqlite:////srv/jobs.db: database is locked")

        monkeypatch.setattr(app.state.dashboard.client, "stats", locked)
        answer = await http.get("/api/stats")
        assert answer.status_code == 503
        assert answer.json() == {
            "error": "the store failed: sqlite:////srv/jobs.db: database is locked"
        }
        assert (await http.get("/api/jobs")).status_code == 200  # the others go on
        assert app.state.dashboard.health.down is None


async def test_healthz_says_ok_for_a_store_that_answers(env: Env) -> None:
    assert (await env.http.get("/healthz")).json() == {"status": "ok", "read_only": False}
    assert env.app.state.dashboard.health.down is None


# ── 9. a store that does not exist ─────────────────────────────────────
def web(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SCRIPT, "web", "--port", "0", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def one_error_line(done: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("jobsched: error: ")
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    for text in expected:
        assert text in done.stderr, done.stderr


@pytest.mark.slow
def test_jobsched_web_creates_no_sqlite_file_for_a_typo(tmp_path: Path) -> None:
    typo = tmp_path / "jbos.db"
    one_error_line(web("--store", f"sqlite:///{typo}"), str(typo), "no such file")
    assert not typo.exists()


@pytest.fixture
def missing_schema() -> Iterator[tuple[str, str]]:
    dsn = base_dsn()
    schema = "t_web_typo_" + Path(__file__).stem[-4:]

    def drop() -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

    drop()
    try:
        yield with_query(dsn, schema=schema), schema
    finally:
        drop()


@pytest.mark.slow
def test_jobsched_web_creates_no_postgresql_schema_for_a_typo(
    missing_schema: tuple[str, str],
) -> None:
    url, schema = missing_schema
    one_error_line(web("--store", url), f"schema {schema!r} does not exist")
    with psycopg.connect(base_dsn()) as conn:
        found = conn.execute(
            "SELECT 1 FROM information_schema.schemata WHERE schema_name = %s", [schema]
        ).fetchall()
    assert found == []


@pytest.mark.slow
def test_jobsched_web_refuses_a_bad_allowed_host(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    BlockingClient(url).open().close()
    one_error_line(web("--store", url, "--allowed-host", "jobs.example.com:80"), "--allowed-host")


@pytest.mark.slow
def test_jobsched_web_answers_its_own_address_and_allowed_hosts_only(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    BlockingClient(url).open().close()
    proc = subprocess.Popen(
        [SCRIPT, "web", "--store", url, "--port", "0", "--allowed-host", "jobs.example.com"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("jobsched web: http://127.0.0.1:"), line
        base = line.split()[2]
        with httpx.Client(base_url=base, timeout=30) as http:
            assert http.get("api/jobs").status_code == 200  # Host: 127.0.0.1:PORT
            rebound = http.get("api/jobs", headers={"Host": "rebind.attacker.example:8765"})
            assert rebound.status_code == 400 and "jobs" not in rebound.json()
            for host in ("jobs.example.com", "localhost", "127.0.0.2:80", "[::1]:8000"):
                assert http.get("api/jobs", headers={"Host": host}).status_code == 200, host
            # Another address of the machine is not the one it listens on.
            assert http.get("api/jobs", headers={"Host": "192.168.1.5"}).status_code == 400
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0


@pytest.mark.slow
def test_jobsched_web_checks_the_store_without_reading_its_jobs(tmp_path: Path) -> None:
    """The check that the store exists reads no job: a big store starts as fast as
    a small one, and a hand-changed row is a page's problem, not the server's."""
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    with BlockingClient(url, plugins=plugins()) as client:
        client.submit(Echo("one"), delay=3600)
    with contextlib.closing(sqlite3.connect(tmp_path / "jobs.db")) as conn:
        conn.execute("UPDATE jobsched_shared_jobs SET args = 'nope'")
        conn.commit()
    proc = subprocess.Popen(
        [SCRIPT, "web", "--store", url, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("jobsched web: http://"), line
        with httpx.Client(base_url=line.split()[2], timeout=30) as http:
            assert http.get("healthz").json()["status"] == "ok"
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0
