"""Writing a shared store's outcomes so that none is lost while it could land.

`SharedBackend` gathers the attempts that ended into batches (`OutcomeWriter`,
which batches the held jobs' progress reports too); `write_outcomes` writes
one:

* in one transaction (`SharedStore.finish`) when the store takes it;
* else row by row, so that one outcome the store cannot hold (a value too
  big, a text it refuses) does not sink the others; a row refused twice on
  its own is replaced by its job's failure, naming the store's reason;
* when the store takes not even that, it is not answering (down,
  restarting, its disk full): the outcomes are kept and tried again, with a
  pause, until it answers, and given up only once the process is closing.

A job whose lease the store says is not ours any more is not written (the
store ignores it): its outcome is another process's now.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

from .._batcher import BatchWriter
from ..store import Outcome, SharedStore, storable_text

__all__ = ["RETRY_PAUSE_MAX", "OutcomeWriter", "write_outcomes"]

#: The longest pause, in seconds, between two tries to write outcomes the
#: store did not take: they are kept meanwhile.
RETRY_PAUSE_MAX = 1.0
#: The longest store error kept in a job's error when its outcome was refused.
REFUSAL_TEXT = 500


async def write_outcomes(
    store: SharedStore,
    owner: str,
    batch: list[Outcome],
    *,
    log: Any,
    closing: Callable[[], bool],
) -> tuple[set[str], list[Outcome]]:
    """Write `batch` for `owner`: ``(the ids the store wrote, the outcomes given up)``.

    Outcomes the store does not take stay here and are tried again until it
    takes them: nothing finished is dropped while its lease may still be
    ours. Once `closing()` is true they are given up (their leases expire and
    the jobs run again elsewhere). `log` is the caller's structlog logger.
    """
    written: set[str] = set()
    pause = 0.05
    failed_since: float | None = None
    while batch:
        try:
            await _finish_rows(store, owner, batch, written, log)
            batch = []
        except _StoreDown as down:
            batch = down.unwritten
            if closing():
                log.error(
                    "results not recorded: the store did not answer; these jobs run again",
                    job_ids=[o.job_id for o in batch],
                    error=str(down.__cause__),
                )
                break
            if failed_since is None:
                failed_since = time.monotonic()
                log.error(
                    "could not record results; kept, trying again",
                    count=len(batch),
                    error=str(down.__cause__),
                )
            await asyncio.sleep(pause)
            pause = min(2 * pause, RETRY_PAUSE_MAX)
    if failed_since is not None and not batch:
        log.info(
            "results recorded after the store answered again",
            waited=round(time.monotonic() - failed_since, 3),
        )
    return written, batch


class _StoreDown(Exception):
    """The store took no outcome, not even a job's failure: it is not answering."""

    def __init__(self, unwritten: list[Outcome]) -> None:
        super().__init__(f"{len(unwritten)} outcomes not written")
        self.unwritten = unwritten


async def _finish_rows(
    store: SharedStore, owner: str, batch: list[Outcome], written: set[str], log: Any
) -> None:
    """One try at `batch`: in one transaction, else row by row; adds the ids
    the store wrote to `written`. Raises `_StoreDown` with the outcomes not
    written when the store refuses even a job's failure."""
    if len(batch) > 1:
        with contextlib.suppress(Exception):  # then row by row, below
            written.update(await store.finish(batch, owner))
            return
    for i, outcome in enumerate(batch):
        refusal = await _try_finish(store, owner, outcome, written)
        if refusal is not None:  # again: the first may have met a passing fault (a lock)
            refusal = await _try_finish(store, owner, outcome, written)
        if refusal is None:
            continue
        refused = _refused(outcome, refusal)
        down = await _try_finish(store, owner, refused, written)
        if down is not None:
            raise _StoreDown(batch[i:]) from down
        log.error(
            "result refused by the store; job failed",
            job_id=outcome.job_id,
            status=outcome.status,
            error=refused.error,
        )


async def _try_finish(
    store: SharedStore, owner: str, outcome: Outcome, written: set[str]
) -> Exception | None:
    """Write one outcome (adding its id to `written` if the store did); the
    store's error, or None."""
    try:
        written.update(await store.finish([outcome], owner))
    except Exception as exc:
        return exc
    return None


def _refused(outcome: Outcome, exc: Exception) -> Outcome:
    """The failure that takes the place of an outcome the store refused."""
    why = f"{type(exc).__name__}: {exc}"
    if len(why) > REFUSAL_TEXT:
        why = why[: REFUSAL_TEXT - 3] + "..."
    return Outcome(
        job_id=outcome.job_id,
        status="failed",
        error=storable_text(f"the store refused this attempt's outcome ({outcome.status}): {why}"),
    )


class OutcomeWriter:
    """The outcomes and progress reports of the jobs one process holds, on
    their way to the store in batches.

    `add` queues an attempt's end, written by `write_outcomes` with the
    others of its batch (after the progress written so far: a job's last
    progress lands while this process still holds it); `writing` holds the
    ids whose outcome is not written yet (their leases are kept). `progress`
    queues a report, each batch writing each job's latest (advisory: a
    store error is logged, never raised). After `closing()` outcomes the
    store does not answer for are given up instead of kept.
    """

    def __init__(self, store: SharedStore, owner: str, log: Any) -> None:
        self._store = store
        self._owner = owner
        self._log = log
        self._outcomes: BatchWriter[Outcome] = BatchWriter(
            self._write_outcomes, name="jobsched-outcomes"
        )
        # Progress of held jobs, written in batches (`SharedStore.set_progress`).
        self._progress: BatchWriter[tuple[str, dict[str, Any]]] = BatchWriter(
            self._write_progress, name="jobsched-progress"
        )
        #: Ids whose outcome is not written yet.
        self.writing: set[str] = set()
        self._closing = False  # closing(): outcomes the store refuses are given up

    @property
    def busy(self) -> bool:
        """Whether outcomes or progress reports are waiting or being written."""
        return self._outcomes.busy or self._progress.busy

    async def drain(self) -> None:
        """Return once the outcomes and reports added so far are written."""
        await asyncio.gather(self._outcomes.drain(), self._progress.drain())

    def closing(self) -> None:
        """The process is closing: an outcome the store does not take is given up."""
        self._closing = True

    def add(
        self,
        job_id: str,
        status: str,
        *,
        result: str | None = None,
        error: str | None = None,
        run_at: float | None = None,
        result_ttl: float | None = None,
        attempt: str | None = None,
        traceback: str | None = None,
    ) -> None:
        """Queue the outcome of `job_id` (an `Outcome`'s fields)."""
        self.writing.add(job_id)
        self._outcomes.add(
            Outcome(
                job_id=job_id,
                status=status,
                result=result,
                # Every shared store keeps the same text (PostgreSQL refuses a NUL).
                error=storable_text(error),
                run_at=run_at,
                result_ttl=result_ttl,
                attempt=attempt,
                traceback=traceback,  # storable already (`storable_traceback`)
            )
        )

    def progress(self, job_id: str, done: float, total: float | None, message: str | None) -> None:
        """Queue a progress report of `job_id`, written with the next batch."""
        progress = {
            "done": done,
            "total": total,
            "message": storable_text(message),
            "updated_at": time.time(),
        }
        self._progress.add((job_id, progress))

    async def _write_progress(self, reports: list[tuple[str, dict[str, Any]]]) -> None:
        """Write a batch of progress reports, each job's latest (never raises)."""
        batch = list(dict(reports).items())
        try:
            await self._store.set_progress(batch, self._owner)
        except Exception as exc:  # progress is advisory: the job runs on
            self._log.warning("could not record progress", count=len(batch), error=str(exc))

    async def _write_outcomes(self, batch: list[Outcome]) -> None:
        try:
            # A job's last progress is written while this process still holds it.
            await self._progress.drain()
            written, unanswered = await write_outcomes(
                self._store, self._owner, batch, log=self._log, closing=lambda: self._closing
            )
            for outcome in batch:
                if outcome.job_id not in written and outcome not in unanswered:
                    # Its lease ran out before the attempt ended (the renewer
                    # had not noticed yet): the job is another process's now.
                    self._log.warning(
                        "lease lost",
                        job_id=outcome.job_id,
                        reason="the store refused the attempt's end",
                        action="result not recorded",
                    )
        finally:
            self.writing.difference_update(o.job_id for o in batch)
