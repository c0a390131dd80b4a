"""Whether the store answers: ``/healthz``, and failing fast while it does not.

Every request's store work gets `StoreHealth.timeout` seconds. A request
that runs out of them (PostgreSQL unreachable: a lost connection is otherwise
retried for about 50 s, per request) marks the store down: for the next
`StoreHealth.retry_after` seconds every request is answered 503 at once,
without waiting on the store. After that one request tries the store again;
``/healthz`` always does, with the shorter `StoreHealth.probe_timeout`, and
says whether it answered. A `StoreError` (a SQLite file locked past its
timeout) is a 503 for its own request only: the store did answer. A
`StoreOwnedError` (an action on a file ``jobsched run`` holds) is the
request's answer, for the endpoint to give (409).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn, TypeVar

import structlog

from jobsched import StoreError
from jobsched.store import StoreOwnedError

logger = structlog.get_logger("jobsched.web")

T = TypeVar("T")


class StoreUnavailable(Exception):
    """The store did not answer (or is known not to): answered 503 with this message."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        #: Seconds until the app tries the store again.
        self.retry_after = retry_after

    @property
    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(max(1, math.ceil(self.retry_after)))}


class StoreHealth:
    """The store's state as the app's requests found it, and the deadline they get."""

    def __init__(
        self,
        *,
        timeout: float = 10.0,
        probe_timeout: float = 2.0,
        retry_after: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        #: Seconds a request's store work may take.
        self.timeout = timeout
        #: Seconds ``/healthz`` waits for the store.
        self.probe_timeout = probe_timeout
        #: Seconds requests are refused at once after the store failed one.
        self.retry_after = retry_after
        self.clock = clock
        #: Why the store is down (None: it answered the last request).
        self.down: str | None = None
        self._retry_at = 0.0

    async def call(self, work: Awaitable[T]) -> T:
        """`work` (a request's store calls) within `timeout`; `StoreUnavailable`
        when the store is down or fails it."""
        now = self.clock()
        if self.down is not None:
            if now < self._retry_at:
                _close(work)
                raise StoreUnavailable(self.down, self._retry_at - now)
            # This request tries the store; the others keep failing fast meanwhile.
            self._retry_at = now + self.timeout + self.retry_after
        return await self._run(work, self.timeout)

    async def probe(self, check: Awaitable[Any]) -> str | None:
        """Run `check` (a cheap store call) within `probe_timeout`, whatever the
        state; None if the store answered, else why not."""
        try:
            await self._run(check, self.probe_timeout)
        except StoreUnavailable as exc:
            return str(exc)
        return None

    async def _run(self, work: Awaitable[T], timeout: float) -> T:
        try:
            result = await asyncio.wait_for(work, timeout)
        except (TimeoutError, asyncio.TimeoutError):
            self._failed(f"the store did not answer within {timeout:g} s")
        except StoreOwnedError:
            raise
        except StoreError as exc:
            # An answer, if a failed one (a locked file, a row it cannot read):
            # this request's, and no reason to fail the others.
            raise StoreUnavailable(f"the store failed: {_one_line(str(exc))}", 0) from None
        if self.down is not None:
            logger.warning("store answers again")
            self.down = None
        return result

    def _failed(self, why: str) -> NoReturn:
        if self.down is None:
            logger.warning("store unavailable: requests fail fast", error=why)
        self.down = why
        self._retry_at = self.clock() + self.retry_after
        raise StoreUnavailable(why, self.retry_after)


def _close(work: Awaitable[Any]) -> None:
    """Discard a coroutine that will not run (no "never awaited" warning)."""
    close = getattr(work, "close", None)
    if callable(close):
        close()


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= 300 else line[:300] + "…"
