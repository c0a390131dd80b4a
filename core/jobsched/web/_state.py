"""What every route of the app shares: the client, the auth and the templates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import jinja2
from starlette.requests import Request
from starlette.templating import Jinja2Templates

from jobsched import OperatorAPI, PluginManager, default_plugin_manager

from ._access import Access
from ._auth import Auth
from ._events import StatsFeed
from ._health import StoreHealth
from ._views import install_filters

#: The app's templates and static files, inside the package.
TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"


@attrs.define
class Dashboard:
    """The app's state (``request.app.state.dashboard``; `dashboard` finds it)."""

    #: The operator API (a `jobsched.Client` or a `jobsched.LocalClient`); None
    #: until the app's lifespan opened it (``create_app(store_url)``).
    opened: OperatorAPI | None = attrs.field(alias="client")
    auth: Auth
    templates: Jinja2Templates
    #: Where the prometheus plugin is looked up for ``/metrics`` (None: the
    #: installed plugins, loaded when first asked).
    plugins: PluginManager | None = None
    #: ``/api/events``: seconds between heartbeats while nothing changes, and
    #: the least time between two ``stats`` events (a burst of changes is one event).
    heartbeat: float = 15.0
    min_interval: float = 0.5
    #: Whether the store answers, and how long a request waits for it.
    health: StoreHealth = attrs.Factory(StoreHealth)
    #: Who may act (`auth`'s token by default, or ``create_app(authorize=...)``).
    access: Access = attrs.Factory(lambda self: Access(self.auth), takes_self=True)
    #: The stats every ``/api/events`` stream sends, read once for all of them.
    feed: StatsFeed = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.feed = StatsFeed(self)

    @property
    def client(self) -> OperatorAPI:
        """The operator API the routes call."""
        if self.opened is None:
            raise RuntimeError("the dashboard's client is not open: the app's lifespan opens it")
        return self.opened

    def plugin_manager(self) -> PluginManager:
        if self.plugins is None:
            self.plugins = default_plugin_manager()
        return self.plugins


def dashboard(request: Request) -> Dashboard:
    """The `Dashboard` of the app serving `request`."""
    board: Dashboard = request.app.state.dashboard
    return board


def template_environment() -> jinja2.Environment:
    """The Jinja2 environment of the pages: autoescaping on for ``.html`` templates.

    Every value a template prints is escaped unless marked safe, so a job
    argument such as ``<script>alert(1)</script>`` is shown as text.
    """
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=jinja2.select_autoescape(["html", "htm", "xml", "svg"]),
    )
    install_filters(env)
    return env


def _page_context(request: Request) -> dict[str, Any]:
    """What every template gets besides its own values."""
    board = dashboard(request)
    access = board.access
    return {
        "read_only": access.read_only,
        # The host app signs users in (create_app(authorize=...)): no login
        # of the dashboard's own; the page names who the request is.
        "host_auth": access.host_auth,
        "who": access.identity(request) if access.host_auth else None,
        "logged_in": board.auth.logged_in(request),
        # The session's CSRF token, sent back by live.js in X-CSRF-Token.
        "csrf_token": board.auth.page_csrf_token(request),
        "root": request.scope.get("root_path", "").rstrip("/"),
    }


def make_templates() -> Jinja2Templates:
    """The `Jinja2Templates` of the pages, over `template_environment`."""
    return Jinja2Templates(env=template_environment(), context_processors=[_page_context])
