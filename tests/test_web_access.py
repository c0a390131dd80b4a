"""Who may act on the dashboard, and the audit log of every action.

`create_app(authorize=...)` hands each action (``"job.retry"``, ``"queue.pause"``
...) with the ids it touches to the host app; without it the token decides, as
before. Every action route is an `ActionRoute` (one choke point), and every
attempt is one structlog event on ``jobsched.web.audit``, captured here with
`structlog.testing.capture_logs`. The decisions are tested on an in-process
scheduler and the ``memory://`` queue; one real action end to end on SQLite
and PostgreSQL.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from structlog.testing import capture_logs

import jobsched.web._app as web_app
from jobsched import JobScheduler, JobStatus, build_job
from jobsched.web import create_app
from jobsched.web._access import AUDIT_EVENT, AUDIT_IDS, ActionRoute, acted, action_route, permit
from web_support import BEARER, TOKEN, Echo, Env, Gate, make_env, plugins, serving

pytestmark = pytest.mark.timeout(120)

#: Every action route of the app: (path, the action's name, the ids it touches).
ACTIONS = [
    ("/api/jobs/J1/retry", "job.retry", ["J1"]),
    ("/api/jobs/J1/cancel", "job.cancel", ["J1"]),
    ("/api/schedules", "schedule.create", []),
    ("/api/schedules/S1/edit", "schedule.edit", ["S1"]),
    ("/api/schedules/S1/pause", "schedule.pause", ["S1"]),
    ("/api/schedules/S1/resume", "schedule.resume", ["S1"]),
    ("/api/schedules/S1/trigger", "schedule.trigger", ["S1"]),
    ("/api/queue/pause", "queue.pause_all", []),
    ("/api/queue/resume", "queue.resume_all", []),
    ("/api/queues/emails/pause", "queue.pause", ["emails"]),
    ("/api/queues/emails/resume", "queue.resume", ["emails"]),
    ("/api/jobs/bulk/retry", "job.bulk", []),
    ("/api/workers/host:12/drain", "worker.drain", ["host:12"]),
    ("/api/workers/host:12/stop", "worker.stop", ["host:12"]),
]


@contextlib.contextmanager
def captured_logs() -> Iterator[list[dict[str, Any]]]:
    """`structlog.testing.capture_logs` from structlog's defaults (every level),
    whatever an earlier test configured (the CLI's ``--log-level warning``,
    cached loggers), and that configuration back afterwards."""
    was_configured, saved = structlog.is_configured(), structlog.get_config()
    structlog.reset_defaults()
    try:
        with capture_logs() as logs, pytest.MonkeyPatch.context() as patch:
            # The app's error logger is a module's: a fresh one sees the capture.
            patch.setattr(web_app, "logger", structlog.get_logger("jobsched.web"))
            yield logs
    finally:
        if was_configured:
            structlog.configure(**saved)
        else:
            structlog.reset_defaults()


def audits(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The audit log's entries among `logs`, without structlog's own keys."""
    return [
        {k: v for k, v in entry.items() if k not in ("event", "log_level")}
        for entry in logs
        if entry.get("event") == AUDIT_EVENT
    ]


class Untouchable:
    """An operator client that fails the test if any endpoint reaches it."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the endpoint ran: it called client.{name}")


class Recorder:
    """An `authorize` hook answering `answer`, recording what it was asked."""

    def __init__(self, answer: Any = True) -> None:
        self.answer = answer
        self.calls: list[tuple[str, tuple[str, ...]]] = []

    def __call__(self, request: Request, action: str, ids: tuple[str, ...]) -> Any:
        self.calls.append((action, ids))
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


async def user_header(request: Request, action: str, ids: tuple[str, ...]) -> bool:
    """Allows alice everything, bob retries only (a coroutine function)."""
    user = request.headers.get("x-user")
    return user == "alice" or (user == "bob" and action == "job.retry")


def x_user(request: Request) -> str | None:
    return request.headers.get("x-user")


@pytest.fixture(params=["memory", "memory-queue"])
async def env(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Env]:
    """The app under ``authorize=user_header`` (who: the X-User header)."""
    async with make_env(
        request.param, request, tmp_path, None, authorize=user_header, identify=x_user
    ) as made:
        yield made


@pytest.fixture(params=["memory", "memory-queue"])
async def token_env(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Env]:
    async with make_env(request.param, request, tmp_path, TOKEN) as made:
        yield made


async def failed_job(env: Env, tmp_path: Path) -> str:
    job_id = await env.submit(Gate(str(tmp_path / "gate")))
    assert (await env.wait(job_id)).status is JobStatus.FAILED
    (tmp_path / "gate").touch()  # a retry succeeds
    return job_id


# ── the choke point ────────────────────────────────────────────────────
def test_every_post_route_is_an_action_route_and_the_table_names_them_all() -> None:
    app = create_app(client=Untouchable())
    posts = {
        route.path: route
        for route in app.routes
        if isinstance(route, Route) and "POST" in (route.methods or ())
    }
    unguarded = sorted(
        path
        for path, route in posts.items()
        if not isinstance(route, ActionRoute) and path not in ("/login", "/logout")
    )
    assert unguarded == [], "POST routes that skip authorize and the audit"
    # A converter (``{worker_id:path}``) is the route's business, not the action's.
    named = {
        re.sub(r":\w+}", "}", route.path): route.action
        for route in posts.values()
        if isinstance(route, ActionRoute)
    }
    tested = {_template(path): action for path, action, _ in ACTIONS}
    assert named == tested, "ACTIONS must list every action route"


def _template(path: str) -> str:
    return (
        path.replace("/J1/", "/{job_id}/")
        .replace("/S1/", "/{schedule_id}/")
        .replace("/emails/", "/{name}/")
        .replace("/host:12/", "/{worker_id}/")
        .replace("/bulk/retry", "/bulk/{action}")
    )


async def test_openapi_names_each_operations_action() -> None:
    app = create_app(client=Untouchable())
    async with serving(app) as http:
        document = (await http.get("/api/openapi.json")).json()
    declared = {
        path: ops["post"]["x-jobsched-action"]
        for path, ops in document["paths"].items()
        if "post" in ops
    }
    assert declared == {_template(path): action for path, action, _ in ACTIONS}


@pytest.mark.parametrize(("path", "action", "ids"), ACTIONS)
async def test_a_refused_action_is_403_audited_and_its_endpoint_never_runs(
    path: str, action: str, ids: list[str]
) -> None:
    refuse = Recorder(False)
    app = create_app(client=Untouchable(), authorize=refuse)
    async with serving(app) as http:
        with captured_logs() as logs:
            answer = await http.post(path, headers={"X-User": "mallory"})
    assert answer.status_code == 403
    assert answer.json() == {"error": f"not allowed: {action}"}
    assert refuse.calls == [(action, tuple(ids))]
    [entry] = audits(logs)
    assert entry == {
        "action": action,
        "ids": ids,
        "who": None,
        "allowed": False,
        "status": 403,
        "acted": 0,
        "client": "127.0.0.1",
        "reason": f"not allowed: {action}",
    }
    assert [e["log_level"] for e in logs if e["event"] == AUDIT_EVENT] == ["warning"]


@pytest.mark.parametrize(("path", "action", "ids"), ACTIONS)
async def test_without_a_token_every_action_stays_refused_as_read_only(
    path: str, action: str, ids: list[str]
) -> None:
    app = create_app(client=Untouchable())
    async with serving(app) as http:
        with captured_logs() as logs:
            answer = await http.post(path, headers=BEARER)
    assert answer.status_code == 403
    assert answer.json()["error"].startswith("no token configured")
    [entry] = audits(logs)
    assert (entry["action"], entry["ids"], entry["allowed"]) == (action, ids, False)


# ── the authorize hook on a real scheduler and memory queue ────────────
async def test_authorize_decides_per_user_and_the_audit_names_them(
    env: Env, tmp_path: Path
) -> None:
    job_id = await failed_job(env, tmp_path)
    with captured_logs() as logs:
        nobody = await env.http.post(f"/api/jobs/{job_id}/retry")
        bob_pauses = await env.http.post("/api/queue/pause", headers={"X-User": "bob"})
        bob_retries = await env.http.post(f"/api/jobs/{job_id}/retry", headers={"X-User": "bob"})
    assert nobody.status_code == 403 and nobody.json() == {"error": "not allowed: job.retry"}
    assert bob_pauses.status_code == 403
    assert bob_pauses.json() == {"error": "not allowed: queue.pause_all for bob"}
    assert not await env.client.queue_paused()
    assert bob_retries.status_code == 200, bob_retries.text
    assert (await env.wait(job_id)).status is JobStatus.COMPLETED
    assert [(e["who"], e["action"], e["ids"], e["allowed"], e["acted"]) for e in audits(logs)] == [
        (None, "job.retry", [job_id], False, 0),
        ("bob", "queue.pause_all", [], False, 0),
        ("bob", "job.retry", [job_id], True, 1),
    ]


@pytest.mark.parametrize("kind", ["memory", "memory-queue"])
async def test_a_bulk_action_is_authorized_on_the_ids_it_selected(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    asked: list[tuple[str, list[str]]] = []

    def bob_retries_in_bulk(request: Request, action: str, ids: tuple[str, ...]) -> bool:
        asked.append((action, sorted(ids)))
        return request.headers.get("x-user") == "bob" and action in ("job.bulk", "job.retry")

    bob = {"X-User": "bob"}
    options = {"authorize": bob_retries_in_bulk, "identify": x_user}
    async with make_env(kind, request, tmp_path, None, **options) as env:
        folders = [tmp_path / str(n) for n in range(3)]
        for folder in folders:
            folder.mkdir()
        ids = sorted([await failed_job(env, folder) for folder in folders])
        with captured_logs() as logs:
            purge = await env.http.post("/api/jobs/bulk/purge", json={"ids": ids}, headers=bob)
            retry = await env.http.post(
                "/api/jobs/bulk/retry", json={"filter": {"status": "failed"}}, headers=bob
            )
    assert purge.status_code == 403, purge.text
    assert purge.json() == {"error": "not allowed: job.purge for bob"}
    assert retry.status_code == 200, retry.text
    assert sorted(retry.json()["job_ids"]) == ids
    assert asked == [("job.bulk", []), ("job.purge", ids), ("job.bulk", []), ("job.retry", ids)]
    assert [(e["action"], sorted(e["ids"]), e["allowed"], e["acted"]) for e in audits(logs)] == [
        ("job.purge", ids, False, 0),
        ("job.retry", ids, True, 3),
    ]


async def test_the_audit_counts_what_an_action_changed(env: Env, tmp_path: Path) -> None:
    alice = {"X-User": "alice"}
    schedule_id = await env.add_schedule("tick")
    with captured_logs() as logs:
        for path in ("/api/queues/emails/pause", "/api/queues/emails/pause"):
            assert (await env.http.post(path, headers=alice)).json()["changed"] in (True, False)
        for path in ("/api/queue/pause", "/api/queue/pause", "/api/queue/resume"):
            assert (await env.http.post(path, headers=alice)).status_code == 200
        for verb in ("pause", "pause", "resume", "trigger"):
            path = f"/api/schedules/{schedule_id}/{verb}"
            assert (await env.http.post(path, headers=alice)).status_code == 200
        unknown = await env.http.post("/api/jobs/no-such-job/cancel", headers=alice)
    assert unknown.status_code == 404
    assert [(e["action"], e["acted"], e["status"]) for e in audits(logs)] == [
        ("queue.pause", 1, 200),
        ("queue.pause", 0, 200),  # it was paused already
        ("queue.pause_all", 1, 200),
        ("queue.pause_all", 0, 200),
        ("queue.resume_all", 1, 200),
        ("schedule.pause", 1, 200),
        ("schedule.pause", 0, 200),
        ("schedule.resume", 1, 200),
        ("schedule.trigger", 1, 200),
        ("job.cancel", 0, 404),  # allowed, but there was nothing to cancel
    ]
    assert all(e["who"] == "alice" and e["allowed"] for e in audits(logs))


async def test_a_cross_origin_action_is_refused_before_authorize_is_asked() -> None:
    allow = Recorder(True)
    async with JobScheduler(plugins=plugins()) as scheduler:
        app = create_app(scheduler=scheduler, authorize=allow)
        async with serving(app) as http:
            with captured_logs() as logs:
                cases = [
                    ({"Sec-Fetch-Site": "cross-site"}, 403),
                    ({"Sec-Fetch-Site": "same-site"}, 403),
                    ({"Origin": "https://evil.example"}, 403),
                    ({"Origin": "null"}, 403),
                    ({"Sec-Fetch-Site": "same-origin", "Origin": "http://testserver"}, 200),
                    ({"Origin": "http://testserver"}, 200),
                    ({}, 200),  # no browser: curl, a script
                ]
                answers = [
                    await http.post("/api/queue/pause", headers=headers) for headers, _ in cases
                ]
    assert [a.status_code for a in answers] == [want for _, want in cases]
    assert answers[0].json()["error"] == (
        "cross-origin request refused (Sec-Fetch-Site: 'cross-site'): "
        "actions come from the dashboard's own pages"
    )
    assert "Origin 'https://evil.example' is not this dashboard's" in answers[2].json()["error"]
    assert len(allow.calls) == 3  # only the requests that passed the check
    assert [e["allowed"] for e in audits(logs)] == [False] * 4 + [True] * 3


async def test_authorize_may_refuse_with_its_own_status_and_headers() -> None:
    hook = Recorder(HTTPException(401, "sign in first", headers={"WWW-Authenticate": "Bearer"}))
    app = create_app(client=Untouchable(), authorize=hook)
    async with serving(app) as http:
        with captured_logs() as logs:
            answer = await http.post("/api/jobs/J1/retry")
    assert answer.status_code == 401 and answer.json() == {"error": "sign in first"}
    assert answer.headers["www-authenticate"] == "Bearer"
    [entry] = audits(logs)
    assert (entry["status"], entry["reason"], entry["allowed"]) == (401, "sign in first", False)


@pytest.mark.parametrize(
    ("answer", "logged"),
    [
        ("yes", "must return True or False, got str for job.retry"),
        (None, "must return True or False, got NoneType for job.retry"),
        (RuntimeError("the user database is down"), "the user database is down"),
    ],
)
async def test_a_broken_authorize_is_a_500_refusing_and_logged(answer: Any, logged: str) -> None:
    app = create_app(client=Untouchable(), authorize=Recorder(answer))
    async with serving(app) as http:
        with captured_logs() as logs:
            result = await http.post("/api/jobs/J1/retry")
    assert result.status_code == 500
    assert result.json() == {"error": "internal error: the server logged the details"}
    [entry] = audits(logs)
    assert (entry["allowed"], entry["status"], entry["acted"]) == (False, 500, None)
    [failure] = [e for e in logs if e["event"] == "web request failed"]
    assert logged in failure["exception"]


def test_token_and_authorize_are_one_or_the_other() -> None:
    with pytest.raises(TypeError, match="token= or authorize=, not both"):
        create_app(client=Untouchable(), token=TOKEN, authorize=Recorder())


async def test_under_authorize_the_pages_name_the_user_and_offer_no_login(env: Env) -> None:
    assert (await env.http.get("/healthz")).json() == {"status": "ok", "read_only": False}
    page = await env.http.get("/", headers={"X-User": "alice"})
    assert page.status_code == 200
    assert '<span class="who" data-testid="who">alice</span>' in page.text
    assert "data-login=" not in page.text and 'href="/login"' not in page.text
    assert "read-only" not in page.text
    login = await env.http.get("/login")
    assert "has no login of its own" in login.text and 'name="token"' not in login.text
    refused = await env.http.post("/login", data={"token": "anything"})
    assert refused.status_code == 403
    assert "the app it is part of signs you in" in refused.text
    assert "jobsched_session" not in refused.headers.get("set-cookie", "")


# ── the default: the token and its sessions, audited ───────────────────
async def test_with_the_token_the_audit_names_the_token_or_the_session(
    token_env: Env, tmp_path: Path
) -> None:
    env = token_env
    with captured_logs() as logs:
        anonymous = await env.http.post("/api/queue/pause")
        wrong = await env.http.post("/api/queue/pause", headers={"Authorization": "Bearer no"})
        bearer = await env.http.post("/api/queue/pause", headers=BEARER)
        bad_login = await env.http.post("/login", data={"token": "wrong"})
        login = await env.http.post("/login", data={"token": TOKEN})
        csrf = env.http.cookies["jobsched_csrf"]
        no_csrf = await env.http.post("/api/queue/resume")
        session = await env.http.post("/api/queue/resume", headers={"X-CSRF-Token": csrf})
    assert [a.status_code for a in (anonymous, wrong, bearer, bad_login, login)] == [
        401,
        401,
        200,
        401,
        303,
    ]
    assert (no_csrf.status_code, session.status_code) == (403, 200)
    entries = audits(logs)
    label = entries[4]["who"]
    assert re.fullmatch(r"session:[0-9a-f]{12}", label)
    assert env.http.cookies["jobsched_session"][:12] not in label  # a digest, not the id
    assert [(e["action"], e["who"], e["allowed"], e["status"]) for e in entries] == [
        ("queue.pause_all", None, False, 401),
        ("queue.pause_all", None, False, 401),
        ("queue.pause_all", "token", True, 200),
        ("session.login", None, False, 401),
        ("session.login", label, True, 303),
        ("queue.resume_all", label, False, 403),
        ("queue.resume_all", label, True, 200),
    ]
    assert entries[5]["reason"].startswith("CSRF check failed")


async def test_throttled_logins_are_audited() -> None:
    app = create_app(client=Untouchable(), token=TOKEN)
    async with serving(app) as http:
        with captured_logs() as logs:
            for _ in range(6):
                await http.post("/login", data={"token": "guess"})
    assert [(e["status"], e["reason"]) for e in audits(logs)] == [(401, "wrong token")] * 5 + [
        (429, "throttled")
    ]


# ── routes that resolve their ids, and pages ───────────────────────────
async def bulk_retry(request: Request) -> Response:
    """A bulk action's shape: the ids are known once the endpoint resolved them."""
    ids = [f"job-{i}" for i in range(int(request.query_params["n"]))]
    await permit(request, "job.retry", ids)
    acted(request, len(ids) - 1)  # one of them had finished meanwhile
    return JSONResponse({"retried": len(ids) - 1})


async def page_action(request: Request) -> Response:
    return JSONResponse({"done": True})


def with_routes(app: Starlette) -> Starlette:
    app.router.routes[:0] = [
        action_route("/api/jobs/bulk/retry", bulk_retry, name="bulk", action="job.retry_many"),
        action_route("/things/{thing_id}/poke", page_action, name="poke", action="thing.poke"),
        Route("/api/outside", bulk_retry, methods=["POST"]),
        action_route(
            "/api/jobs/many/{verb}",
            page_action,
            name="many",
            action="job.many",
            ids=lambda request: request.query_params.getlist("id"),
        ),
    ]
    return app


async def test_a_route_may_name_its_ids_itself() -> None:
    hook = Recorder(True)
    app = with_routes(create_app(client=Untouchable(), authorize=hook))
    async with serving(app) as http:
        with captured_logs() as logs:
            answer = await http.post("/api/jobs/many/retry?id=a&id=b")
    assert answer.json() == {"done": True}
    assert hook.calls == [("job.many", ("a", "b"))]
    [entry] = audits(logs)
    assert (entry["ids"], entry["acted"]) == (["a", "b"], 2)


async def test_an_identify_that_fails_is_a_500_still_audited() -> None:
    def broken(request: Request) -> str | None:
        raise LookupError("no such user table")

    app = create_app(client=Untouchable(), authorize=Recorder(True), identify=broken)
    async with serving(app) as http:
        with captured_logs() as logs:
            answer = await http.post("/api/queue/pause")
    assert answer.status_code == 500
    [entry] = audits(logs)
    assert (entry["who"], entry["allowed"], entry["status"]) == (None, False, 500)


async def test_a_route_that_resolves_its_ids_asks_again_with_them() -> None:
    def only_few(request: Request, action: str, ids: tuple[str, ...]) -> bool:
        return len(ids) <= 3

    asked: list[tuple[str, tuple[str, ...]]] = []

    def recording(request: Request, action: str, ids: tuple[str, ...]) -> bool:
        asked.append((action, ids))
        return only_few(request, action, ids)

    app = with_routes(create_app(client=Untouchable(), authorize=recording))
    async with serving(app) as http:
        with captured_logs() as logs:
            few = await http.post("/api/jobs/bulk/retry?n=3")
            many = await http.post("/api/jobs/bulk/retry?n=150")
    assert few.json() == {"retried": 2}
    assert many.status_code == 403 and many.json() == {"error": "not allowed: job.retry"}
    assert asked[:2] == [("job.retry_many", ()), ("job.retry", ("job-0", "job-1", "job-2"))]
    first, second = audits(logs)
    assert (first["action"], first["ids"], first["acted"]) == (
        "job.retry",
        ["job-0", "job-1", "job-2"],
        2,
    )
    assert second["allowed"] is False and second["id_count"] == 150
    assert len(second["ids"]) == AUDIT_IDS


async def test_permit_outside_an_action_route_is_a_programming_error() -> None:
    app = with_routes(create_app(client=Untouchable(), authorize=Recorder()))
    async with serving(app) as http:
        with captured_logs() as logs:
            answer = await http.post("/api/outside?n=1")
    assert answer.status_code == 500
    [failure] = [e for e in logs if e["event"] == "web request failed"]
    assert "work inside an action's route only" in failure["exception"]


async def test_a_page_action_refused_is_a_page_saying_so() -> None:
    app = with_routes(create_app(client=Untouchable(), authorize=Recorder(False), identify=x_user))
    async with serving(app) as http:
        answer = await http.post("/things/t1/poke", headers={"X-User": "<b>eve</b>"})
    assert answer.status_code == 403
    assert answer.headers["content-type"].startswith("text/html")
    assert "not allowed: thing.poke for &lt;b&gt;eve&lt;/b&gt;" in answer.text


# ── end to end on the SQL stores ───────────────────────────────────────
@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_a_retry_allowed_by_authorize_runs_the_job_again(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    async with make_env(kind, request, tmp_path, None, authorize=user_header) as env:
        job_id = await failed_job(env, tmp_path)
        with captured_logs() as logs:
            refused = await env.http.post(f"/api/jobs/{job_id}/retry", headers={"X-User": "eve"})
            assert refused.status_code == 403
            assert (await env.client.get(job_id)).status is JobStatus.FAILED
            done = await env.http.post(f"/api/jobs/{job_id}/retry", headers={"X-User": "bob"})
        assert done.status_code == 200, done.text
        assert (await env.wait(job_id)).status is JobStatus.COMPLETED
        assert [(e["action"], e["ids"], e["allowed"], e["acted"]) for e in audits(logs)] == [
            ("job.retry", [job_id], False, 0),
            ("job.retry", [job_id], True, 1),
        ]


async def test_reading_is_no_action_and_is_not_audited(token_env: Env) -> None:
    job_id = await token_env.submit(Echo("hi"))
    await token_env.wait(job_id)
    with captured_logs() as logs:
        assert (await token_env.http.get(f"/api/jobs/{job_id}")).status_code == 200
        assert (await token_env.http.get("/jobs")).status_code == 200
    assert audits(logs) == []


# ── docs/web.md ────────────────────────────────────────────────────────
DOC = Path(__file__).resolve().parent.parent / "docs" / "web.md"


async def test_the_authorize_example_of_docs_web_md_works_as_written(tmp_path: Path) -> None:
    [example] = [
        block
        for block in re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
        if "authorize=authorize" in block
    ]
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    namespace: dict[str, Any] = {}
    exec(example.replace("sqlite:///jobs.db", url), namespace)
    alice, bob = {"X-Forwarded-User": "alice"}, {"X-Forwarded-User": "bob"}
    async with serving(namespace["app"]) as http:
        client = namespace["client"]
        job_id = await client.submit(
            build_job("sleep", {"name": "later", "seconds": 0}), delay=3600
        )
        with captured_logs() as logs:
            nobody = await http.post(f"/jobs/api/jobs/{job_id}/cancel")
            bob_pauses = await http.post("/jobs/api/queues/emails/pause", headers=bob)
            bob_cancels = await http.post(f"/jobs/api/jobs/{job_id}/cancel", headers=bob)
            alice_pauses = await http.post("/jobs/api/queues/emails/pause", headers=alice)
        page = await http.get("/jobs/queues", headers=alice)
        assert [a.status_code for a in (nobody, bob_pauses, bob_cancels, alice_pauses)] == [
            403,
            403,
            200,
            200,
        ]
        assert bob_pauses.json() == {"error": "not allowed: queue.pause for bob"}
        assert (await client.get(job_id)).status is JobStatus.CANCELLED
        assert await client.queue_paused("emails")
        assert '<span class="who" data-testid="who">alice</span>' in page.text
    assert [(e["who"], e["action"], e["allowed"]) for e in audits(logs)] == [
        (None, "job.cancel", False),
        ("bob", "queue.pause", False),
        ("bob", "job.cancel", True),
        ("alice", "queue.pause", True),
    ]


@pytest.mark.slow
def test_jobsched_web_prints_the_audit_on_stderr(tmp_path: Path) -> None:
    import json
    import subprocess
    import sys
    import urllib.error
    import urllib.request

    from jobsched import BlockingClient

    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    script = str(Path(sys.executable).parent / "jobsched")
    with BlockingClient(url, plugins=plugins()):
        pass  # the store exists
    proc = subprocess.Popen(
        [script, "web", "--store", url, "--port", "0", "--log-format", "json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={"PATH": "/usr/bin:/bin", "JOBSCHED_WEB_TOKEN": TOKEN},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("jobsched web: http://"), line
        base = line.split()[2]
        for headers, status in ((BEARER, 200), ({"Authorization": "Bearer no"}, 401)):
            request = urllib.request.Request(
                base + "api/queue/pause", method="POST", headers=headers
            )
            try:
                with urllib.request.urlopen(request, timeout=30) as answer:
                    assert answer.status == status
            except urllib.error.HTTPError as exc:
                assert exc.code == status
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    entries = [json.loads(x) for x in err.splitlines() if '"web action"' in x]
    assert [(e["who"], e["allowed"], e["level"]) for e in entries] == [
        ("token", True, "info"),
        (None, False, "warning"),
    ]
    assert entries[0]["action"] == "queue.pause_all" and entries[0]["client"] == "127.0.0.1"
