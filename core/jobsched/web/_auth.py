"""Who may change things: the token, the session cookie and the CSRF check.

Reading is open to whoever reaches the app (it binds 127.0.0.1 by default).
A state-changing request is allowed with ``Authorization: Bearer TOKEN``, or
with the session cookie ``POST /login`` sets plus the CSRF header (the
double-submit pattern: the ``jobsched_csrf`` cookie, readable by the page, sent
back in ``X-CSRF-Token``; another site can make the browser send the cookies
but cannot read them). Without a configured token nothing may change.

The session cookie holds an HMAC of the token under a key drawn when the app
is built, never the token itself: a stolen cookie does not reveal the token,
and restarting the app logs every browser out. Every comparison is
constant-time.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

import attrs
from starlette.requests import Request
from starlette.responses import Response

#: The session cookie (HttpOnly) and the CSRF cookie (readable by the page).
SESSION_COOKIE = "jobsched_session"
CSRF_COOKIE = "jobsched_csrf"
#: The header a cookie-authenticated POST repeats the CSRF cookie's value in.
CSRF_HEADER = "x-csrf-token"

READ_ONLY = "no token configured: start jobsched web with --token"
UNAUTHENTICATED = "authentication required: send Authorization: Bearer TOKEN, or log in at /login"
WRONG_TOKEN = "wrong token"
NO_CSRF = "CSRF check failed: send the jobsched_csrf cookie's value in the X-CSRF-Token header"


@attrs.frozen
class Refusal:
    """Why a request may not change anything: the HTTP status and the reason."""

    status: int
    reason: str


class Auth:
    """The app's token (None: read-only) and the session cookies derived from it."""

    def __init__(self, token: str | None) -> None:
        if token is not None and not token.strip():
            raise ValueError("the web token must not be empty (omit it for a read-only dashboard)")
        self._token = None if token is None else token.encode()
        self._key = secrets.token_bytes(32)

    @property
    def read_only(self) -> bool:
        """Whether no token is configured, so every action is refused."""
        return self._token is None

    def token_matches(self, given: str) -> bool:
        """Whether `given` is the token (constant-time; always False when read-only)."""
        if self._token is None:
            return False
        return hmac.compare_digest(given.encode(), self._token)

    def _session_value(self) -> str:
        assert self._token is not None
        return hmac.new(self._key, self._token, hashlib.sha256).hexdigest()

    def logged_in(self, request: Request) -> bool:
        """Whether the request carries a valid session cookie."""
        cookie = request.cookies.get(SESSION_COOKIE)
        if self._token is None or cookie is None:
            return False
        return hmac.compare_digest(cookie.encode(), self._session_value().encode())

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
        if not self.logged_in(request):
            return Refusal(401, UNAUTHENTICATED)
        cookie = request.cookies.get(CSRF_COOKIE, "")
        sent = request.headers.get(CSRF_HEADER, "")
        if not cookie or not hmac.compare_digest(cookie.encode(), sent.encode()):
            return Refusal(403, NO_CSRF)
        return None

    def log_in(self, request: Request, response: Response) -> None:
        """Set the session and CSRF cookies on `response` (the token was checked)."""
        path = cookie_path(request)
        response.set_cookie(
            SESSION_COOKIE,
            self._session_value(),
            path=path,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        response.set_cookie(
            CSRF_COOKIE,
            secrets.token_urlsafe(32),
            path=path,
            httponly=False,  # the page reads it to send it back in X-CSRF-Token
            samesite="strict",
            secure=request.url.scheme == "https",
        )

    @staticmethod
    def log_out(request: Request, response: Response) -> None:
        """Delete the session and CSRF cookies."""
        path = cookie_path(request)
        response.delete_cookie(SESSION_COOKIE, path=path)
        response.delete_cookie(CSRF_COOKIE, path=path)


def cookie_path(request: Request) -> str:
    """The app's own path: where it is mounted (``/jobs``), else ``/``."""
    root: str = request.scope.get("root_path", "")
    return root.rstrip("/") or "/"
