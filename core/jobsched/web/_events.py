"""``GET /api/events``: server-sent events for live pages.

The stream starts with a ``stats`` event (the body of ``GET /api/stats``),
then sends another each time the client's ``wait_for_change`` says some job
may have changed (PostgreSQL: its NOTIFY; SQLite: a poll; in-process: the
scheduler's own events). While nothing changes, a comment line
(``: heartbeat``) every `Dashboard.heartbeat` seconds keeps proxies from
closing the connection and lets the server notice a browser that left; a
heartbeat that finds the counts changed (a change made while the last event
was read) sends a ``stats`` event instead. A
burst of changes (a thousand jobs finishing) is one event per
`Dashboard.min_interval`, not one store query per job and browser.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from ._json import to_json
from ._state import Dashboard, dashboard


def sse_event(event: str, data: object) -> str:
    """One server-sent event: its name and its data as one line of JSON."""
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


async def _stream(board: Dashboard) -> AsyncIterator[str]:
    stats = await board.client.stats()
    yield sse_event("stats", to_json(stats))
    while True:
        if await board.client.wait_for_change(board.heartbeat):
            stats = await board.client.stats()
            yield sse_event("stats", to_json(stats))
            await asyncio.sleep(board.min_interval)  # coalesce a burst of changes
            continue
        # A change made while the last event was read and sent wakes no
        # waiter (`wait_for_change` sees changes made after it began): a
        # heartbeat looks again, so a page is never behind by more than one.
        now = await board.client.stats()
        if (now.counts, now.queue_paused) != (stats.counts, stats.queue_paused):
            stats = now
            yield sse_event("stats", to_json(stats))
        else:
            yield ": heartbeat\n\n"


async def events(request: Request) -> Response:
    board = dashboard(request)
    return StreamingResponse(
        _stream(board),
        media_type="text/event-stream",
        # No caching, and no buffering by nginx: each event goes out at once.
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )
