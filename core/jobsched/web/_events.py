"""``GET /api/events``: server-sent events for live pages, from one `StatsFeed`.

A stream starts with a ``stats`` event (the body of ``GET /api/stats``), then
sends another each time the stats change. While nothing changes, a comment
line (``: heartbeat``) every `Dashboard.heartbeat` seconds keeps proxies
from closing the connection and lets the server notice a browser that left.

However many streams are open, the app reads the stats once per change for
all of them: the feed waits for the client's ``wait_for_change``
(PostgreSQL: its NOTIFY; SQLite: a poll; in-process: the scheduler's own
events), reads the stats, and hands the same event to every stream. A burst
of changes (a thousand jobs finishing) is one read per
`Dashboard.min_interval`. Every heartbeat period the feed also looks at the
counts itself, since a change made while the last stats were read wakes no
waiter: a page is never behind by more than one heartbeat.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any, Protocol

import structlog
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from jobsched import OperatorAPI

from ._health import StoreHealth, StoreUnavailable
from ._json import to_json

logger = structlog.get_logger("jobsched.web")

HEARTBEAT = ": heartbeat\n\n"


def sse_event(event: str, data: object) -> str:
    """One server-sent event: its name and its data as one line of JSON."""
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


class Source(Protocol):
    """What the feed reads from (the app's `Dashboard`)."""

    @property
    def client(self) -> OperatorAPI: ...

    health: StoreHealth
    heartbeat: float
    min_interval: float


class StatsFeed:
    """The ``stats`` events of every open stream: one reader of the store for all.

    It runs while some stream is open (`updates`), on the loop of the
    requests, and keeps the latest event for the streams that open later.
    """

    def __init__(self, board: Source) -> None:
        self.board = board
        #: How many times the feed read the stats (one per change, however many streams).
        self.reads = 0
        self._streams = 0
        self._task: asyncio.Task[None] | None = None
        self._latest: tuple[Any, str] | None = None  # (the Stats, its event)
        self._version = 0
        self._published = asyncio.Event()

    @property
    def has_stats(self) -> bool:
        """Whether the feed holds stats a new stream can start with."""
        return self._latest is not None

    async def updates(self) -> AsyncIterator[str]:
        """One stream's events: the latest stats at once, then each change's;
        a heartbeat comment after `Dashboard.heartbeat` seconds without one."""
        self._streams += 1
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="jobsched-web-stats-feed"
            )
        try:
            seen = 0
            while True:
                if self._latest is not None and self._version != seen:
                    seen = self._version
                    yield self._latest[1]
                    continue
                published = self._published
                try:
                    await asyncio.wait_for(published.wait(), self.board.heartbeat)
                except (TimeoutError, asyncio.TimeoutError):
                    yield HEARTBEAT
        finally:
            self._streams -= 1
            if self._streams == 0 and self._task is not None:
                self._task.cancel()  # the last stream left: nobody to read for
                self._task = None
                self._latest = None

    def _publish(self, stats: Any) -> None:
        self._latest = (stats, sse_event("stats", to_json(stats)))
        self._version += 1
        self._published.set()
        self._published = asyncio.Event()

    async def _read(self) -> Any:
        self.reads += 1
        return await self.board.health.call(self.board.client.stats())

    async def _run(self) -> None:
        board = self.board
        changed = True  # the first read is published
        while True:
            try:
                stats = await self._read()
                if changed or self._differs(stats):
                    self._publish(stats)
                if changed:
                    await asyncio.sleep(board.min_interval)  # coalesce a burst of changes
                changed = await board.client.wait_for_change(board.heartbeat)
            except asyncio.CancelledError:
                raise
            except StoreUnavailable:
                # Logged by the health check; the streams keep their heartbeats.
                await asyncio.sleep(board.health.retry_after)
                changed = True
            except Exception as exc:
                logger.error("live stats failed", error=f"{type(exc).__name__}: {exc}")
                await asyncio.sleep(board.health.retry_after)
                changed = True

    def _differs(self, stats: Any) -> bool:
        if self._latest is None:
            return True
        last = self._latest[0]
        return bool((stats.counts, stats.queue_paused) != (last.counts, last.queue_paused))


async def events(request: Request) -> Response:
    board = request.app.state.dashboard
    if board.health.down is not None and not board.feed.has_stats:
        # Nothing to start the stream with: fail fast (the page tries again).
        return JSONResponse({"error": board.health.down}, status_code=503)
    return StreamingResponse(
        board.feed.updates(),
        media_type="text/event-stream",
        # No caching, and no buffering by nginx: each event goes out at once.
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )
