"""`create_app`: the dashboard as one Starlette application."""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import AsyncIterator
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

from jobsched import Client, LocalClient, PluginManager

from ._api import api_routes, error_response
from ._auth import READ_ONLY, Auth, cookie_path
from ._events import events
from ._openapi import openapi
from ._pages import page_routes
from ._state import STATIC, Dashboard, dashboard, make_templates

logger = structlog.get_logger("jobsched.web")

#: The one line a client gets for an unexpected error (the details go to the log).
INTERNAL_ERROR = "internal error: the server logged the details"
INTERNAL_ERROR_PAGE = (
    "<!doctype html><title>Internal error · jobsched</title>"
    "<h1>Internal error</h1><p>The server logged the details.</p>"
)


def create_app(
    store_url: str | None = None,
    *,
    token: str | None = None,
    scheduler: Any = None,
    client: Any = None,
    plugins: PluginManager | None = None,
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
    the job types of the client `store_url` opens, the prometheus plugin of
    ``/metrics`` and the triggers the schedules page previews (default: the
    installed plugins). Mount it anywhere: ``Mount("/jobs", app=create_app(...))``.
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
    if scheduler is not None:
        client = LocalClient(scheduler)
    board = Dashboard(client=client, auth=Auth(token), templates=make_templates(), plugins=plugins)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if store_url is None:
            yield
            return
        async with Client(store_url, plugins=plugins) as opened:
            board.client = opened
            try:
                yield
            finally:
                board.client = None

    app = Starlette(
        routes=routes(),
        lifespan=lifespan,
        exception_handlers={HTTPException: _http_error},
    )
    app.state.dashboard = board
    app.add_middleware(_NoTracebacks)
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


def _render_login(request: Request, *, error: str | None, status: int) -> Response:
    board = dashboard(request)
    context = {"title": "Log in", "page": "login", "live": False, "error": error}
    return board.templates.TemplateResponse(request, "login.html", context, status_code=status)


async def login_page(request: Request) -> Response:
    return _render_login(request, error=None, status=200)


async def login(request: Request) -> Response:
    """``POST /login`` with the form field ``token``: on success, the session
    cookies and a redirect to the overview."""
    board = dashboard(request)
    if board.auth.read_only:
        return _render_login(request, error=READ_ONLY, status=403)
    # A urlencoded form: parsed here, so the app needs no multipart parser.
    form = parse_qs((await request.body()).decode("utf-8", "replace"))
    given = form.get("token", [""])[0]
    if not board.auth.token_matches(given):
        return _render_login(request, error="wrong token", status=401)
    response = RedirectResponse(_home(request), status_code=303)
    board.auth.log_in(request, response)
    return response


async def logout(request: Request) -> Response:
    response = RedirectResponse(_home(request), status_code=303)
    Auth.log_out(request, response)
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
    stats = await board.client.stats()
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

    (Starlette's own handler would re-raise it to the server after answering.)
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
        except Exception:
            logger.exception("web request failed", method=scope["method"], path=scope["path"])
            if started:
                return  # the answer is under way: the client sees it cut short
            response: Response
            if _wants_json(scope):
                response = JSONResponse({"error": INTERNAL_ERROR}, status_code=500)
            else:  # a page: a page saying so, without templates (they may be what failed)
                response = HTMLResponse(INTERNAL_ERROR_PAGE, status_code=500)
            await response(scope, receive, send)


def _wants_json(scope: Scope) -> bool:
    """Whether the request is one of the API's (JSON) rather than a page's."""
    path = scope["path"].removeprefix(scope.get("root_path", ""))
    return path.startswith("/api/") or path in ("/healthz", "/metrics")
