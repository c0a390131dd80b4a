"""Who may change things: the token, the sessions of ``/login`` and the CSRF check.

Reading is open to whoever reaches the app (it binds 127.0.0.1 by default).
A state-changing request is allowed with ``Authorization: Bearer TOKEN``, or
with a session cookie plus its CSRF token. Without a configured token
nothing may change.

A session is one login: ``POST /login`` with the token draws a random id,
kept in this app's memory with its expiry (`Auth.session_ttl`), and sets it
as the ``jobsched_session`` cookie. ``POST /logout`` forgets it, so the
cookie stops working at once; so does restarting the app. The CSRF token of
a session is an HMAC of its id under a key drawn when the app is built (the
double-submit pattern: the ``jobsched_csrf`` cookie, readable by the page,
sent back in ``X-CSRF-Token``; another site can make the browser send the
cookies but cannot read them), so one session's CSRF token is worthless with
another's cookie. Wrong tokens at ``/login`` are limited per client address
(`LoginThrottle`). Every comparison is constant-time.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import secrets
import time
from collections.abc import Callable

import attrs
from starlette.requests import Request
from starlette.responses import Response

#: The session cookie (HttpOnly) and the CSRF cookie (readable by the page).
SESSION_COOKIE = "jobsched_session"
CSRF_COOKIE = "jobsched_csrf"
#: The header a cookie-authenticated POST repeats the CSRF token in (or a
#: form's field of this name, for the logout form).
CSRF_HEADER = "x-csrf-token"
CSRF_FIELD = "csrf_token"
#: How long a session lasts after its login, in seconds.
SESSION_TTL = 12 * 3600.0
#: The most sessions kept at once; past it the oldest is forgotten.
MAX_SESSIONS = 1000

READ_ONLY = "no token configured: start jobsched web with --token"
UNAUTHENTICATED = "authentication required: send Authorization: Bearer TOKEN, or log in at /login"
WRONG_TOKEN = "wrong token"
NO_CSRF = "CSRF check failed: send the jobsched_csrf cookie's value in the X-CSRF-Token header"


@attrs.frozen
class Refusal:
    """Why a request may not change anything: the HTTP status and the reason."""

    status: int
    reason: str
    #: Headers the answer carries (an `authorize` hook's ``Retry-After``...).
    headers: dict[str, str] = attrs.field(factory=dict)


class LoginThrottle:
    """At most `attempts` wrong tokens per client address in `window` seconds.

    Past them every login from that address (the right token too, or a
    guesser could tell) is refused until the window that began with its
    first wrong token ends. At most `max_addresses` are tracked: the oldest
    is forgotten first.
    """

    def __init__(
        self,
        attempts: int = 5,
        window: float = 60.0,
        *,
        max_addresses: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.attempts = attempts
        self.window = window
        self.max_addresses = max_addresses
        self.clock = clock
        self._failures: dict[str, tuple[float, int]] = {}  # address -> (window start, count)

    def wait(self, address: str) -> float:
        """Seconds until `address` may try again (0: it may now)."""
        entry = self._failures.get(address)
        if entry is None:
            return 0.0
        start, count = entry
        left = start + self.window - self.clock()
        if left <= 0:
            del self._failures[address]
            return 0.0
        return left if count >= self.attempts else 0.0

    def failed(self, address: str) -> None:
        """Count a wrong token from `address`."""
        now = self.clock()
        start, count = self._failures.pop(address, (now, 0))
        if start + self.window <= now:
            start, count = now, 0
        self._failures[address] = (start, count + 1)
        while len(self._failures) > self.max_addresses:
            del self._failures[next(iter(self._failures))]


class Auth:
    """The app's token (None: read-only), its sessions and the login throttle."""

    def __init__(
        self,
        token: str | None,
        *,
        session_ttl: float = SESSION_TTL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if token is not None and not token.strip():
            raise ValueError("the web token must not be empty (omit it for a read-only dashboard)")
        if not (session_ttl > 0 and math.isfinite(session_ttl)):
            raise ValueError(f"session_ttl must be a positive number of seconds, got {session_ttl}")
        self._token = None if token is None else token.encode()
        self._key = secrets.token_bytes(32)
        self.session_ttl = session_ttl
        self.clock = clock
        #: Wrong tokens at ``/login``, per client address.
        self.throttle = LoginThrottle(clock=clock)
        # The digest of each live session's id -> when it expires (`clock` time).
        self._sessions: dict[bytes, float] = {}

    @property
    def read_only(self) -> bool:
        """Whether no token is configured, so every action is refused."""
        return self._token is None

    @property
    def sessions(self) -> int:
        """How many sessions are live now."""
        self._forget_expired()
        return len(self._sessions)

    def token_matches(self, given: str) -> bool:
        """Whether `given` is the token (constant-time; always False when read-only)."""
        if self._token is None:
            return False
        return hmac.compare_digest(given.encode(), self._token)

    def _digest(self, session_id: str) -> bytes:
        # Sessions are looked up by a keyed digest, so the lookup compares
        # nothing a client chose.
        return hmac.new(self._key, b"session:" + session_id.encode(), hashlib.sha256).digest()

    def csrf_token(self, session_id: str) -> str:
        """The CSRF token of the session `session_id`."""
        return hmac.new(self._key, b"csrf:" + session_id.encode(), hashlib.sha256).hexdigest()

    def session(self, request: Request) -> str | None:
        """The id of the live session `request`'s cookie names, or None."""
        cookie = request.cookies.get(SESSION_COOKIE)
        if self._token is None or not cookie:
            return None
        digest = self._digest(cookie)
        expires = self._sessions.get(digest)
        if expires is None:
            return None
        if expires <= self.clock():
            del self._sessions[digest]
            return None
        return cookie

    def logged_in(self, request: Request) -> bool:
        """Whether the request carries the cookie of a live session."""
        return self.session(request) is not None

    def page_csrf_token(self, request: Request) -> str:
        """The CSRF token the pages send back: the request's session's ("" without one)."""
        session_id = self.session(request)
        return "" if session_id is None else self.csrf_token(session_id)

    def csrf_ok(self, session_id: str, sent: str) -> bool:
        """Whether `sent` is the CSRF token of the session (constant-time)."""
        return hmac.compare_digest(sent.encode(), self.csrf_token(session_id).encode())

    def refusal(self, request: Request) -> Refusal | None:
        """Why `request` may not change state, or None when it may."""
        if self._token is None:
            return Refusal(403, READ_ONLY)
        header = request.headers.get("authorization")
        if header is not None:
            scheme, _, given = header.partition(" ")
            if scheme.lower() == "bearer" and self.token_matches(given.strip()):
                return None
            return Refusal(401, WRONG_TOKEN)
        session_id = self.session(request)
        if session_id is None:
            return Refusal(401, UNAUTHENTICATED)
        if not self.csrf_ok(session_id, request.headers.get(CSRF_HEADER, "")):
            return Refusal(403, NO_CSRF)
        return None

    def session_label(self, session_id: str) -> str:
        """A short name of the session `session_id` for logs: the same for each
        of its requests, and worthless to anyone who reads it (a keyed digest)."""
        return hmac.new(self._key, b"label:" + session_id.encode(), hashlib.sha256).hexdigest()[:12]

    def identity(self, request: Request) -> str | None:
        """Who `request` is: ``"token"`` (it sends the token), ``"session:<label>"``
        (the cookie of a live session, `session_label`), else None."""
        header = request.headers.get("authorization")
        if header is not None:
            scheme, _, given = header.partition(" ")
            ok = scheme.lower() == "bearer" and self.token_matches(given.strip())
            return "token" if ok else None
        session_id = self.session(request)
        return None if session_id is None else f"session:{self.session_label(session_id)}"

    def log_in(self, request: Request, response: Response) -> str:
        """Start a session (the token was checked) and set its cookies on
        `response`; its identity (``"session:<label>"``, as `identity` names it)."""
        self._forget_expired()
        session_id = secrets.token_urlsafe(32)
        self._sessions[self._digest(session_id)] = self.clock() + self.session_ttl
        while len(self._sessions) > MAX_SESSIONS:
            del self._sessions[next(iter(self._sessions))]
        path = cookie_path(request)
        secure = request.url.scheme == "https"
        max_age = math.ceil(self.session_ttl)
        response.set_cookie(
            SESSION_COOKIE,
            session_id,
            max_age=max_age,
            path=path,
            httponly=True,
            samesite="strict",
            secure=secure,
        )
        response.set_cookie(
            CSRF_COOKIE,
            self.csrf_token(session_id),
            max_age=max_age,
            path=path,
            httponly=False,  # the page reads it to send it back in X-CSRF-Token
            samesite="strict",
            secure=secure,
        )
        return f"session:{self.session_label(session_id)}"

    def log_out(self, request: Request, response: Response) -> None:
        """End the request's session (its cookie works no more) and delete the cookies."""
        session_id = self.session(request)
        if session_id is not None:
            self._sessions.pop(self._digest(session_id), None)
        path = cookie_path(request)
        response.delete_cookie(SESSION_COOKIE, path=path)
        response.delete_cookie(CSRF_COOKIE, path=path)

    def _forget_expired(self) -> None:
        now = self.clock()
        for digest in [d for d, expires in self._sessions.items() if expires <= now]:
            del self._sessions[digest]


def cookie_path(request: Request) -> str:
    """The app's own path: where it is mounted (``/jobs``), else ``/``."""
    root: str = request.scope.get("root_path", "")
    return root.rstrip("/") or "/"


def client_address(request: Request) -> str:
    """The address a request came from (as the server saw it), for the login throttle."""
    return request.client.host if request.client is not None else ""
