"""`create_app`: the dashboard as one Starlette application."""

from __future__ import annotations

import contextlib
import importlib.util
import math
import traceback
from collections.abc import AsyncIterator, Iterable
from typing import Any
from urllib.parse import parse_qs

import structlog
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
)
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from jobsched import Client, LocalClient, OperatorAPI, PluginManager

from ._access import Access, Attempt, Authorize, Identify, log_attempt
from ._api import api_routes, error_response
from ._auth import (
    CSRF_FIELD,
    CSRF_HEADER,
    NO_CSRF,
    READ_ONLY,
    SESSION_TTL,
    Auth,
    client_address,
    cookie_path,
)
from ._events import events
from ._health import StoreUnavailable
from ._http import BodyLimit, HostCheck, check_host_pattern, wants_json
from ._openapi import openapi
from ._pages import page_routes
from ._state import STATIC, Dashboard, dashboard, make_templates

logger = structlog.get_logger("jobsched.web")

#: The one line a client gets for an unexpected error (the details go to the log).
INTERNAL_ERROR = "internal error: the server logged the details"
#: The most frames of an unexpected error's traceback the log shows (the innermost).
TRACEBACK_FRAMES = 12
#: The most lines (the last ones) and characters per line of that traceback:
#: a chain of exceptions, or a message holding a job's 50 MB argument, is
#: still one bounded log entry.
TRACEBACK_LINES = 60
TRACEBACK_LINE_CHARS = 1000
#: What ``/login`` says under ``create_app(authorize=...)``.
HOST_SIGN_IN = "this dashboard has no login of its own: the app it is part of signs you in"
INTERNAL_ERROR_PAGE = (
    "<!doctype html><title>Internal error · jobsched</title>"
    "<h1>Internal error</h1><p>The server logged the details.</p>"
)


def create_app(
    store_url: str | None = None,
    *,
    token: str | None = None,
    scheduler: Any = None,
    client: OperatorAPI | None = None,
    plugins: PluginManager | None = None,
    allowed_hosts: Iterable[str] | None = None,
    session_ttl: float = SESSION_TTL,
    authorize: Authorize | None = None,
    identify: Identify | None = None,
) -> Starlette:
    """The dashboard and its JSON API as an ASGI application.

    Give exactly one of: `store_url`, a shared store (``postgresql://...``,
    ``sqlite:///...``) for which the app opens a `jobsched.Client` when it
    starts and closes it when it stops; `scheduler`, a running in-process
    `jobsched.JobScheduler` (wrapped in a `jobsched.LocalClient`); or
    `client`, a `Client` or `LocalClient` the caller opens and closes (open
    whenever requests come: a host app's lifespan, docs/web.md).

    `token` allows actions (retry, cancel, pause, ...) to requests that
    present it (``Authorization: Bearer TOKEN``, or the session cookie of
    ``POST /login``); without it the dashboard is read-only. `plugins` gives
    the job types of the client `store_url` opens (and those the schedules
    page offers to schedule), the prometheus plugin of ``/metrics`` and the
    triggers the schedules page previews (default: the scheduler's plugins
    for `scheduler`, else the installed plugins). Mount it anywhere:
    ``Mount("/jobs", app=create_app(...))``.

    `allowed_hosts` are the hosts the app answers to (the ``Host`` header):
    names (``jobs.example.com``; ``*.example.com`` for every name under
    one), IP addresses and networks (``10.0.0.0/8``); with them, a request
    for another host is refused with 400 (a DNS-rebinding page's). None (the
    default) checks no Host: the app is mounted in one that does. A session
    of ``/login`` lasts `session_ttl` seconds (default 12 hours).

    `authorize` hands every action to the host app instead of the token:
    ``authorize(request, action, ids)`` (a function or a coroutine function)
    returns True to allow `action` (a stable name such as ``"job.retry"``,
    docs/web.md) on `ids` (the job, schedule or queue ids it touches), False
    to refuse it (403), or raises Starlette's ``HTTPException`` with a 4xx
    status to refuse with that one. A request another site's page sends
    (``Sec-Fetch-Site``, ``Origin``) is refused before it is asked. It
    excludes `token`: the dashboard's own login is off. `identify(request)`
    names who a request is, for the audit log (``jobsched.web.audit``) and
    the pages (default: the token or login session; under `authorize`, an
    authenticated ``request.user``'s ``display_name``).
    """
    given = [
        name
        for name, v in (("store_url", store_url), ("scheduler", scheduler), ("client", client))
        if v is not None
    ]
    if len(given) != 1:
        raise TypeError(
            "create_app needs exactly one of store_url, scheduler or client, "
            f"got {', '.join(given) or 'none'}"
        )
    if authorize is not None and token is not None:
        raise TypeError(
            "create_app takes token= or authorize=, not both: an authorize hook decides "
            "every action itself (it may check a Bearer token of its own)"
        )
    hosts = None if allowed_hosts is None else [check_host_pattern(h) for h in allowed_hosts]
    if scheduler is not None:
        client = LocalClient(scheduler)
        if plugins is None:  # the job types it runs are the ones the pages offer
            plugins = scheduler.plugins
    auth = Auth(token, session_ttl=session_ttl)
    board = Dashboard(
        client=client,
        auth=auth,
        templates=make_templates(),
        plugins=plugins,
        access=Access(auth, authorize, identify),
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if store_url is None:
            yield
            return
        async with Client(store_url, plugins=plugins) as opened:
            board.opened = opened
            try:
                yield
            finally:
                board.opened = None

    app = Starlette(
        routes=routes(),
        lifespan=lifespan,
        exception_handlers={HTTPException: _http_error},
    )
    app.state.dashboard = board
    # The last added runs first: the Host, then the body's size, then the app.
    app.add_middleware(_NoTracebacks)
    app.add_middleware(BodyLimit)
    if hosts is not None:
        app.add_middleware(HostCheck, allowed=hosts)
    return app


def routes() -> list[BaseRoute]:
    """Every route of the app: the JSON API, the events, the login, the pages."""
    return [
        *api_routes(),
        Route("/api/events", events, methods=["GET"], name="events"),
        Route("/api/openapi.json", openapi, methods=["GET"], name="openapi"),
        Route("/metrics", metrics, methods=["GET"], name="metrics"),
        Route("/login", login_page, methods=["GET"], name="login"),
        Route("/login", login, methods=["POST"], name="login_post"),
        Route("/logout", logout, methods=["POST"], name="logout"),
        *page_routes(),
        Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
    ]


# ── login ───────────────────────────────────────────────────────────
def _home(request: Request) -> str:
    return cookie_path(request).rstrip("/") + "/"


def _render_login(
    request: Request, *, error: str | None, status: int, headers: dict[str, str] | None = None
) -> Response:
    board = dashboard(request)
    context = {"title": "Log in", "page": "login", "live": False, "error": error}
    return board.templates.TemplateResponse(
        request, "login.html", context, status_code=status, headers=headers
    )


async def login_page(request: Request) -> Response:
    return _render_login(request, error=None, status=200)


async def _form(request: Request) -> dict[str, str] | None:
    """A urlencoded form's fields (the first value of each); None if it has too many.

    Parsed here, so the app needs no multipart parser; the body is at most
    `MAX_BODY` bytes (`BodyLimit`), so parsing it is quick.
    """
    try:
        fields = parse_qs((await request.body()).decode("utf-8", "replace"), max_num_fields=20)
    except ValueError:
        return None
    return {name: values[0] for name, values in fields.items()}


async def login(request: Request) -> Response:
    """``POST /login`` with the form field ``token``: on success, a new session's
    cookies and a redirect to the overview."""
    board = dashboard(request)
    if board.access.host_auth:
        return _render_login(request, error=HOST_SIGN_IN, status=403)
    if board.auth.read_only:
        return _render_login(request, error=READ_ONLY, status=403)
    address = client_address(request)
    wait = board.auth.throttle.wait(address)
    if wait:
        seconds = math.ceil(wait)
        throttled = Attempt(action="session.login", ids=(), who=None, reason="throttled")
        log_attempt(request, throttled, status=429)
        return _render_login(
            request,
            error=f"too many wrong tokens from your address: try again in {seconds} s",
            status=429,
            headers={"Retry-After": str(seconds)},
        )
    form = await _form(request)
    if form is None:
        return _render_login(request, error="the form has too many fields", status=400)
    attempt = Attempt(action="session.login", ids=(), who=None)
    if not board.auth.token_matches(form.get("token", "")):
        board.auth.throttle.failed(address)
        attempt.reason = "wrong token"
        log_attempt(request, attempt, status=401)
        return _render_login(request, error="wrong token", status=401)
    response = RedirectResponse(_home(request), status_code=303)
    attempt.who, attempt.allowed = board.auth.log_in(request, response), True
    log_attempt(request, attempt, status=303)
    return response


async def logout(request: Request) -> Response:
    """``POST /logout``: end the session. A session's logout carries its CSRF
    token (the ``X-CSRF-Token`` header or the form field ``csrf_token``), so
    another site cannot log a browser out."""
    board = dashboard(request)
    session_id = board.auth.session(request)
    if session_id is not None:
        sent = request.headers.get(CSRF_HEADER)
        if sent is None:
            form = await _form(request)
            sent = (form or {}).get(CSRF_FIELD, "")
        if not board.auth.csrf_ok(session_id, sent):
            context = {"title": "Not logged out", "message": NO_CSRF, "page": "error"}
            return board.templates.TemplateResponse(
                request, "error.html", {"live": False, **context}, status_code=403
            )
    response = RedirectResponse(_home(request), status_code=303)
    board.auth.log_out(request, response)
    return response


# ── metrics ─────────────────────────────────────────────────────────
async def metrics(request: Request) -> Response:
    """The store's jobs per status in the Prometheus text format
    (``jobsched_store_jobs{status}``, as ``jobsched status --metrics`` prints)."""
    board = dashboard(request)
    plugin: Any = None
    if importlib.util.find_spec("prometheus_client") is not None:
        plugin = board.plugin_manager().loaded_plugin("prometheus")
    if plugin is None:
        return error_response(
            404, "/metrics needs the prometheus plugin: pip install 'jobsched[prometheus]'"
        )
    try:
        stats = await board.health.call(board.client.stats())
    except StoreUnavailable as exc:
        return error_response(503, str(exc), exc.headers)
    text: str = plugin.store_metrics_text(stats.counts)
    return PlainTextResponse(text, media_type="text/plain; version=0.0.4; charset=utf-8")


# ── errors ──────────────────────────────────────────────────────────
async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own errors (no such route, wrong method) as JSON under /api."""
    assert isinstance(exc, HTTPException)
    if request.url.path.startswith(f"{request.scope.get('root_path', '')}/api/"):
        return JSONResponse({"error": exc.detail}, status_code=exc.status_code, headers=exc.headers)
    return PlainTextResponse(exc.detail, status_code=exc.status_code, headers=exc.headers)


class _NoTracebacks:
    """Log an unexpected exception and answer 500 with one line, never the traceback.

    The log gets the plain traceback (`plain_traceback`), not the local
    variables a rich traceback would print for every frame. (Starlette's
    own handler would re-raise it to the server after answering.)
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except Exception as exc:
            logger.error(
                "web request failed",
                method=scope["method"],
                path=scope["path"][:200],
                exception=plain_traceback(exc),
            )
            if started:
                return  # the answer is under way: the client sees it cut short
            response: Response
            if wants_json(scope):
                response = JSONResponse({"error": INTERNAL_ERROR}, status_code=500)
            else:  # a page: a page saying so, without templates (they may be what failed)
                response = HTMLResponse(INTERNAL_ERROR_PAGE, status_code=500)
            await response(scope, receive, send)


def plain_traceback(exc: BaseException) -> str:
    """`exc`'s traceback as Python prints it: its last frames' lines, never
    their local variables (which hold SQL parameters, job arguments...); at
    most `TRACEBACK_LINES` lines (the last: the error itself) of at most
    `TRACEBACK_LINE_CHARS` characters."""
    text = "".join(
        traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-TRACEBACK_FRAMES)
    )
    lines = [
        line if len(line) <= TRACEBACK_LINE_CHARS else line[:TRACEBACK_LINE_CHARS] + "..."
        for line in text.rstrip().splitlines()
    ]
    if len(lines) > TRACEBACK_LINES:
        kept = TRACEBACK_LINES - 1
        lines = [f"... ({len(lines) - kept} earlier lines left out)", *lines[-kept:]]
    return "\n".join(lines)
