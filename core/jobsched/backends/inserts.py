"""`Inserts`: the jobs a shared-mode process submits, on their way to the store.

`SharedBackend`'s admit hook describes each submitted job as a row;
`Inserts` writes the rows in batches, one insert per batch (held until the
backend opens: jobs submitted before start() wait for it). It remembers the
stored id of a job whose key the store already had (`resolve`) and which of
this process's submissions are not finished yet (`wait_finished`, for the
scheduler's ``join``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .._batcher import BatchWriter
from .._status import JobStatus
from ..store import NewJob, SharedStore

_TERMINAL_NAMES = frozenset(s.value for s in JobStatus if s.is_terminal)


class Inserts:
    """The submissions of one process: batched inserts, key aliases, and the
    jobs `wait_finished` waits for. `log` is the process's bound logger."""

    def __init__(self, store: SharedStore, log: Any) -> None:
        self._store = store
        self._log = log
        # Written from release() on: jobs submitted before start() wait for it.
        self._writer: BatchWriter[NewJob] = BatchWriter(
            self._write, name="jobsched-inserts", held=True
        )
        self._submitted: set[str] = set()  # this process's submissions, for join()
        #: A submitted job whose key the store already had -> the stored job's id.
        self.aliases: dict[str, str] = {}

    @property
    def busy(self) -> bool:
        """Whether rows are waiting or being written."""
        return self._writer.busy

    async def drain(self) -> None:
        """Return once the rows added so far are written (or refused)."""
        await self._writer.drain()

    def release(self) -> None:
        """Start writing (the store is open): the rows held so far go first."""
        self._writer.release()

    def add(self, row: NewJob) -> None:
        """Queue `row` for the next insert; `wait_finished` waits for its job."""
        self._submitted.add(row.job_id)
        self._writer.add(row)

    def resolve(self, job_id: str) -> str:
        """The stored job's id for the id of a row added here (its key's job's, if
        the store already had the key)."""
        return self.aliases.get(job_id, job_id)

    async def _write(self, batch: list[NewJob]) -> None:
        try:
            stored = await self._store.insert(batch)
            for row, job_id in zip(batch, stored, strict=False):
                if job_id != row.job_id:  # its key was there: resumed, not duplicated
                    self.aliases[row.job_id] = job_id
                    self._submitted.discard(row.job_id)
                    self._submitted.add(job_id)
        except Exception:
            # One bad job (an unknown dependency) must not lose the others.
            for row in batch:
                try:
                    await self._store.insert([row])
                except Exception as exc:
                    self._submitted.discard(row.job_id)
                    self._log.error("job not stored", job_id=row.job_id, error=str(exc))

    def follow(self, job_ids: Iterable[str]) -> None:
        """Make `wait_finished` also wait for these stored jobs."""
        self._submitted.update(job_ids)

    async def wait_finished(self, poll_interval: float) -> None:
        """Wait until every job submitted (or followed) here is terminal in the
        store; call it once the inserts are written."""
        while self._submitted:
            rows = await self._store.jobs(sorted(self._submitted))
            done = {r.job_id for r in rows if r.status in _TERMINAL_NAMES}
            self._submitted -= done
            self._submitted &= {r.job_id for r in rows}
            if self._submitted:
                await self._store.wait_finished(poll_interval)
