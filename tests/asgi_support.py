"""What an ASGI server does for an app, without a server: run its lifespan,
hand each request a copy of the lifespan state, and shut it down.

httpx's ASGITransport sends requests only; `served` adds the rest of the
protocol as uvicorn does (the ``lifespan`` scope with a ``state`` dict, and
``scope["state"]`` on every request), so an app's real lifespan runs.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, MutableMapping
from typing import Any

import httpx

Scope = MutableMapping[str, Any]


@contextlib.asynccontextmanager
async def served(app: Any) -> AsyncIterator[tuple[httpx.AsyncClient, dict[str, Any]]]:
    """An httpx client talking to `app` between its lifespan's startup and
    shutdown, and the lifespan state (what the app's lifespan yielded).

    A failed startup raises the app's exception (Starlette re-raises it
    after reporting ``lifespan.startup.failed``); so does a failed shutdown.
    """
    state: dict[str, Any] = {}
    to_app: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    from_app: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": state}
    lifespan = asyncio.create_task(app(scope, to_app.get, from_app.put))
    await to_app.put({"type": "lifespan.startup"})
    started = await _reply(lifespan, from_app)
    if started["type"] != "lifespan.startup.complete":
        await lifespan  # raises the app's error
        raise AssertionError(f"startup failed without an error: {started}")

    async def with_state(scope: Scope, receive: Any, send: Any) -> None:
        await app({**scope, "state": dict(state)}, receive, send)

    try:
        transport = httpx.ASGITransport(app=with_state)
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as http:
            yield http, state
    finally:
        await to_app.put({"type": "lifespan.shutdown"})
        stopped = await _reply(lifespan, from_app)
        await lifespan
        assert stopped["type"] == "lifespan.shutdown.complete", stopped


async def _reply(lifespan: asyncio.Task[None], from_app: asyncio.Queue[dict[str, Any]]) -> Any:
    """The app's next lifespan message (or its error, if it ends without one)."""
    reply = asyncio.ensure_future(from_app.get())
    await asyncio.wait([reply, lifespan], timeout=60, return_when=asyncio.FIRST_COMPLETED)
    if not reply.done():
        reply.cancel()
        if lifespan.done():
            lifespan.result()  # the app's error
        raise AssertionError("the app's lifespan neither replied nor ended within 60 s")
    return reply.result()
