"""`AttemptHistory`: what a shared-mode process counts of the attempts it ends.

Each attempt that ends here is folded in memory (`jobsched.store.HistoryFold`:
per 5-minute bucket, queue and job type, with a duration histogram): a dict
update on the outcome path, no I/O. `flush` hands the fold to the store in
one call (`HistoryRole.add_history`); `SharedBackend` calls it on its
renewer's cadence (after the heartbeat, every ``lease_seconds / 3``) and when
it closes, so the store's history lags by at most that interval.
"""

from __future__ import annotations

import time
from typing import Any

from ..store import HistoryFold, HistoryRole


class AttemptHistory:
    """The history of one process's attempts, on its way to the store."""

    def __init__(self, store: HistoryRole, log: Any) -> None:
        self._store = store
        self._log = log
        self.fold = HistoryFold()
        # The stored type of each job claimed here and not ended yet.
        self._types: dict[str, str] = {}

    def claimed(self, job_id: str, type_name: str) -> None:
        """A claimed job of stored type `type_name` is held here."""
        self._types[job_id] = type_name

    def ended(self, job_id: str, queue: str, completed: bool, seconds: float) -> None:
        """An attempt of a held job ended now after `seconds`: completed, or
        failed (raised or timed out)."""
        self.fold.add(time.time(), queue, self._types.get(job_id, "?"), completed, seconds)

    def forget(self, job_id: str) -> None:
        """The job is no longer held here (its outcome is on its way)."""
        self._types.pop(job_id, None)

    async def flush(self) -> None:
        """Hand the attempts ended since the last call to the store, in one
        call (never raises: what the store refuses is folded in again and
        goes with the next call)."""
        if not self.fold:
            return
        rows = self.fold.take()
        try:
            await self._store.add_history(rows)
        except Exception as exc:
            self.fold.merge(rows)
            self._log.warning("could not write the throughput history", error=str(exc))
