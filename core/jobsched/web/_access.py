"""Who may act, and the audit log of every action.

An *action* is a request that changes something: retry a job, pause a
queue, trigger a schedule... Every action's route is an `ActionRoute`, built
by `action_route`: before its endpoint runs, the request is asked about
(`Access.check`) with the action's stable name (``"job.retry"``) and the ids
it touches (its path's values by default); a refused one is answered with
its status and one line (JSON under ``/api``, a page otherwise) and its
endpoint never runs. Whatever happens, one structlog event on the logger
``jobsched.web.audit`` records the attempt: who, the action, the ids, whether
it was allowed, the HTTP status, how many things it acted on, the client's
address.

Who decides is `Access`: by default the app's token (`Auth`: a Bearer
header, or a session of ``/login`` with its CSRF token; read-only without a
token); with ``create_app(authorize=...)`` the host app's hook, after a
cross-origin check that stands in for the CSRF token the dashboard's own
sessions carry.

An endpoint that learns the ids it acts on only once it runs (a bulk action
resolving a filter) asks again with them, before acting: ``await
permit(request, action, ids)``; `acted` records how many it acted on.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

import attrs
import structlog
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ._auth import Auth, Refusal, client_address
from ._http import shown, wants_json

#: The audit log's structlog logger name.
AUDIT_LOGGER = "jobsched.web.audit"
#: The event name of the audit log's entries (logger ``jobsched.web.audit``).
AUDIT_EVENT = "web action"
#: The most ids one audit entry lists (``id_count`` says how many there were),
#: and the most characters of each.
AUDIT_IDS = 100
AUDIT_ID_CHARS = 200

#: ``authorize(request, action, ids)``: True allows the action, False refuses
#: it (403); it may be a coroutine function, and may raise Starlette's
#: `HTTPException` with a 4xx status to refuse with that status and detail.
Authorize = Callable[[Request, str, tuple[str, ...]], "bool | Awaitable[bool]"]
#: ``identify(request)``: who the request is, as the audit log and the pages
#: name them (None: nobody known).
Identify = Callable[[Request], "str | None"]

#: Where an action's request keeps its `Attempt` (``request.state``).
_STATE = "jobsched_action"


class Refused(Exception):
    """The request may not do what it asked: answered with `refusal`'s status and reason."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.reason)
        self.refusal = refusal


@attrs.define
class Attempt:
    """One action's request, as the audit log records it."""

    action: str
    ids: tuple[str, ...]
    who: str | None
    #: How many things it acted on (None: as many as `ids`, if it succeeded).
    acted: int | None = None
    allowed: bool = False
    reason: str | None = None


class Access:
    """Who may act: the token's sessions by default, else the host app's `authorize`."""

    def __init__(
        self,
        auth: Auth,
        authorize: Authorize | None = None,
        identify: Identify | None = None,
    ) -> None:
        self.auth = auth
        self.authorize = authorize
        self.identify = identify

    @property
    def host_auth(self) -> bool:
        """Whether the host app decides (``create_app(authorize=...)``): the
        dashboard's own login is off."""
        return self.authorize is not None

    @property
    def read_only(self) -> bool:
        """Whether every action is refused: no token and no `authorize`."""
        return self.authorize is None and self.auth.read_only

    def identity(self, request: Request) -> str | None:
        """Who `request` is: `identify`'s answer if given; else, with the token,
        ``"token"`` (a Bearer header with the token) or ``"session:<label>"``
        (a login's session, `Auth.session_label`); under an `authorize`, the
        ``display_name`` of an authenticated ``request.user`` (Starlette's
        ``AuthenticationMiddleware``); else None."""
        if self.identify is not None:
            return self.identify(request)
        if self.authorize is None:
            return self.auth.identity(request)
        user = request.scope.get("user")
        if user is not None and getattr(user, "is_authenticated", False):
            name = getattr(user, "display_name", None)
            return str(name) if name else None
        return None

    async def check(self, request: Request, action: str, ids: tuple[str, ...]) -> Refusal | None:
        """Why `request` may not do `action` on `ids`, or None when it may."""
        if self.authorize is None:
            return self.auth.refusal(request)
        crossed = cross_origin(request)
        if crossed is not None:
            return Refusal(403, crossed)
        try:
            answer: Any = self.authorize(request, action, ids)
            if inspect.isawaitable(answer):
                answer = await answer
        except HTTPException as exc:
            if not 400 <= exc.status_code < 500:
                raise
            return Refusal(exc.status_code, str(exc.detail), dict(exc.headers or {}))
        if answer is True:
            return None
        if answer is False:
            who = self.identity(request)
            return Refusal(403, f"not allowed: {action}" + (f" for {who}" if who else ""))
        raise TypeError(
            f"create_app(authorize=...) must return True or False, "
            f"got {type(answer).__name__} for {action}"
        )


def cross_origin(request: Request) -> str | None:
    """Why `request` looks sent by another site's page, or None.

    A browser says where a request comes from (``Sec-Fetch-Site``; older
    ones ``Origin``): an action is allowed from the dashboard's own origin
    (or typed by the user: ``none``), and from clients that are no browser
    (neither header). The same rule as Go's ``CrossOriginProtection``.
    """
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        if site in ("same-origin", "none"):
            return None
        return (
            f"cross-origin request refused (Sec-Fetch-Site: {shown(site)}): "
            "actions come from the dashboard's own pages"
        )
    origin = request.headers.get("origin")
    if origin is None:
        return None
    if urlsplit(origin).netloc.lower() == request.headers.get("host", "").lower():
        return None
    return f"cross-origin request refused: Origin {shown(origin)} is not this dashboard's"


class ActionRoute(Route):
    """A route that changes something: every request is checked and audited first."""

    def __init__(
        self,
        path: str,
        endpoint: Callable[[Request], Awaitable[Response]],
        *,
        name: str,
        action: str,
        ids: Callable[[Request], Iterable[str]] | None = None,
    ) -> None:
        #: The action's stable name (``"job.retry"``), as `authorize` and the audit see it.
        self.action = action
        self.ids_of = ids or path_ids
        super().__init__(path, self._guard(endpoint), methods=["POST"], name=name)

    def _guard(
        self, endpoint: Callable[[Request], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        async def guarded(request: Request) -> Response:
            access: Access = request.app.state.dashboard.access
            attempt = Attempt(action=self.action, ids=(), who=None)
            setattr(request.state, _STATE, attempt)
            try:
                attempt.ids = tuple(self.ids_of(request))
                attempt.who = access.identity(request)
                _refuse(await access.check(request, attempt.action, attempt.ids))
                attempt.allowed = True
                response = await endpoint(request)
            except Refused as exc:
                attempt.allowed, attempt.reason = False, exc.refusal.reason
                response = refusal_response(request, exc.refusal)
            except BaseException:
                log_attempt(request, attempt, status=500)
                raise
            log_attempt(request, attempt, status=response.status_code)
            return response

        guarded.__name__ = getattr(endpoint, "__name__", self.action)
        guarded.__doc__ = endpoint.__doc__
        return guarded


def action_route(
    path: str,
    endpoint: Callable[[Request], Awaitable[Response]],
    *,
    name: str,
    action: str,
    ids: Callable[[Request], Iterable[str]] | None = None,
) -> ActionRoute:
    """``POST path``, an action named `action` on the ids `ids(request)` gives
    (default: the path's values, ``/api/jobs/{job_id}/retry`` -> the job id)."""
    return ActionRoute(path, endpoint, name=name, action=action, ids=ids)


def path_ids(request: Request) -> tuple[str, ...]:
    """The values of the request's path parameters: the ids an action touches."""
    return tuple(str(value) for value in request.path_params.values())


async def permit(request: Request, action: str, ids: Iterable[str]) -> None:
    """Ask again, now for `action` on `ids` (the ids an endpoint resolved,
    such as a bulk action's), before acting: `Refused` if not allowed (the
    route answers the refusal, the endpoint goes no further). The audit entry
    then records this action and these ids. Only inside an `ActionRoute`;
    called from an API handler it runs within the store's deadline."""
    attempt = _attempt(request)
    attempt.action, attempt.ids = action, tuple(ids)
    access: Access = request.app.state.dashboard.access
    _refuse(await access.check(request, action, attempt.ids))


def acted(request: Request, count: int) -> None:
    """Record that the action acted on `count` things (default: each of its ids
    when it succeeds; a pause of what was paused acts on none)."""
    _attempt(request).acted = count


def _attempt(request: Request) -> Attempt:
    attempt = getattr(request.state, _STATE, None)
    if not isinstance(attempt, Attempt):
        raise RuntimeError("permit() and acted() work inside an action's route only (action_route)")
    return attempt


def _refuse(refusal: Refusal | None) -> None:
    if refusal is not None:
        raise Refused(refusal)


def refusal_response(request: Request, refusal: Refusal) -> Response:
    """`refusal` as this request's answer: ``{"error"}`` for the API, a page otherwise."""
    if wants_json(request.scope):
        return JSONResponse(
            {"error": refusal.reason}, status_code=refusal.status, headers=refusal.headers
        )
    context = {"title": "Not allowed", "message": refusal.reason, "page": "error", "live": False}
    page: Response = request.app.state.dashboard.templates.TemplateResponse(
        request, "error.html", context, status_code=refusal.status, headers=refusal.headers
    )
    return page


def log_attempt(request: Request, attempt: Attempt, *, status: int) -> None:
    """The audit log's entry for `attempt`, answered `status`."""
    count: int | None
    if 200 <= status < 300:
        count = len(attempt.ids) if attempt.acted is None else attempt.acted
    else:
        count = 0 if status < 500 else None  # an error: what it did is unknown
    ids = [value[:AUDIT_ID_CHARS] for value in attempt.ids[:AUDIT_IDS]]
    fields: dict[str, Any] = {
        "action": attempt.action,
        "ids": ids,
        "who": attempt.who,
        "allowed": attempt.allowed,
        "status": status,
        "acted": count,
        "client": client_address(request),
    }
    if len(attempt.ids) > AUDIT_IDS:
        fields["id_count"] = len(attempt.ids)
    if attempt.reason is not None:
        fields["reason"] = attempt.reason
    # Looked up per entry, never cached at import: however late the
    # application (or a test's capture_logs) configures structlog, and
    # whether or not it caches loggers, its configuration is the one used.
    audit = structlog.get_logger(AUDIT_LOGGER)
    if attempt.allowed:
        audit.info(AUDIT_EVENT, **fields)
    else:
        audit.warning(AUDIT_EVENT, **fields)
