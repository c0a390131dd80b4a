"""`Reaper`: a shared-mode process's share of the store's retention.

Each worker process expires results past their ``result_ttl`` and purges
the finished jobs older than the scheduler's retention
(`KernelPort.retention`): once at start, then every `REAP_INTERVAL` seconds,
jittered so that a cluster's workers spread out. Never on the claim or
finish path; a store error is logged and the next pass tries again.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from typing import Any

from ..store import SharedStore

#: Seconds between two reaper passes (on average: each wait is jittered ±50 %).
REAP_INTERVAL = 60.0
#: The statuses a purge deletes.
TERMINAL = ("completed", "failed", "timed_out", "cancelled")


class Reaper:
    """Expires results and purges old finished jobs in `store`. `retention`
    returns the seconds finished jobs are kept (None: forever), read at
    each pass; `log` is the process's bound logger."""

    def __init__(self, store: SharedStore, retention: Callable[[], float | None], log: Any) -> None:
        self._store = store
        self._retention = retention
        self._log = log

    async def run(self) -> None:
        """Reap once now, then every `REAP_INTERVAL` seconds (jittered), forever."""
        rng = random.Random()
        while True:
            await self.once()
            await asyncio.sleep(REAP_INTERVAL * (0.5 + rng.random()))

    async def once(self) -> tuple[int, int]:
        """One pass: ``(results expired, jobs purged)``; a store error is
        logged (the next pass tries again) and counts as nothing."""
        retention = self._retention()
        try:
            expired = await self._store.expire_results()
            purged = 0
            if retention is not None:
                purged = await self._store.purge(time.time() - retention, TERMINAL)
        except Exception as exc:
            self._log.error("reaper failed", error=str(exc))
            return 0, 0
        if expired or purged:
            self._log.info("reaped", results_expired=expired, jobs_purged=purged)
        return expired, purged
