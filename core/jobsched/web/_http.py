"""What every request passes before the app sees it: the Host check and the body limit.

Both are plain ASGI middleware answering with the app's own error shape
(`error_answer`): ``{"error": "one line"}`` under ``/api`` and for
``/healthz`` and ``/metrics``, one line of text for a page.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: The largest request body the app reads (the login form and the API's POSTs
#: need a few hundred bytes at most).
MAX_BODY = 64 * 1024
#: The most characters of a client's value an error message repeats.
SHOWN = 40


def shown(value: str) -> str:
    """`value` quoted for an error message, cut to `SHOWN` characters (and its length said)."""
    if len(value) <= SHOWN:
        return repr(value)
    return f"{value[:SHOWN]!r}… ({len(value)} characters)"


def wants_json(scope: Scope) -> bool:
    """Whether the request is one of the API's (JSON) rather than a page's."""
    path = scope["path"].removeprefix(scope.get("root_path", ""))
    return path.startswith("/api/") or path in ("/healthz", "/metrics")


def error_answer(scope: Scope, status: int, message: str, **headers: str) -> Response:
    """The app's error for this request: JSON under the API, text for a page."""
    if wants_json(scope):
        return JSONResponse({"error": message}, status_code=status, headers=headers)
    return PlainTextResponse(message, status_code=status, headers=headers)


class BodyLimit:
    """Refuse a request body over `limit` bytes with 413, before the app reads it.

    A ``Content-Length`` over the limit is refused at once, nothing read; a
    body sent without one (chunked) is counted as it arrives and refused
    when it passes the limit, so the app never holds more than `limit` bytes.
    """

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY) -> None:
        self.app = app
        self.limit = limit

    def _too_large(self) -> str:
        return f"request body too large: this app reads at most {self.limit} bytes"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length")
        if declared is not None:
            if not declared.strip().isdigit():
                answer = error_answer(scope, 400, f"Content-Length {shown(declared)} is not a size")
                await answer(scope, receive, send)
                return
            if int(declared) > self.limit:
                await error_answer(scope, 413, self._too_large())(scope, receive, send)
                return
        received = 0

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    # Starlette's exception middleware answers it (413) with the
                    # app's handler; the rest of the body is never read.
                    raise HTTPException(413, self._too_large())
            return message

        await self.app(scope, counted, send)


class HostCheck:
    """Answer only requests whose ``Host`` header names this app (DNS rebinding).

    A page on another site whose name an attacker points at 127.0.0.1 makes
    the browser send that name as the Host, so it is refused (400). Allowed
    are the entries of `allowed`: host names (``jobs.example.com``, or
    ``*.example.com`` for every name under example.com), IP addresses
    (``127.0.0.1``, ``::1``) and networks (``10.0.0.0/8``; ``0.0.0.0/0`` and
    ``::/0`` for any address). A request without a Host is refused.
    """

    def __init__(self, app: ASGIApp, allowed: Iterable[str]) -> None:
        self.app = app
        self.names: set[str] = set()
        self.networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
        for entry in allowed:
            network = _network(entry)
            if network is not None:
                self.networks.append(network)
            else:
                self.names.add(check_host_pattern(entry))

    def allows(self, host: str) -> bool:
        """Whether the Host header value `host` (with or without a port) is allowed."""
        name = host_name(host)
        if name is None:
            return False
        try:
            address = ipaddress.ip_address(name)
        except ValueError:
            return name in self.names or any(
                pattern.startswith("*.") and name.endswith(pattern[1:]) for pattern in self.names
            )
        return any(address in network for network in self.networks)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        host = Headers(scope=scope).get("host", "")
        if self.allows(host):
            await self.app(scope, receive, send)
            return
        message = (
            f"Host {shown(host)} is not a name this dashboard answers to "
            "(allow it with jobsched web --allowed-host NAME or create_app(allowed_hosts=...))"
        )
        await error_answer(scope, 400, message)(scope, receive, send)


def check_host_pattern(pattern: str) -> str:
    """`pattern` lower-cased: a host name (``jobs.example.com``, ``*.example.com``),
    an IP address or a network (``10.0.0.0/8``); a `ValueError` naming it otherwise."""
    if _network(pattern) is not None:
        return pattern.strip()
    name = pattern.strip().lower()
    bare = name[2:] if name.startswith("*.") else name
    if not bare or any(c in bare for c in "*/:@ []") or bare.startswith(".") or ".." in bare:
        raise ValueError(
            f"allowed host {pattern!r} is not a host name (such as jobs.example.com, or "
            "*.example.com for every name under it; no port), an IP address or a network"
        )
    return name


def bound_hosts(host: str) -> list[str]:
    """What a server listening on `host` answers to besides the names it is given:
    that address; all of this machine's for 0.0.0.0 or ::; every loopback
    address and ``localhost`` for a loopback one (a name: itself)."""
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return [host]
    if address.is_unspecified:
        return ["0.0.0.0/0", "::/0", "localhost"]
    if address.is_loopback:
        return ["127.0.0.0/8", "::1", "localhost"]
    return [str(address)]


def host_name(host: str) -> str | None:
    """The name or address in a Host header value, lower-cased and without
    its port (``[::1]:8000`` -> ``::1``); None for an empty or malformed one."""
    host = host.strip().lower()
    if host.startswith("["):
        name, closed, rest = host[1:].partition("]")
        if not closed or (rest and not (rest[:1] == ":" and rest[1:].isdigit())):
            return None
        return name if _is_address(name) else None
    name, _, port = host.partition(":")
    if not name or (port and not port.isdigit()):
        return None
    return name


def _network(entry: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    """`entry` as an IP network (an address is a network of one), else None."""
    try:
        return ipaddress.ip_network(entry.strip().strip("[]"), strict=False)
    except ValueError:
        return None


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True
