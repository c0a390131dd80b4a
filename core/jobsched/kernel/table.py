"""The job table: every job the kernel knows, its keys, and the bounded history.

Owned by the event-loop thread. The table counts unfinished jobs (its `idle`
event is set when there are none) and bounds the finished ones to the last
`history_limit`; forgetting a job forgets its keys and its attempt history.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from typing import TYPE_CHECKING

from .._errors import UnknownJobError
from .._options import check_job_id
from .._status import JobStatus

if TYPE_CHECKING:
    from collections.abc import Iterable

    from .._job import Job


class AttemptRecord(tuple):  # type: ignore[type-arg]
    """One ended attempt of a job:
    ``(number, status, error, started_at, finished_at, traceback)``.

    Times are the kernel clock's monotonic seconds. A plain tuple subclass:
    one is built only when an attempt fails and is retried, or when an
    operator retries a finished job.
    """

    __slots__ = ()

    def __new__(
        cls,
        number: int,
        status: JobStatus,
        error: str | None,
        started_at: float | None,
        finished_at: float | None,
        traceback: str | None = None,
    ) -> AttemptRecord:
        return tuple.__new__(cls, (number, status, error, started_at, finished_at, traceback))

    number = property(lambda self: self[0], doc="1 for the first attempt")
    status = property(lambda self: self[1], doc="how it ended (FAILED, TIMED_OUT, ...)")
    error = property(lambda self: self[2], doc="its error, if any")
    started_at = property(lambda self: self[3], doc="monotonic start")
    finished_at = property(lambda self: self[4], doc="monotonic end")
    traceback = property(lambda self: self[5], doc="its exception's traceback, if any")


class JobTable:
    """Jobs by id, external keys, held unique keys, attempt histories, the history bound.

    `jobs` and `finished` are public for reading (the kernel's hot path tests
    them); every change goes through a method.
    """

    __slots__ = (
        "_history",
        "_key_of",
        "_keys",
        "_unique",
        "_unique_of",
        "finished",
        "history_limit",
        "idle",
        "jobs",
        "seq",
        "unfinished",
    )

    def __init__(self, history_limit: int) -> None:
        if history_limit < 0:
            raise ValueError(f"history_limit must be >= 0, got {history_limit!r}")
        self.history_limit = history_limit
        self.jobs: dict[str, Job] = {}
        #: Terminal job ids, oldest first.
        self.finished: deque[str] = deque()
        #: The next submit order.
        self.seq = 0
        #: Jobs the table holds that are not terminal.
        self.unfinished = 0
        #: Set while `unfinished` is 0.
        self.idle = asyncio.Event()
        self.idle.set()
        self._keys: dict[str, str] = {}  # external key -> job id (submit(key=...))
        # Job id -> its key: a key is forgotten with its job, so both stay bounded.
        self._key_of: dict[str, str] = {}
        self._unique: dict[str, str] = {}  # dedupe key -> id of its unfinished job
        self._unique_of: dict[str, str] = {}  # job id -> its dedupe key
        # Only jobs that were retried: the plain job path never touches it.
        self._history: dict[str, list[AttemptRecord]] = {}

    # ── reading ───────────────────────────────────────────────────────
    def find(self, job_id: str) -> Job | None:
        """The job with this id, or None."""
        return self.jobs.get(job_id)

    def get(self, job_id: str) -> Job:
        """The job with this id; `UnknownJobError` (or a bad id's error) if none."""
        try:
            return self.jobs[job_id]
        except (KeyError, TypeError):
            check_job_id(job_id)
            raise UnknownJobError(job_id) from None

    def lookup(self, key: str) -> str | None:
        """The id of the job submitted (or restored) with this external key, if any."""
        return self._keys.get(key)

    def key_of(self, job_id: str) -> str | None:
        """The external key the job was submitted (or restored) with, if any."""
        return self._key_of.get(job_id)

    def holder_of(self, unique_key: str) -> str | None:
        """The id of the unfinished job holding `unique_key`, if any."""
        return self._unique.get(unique_key)

    def unique_key_of(self, job_id: str) -> str | None:
        """The `unique_key` the job holds until it finishes, if any."""
        return self._unique_of.get(job_id)

    def attempt_history(self, job_id: str) -> list[AttemptRecord]:
        """The ended attempts of a known job, oldest first, its current one excluded."""
        self.get(job_id)
        return list(self._history.get(job_id, ()))

    # ── changes ───────────────────────────────────────────────────────
    def add(self, job: Job, key: str | None, unique_key: str | None) -> None:
        """Record a new unfinished job (its `seq` set from `seq` by the caller)."""
        job_id = job.job_id
        self.seq = job.seq + 1
        self.jobs[job_id] = job
        if unique_key is not None:
            self._unique[unique_key] = job_id
            self._unique_of[job_id] = unique_key
        if key is not None:
            self._keys[key] = job_id
            self._key_of[job_id] = key
        self.unfinished += 1
        if self.unfinished == 1:
            self.idle.clear()

    def renumber(self, job: Job) -> None:
        """Give `job` the next submit order (a claimed or retried job)."""
        job.seq = self.seq
        self.seq += 1

    def adopt(self, job: Job) -> None:
        """Record an unfinished job a backend hands over, renumbered."""
        self.renumber(job)
        self.jobs[job.job_id] = job
        self.unfinished += 1
        self.idle.clear()

    def restore(self, job: Job, key: str | None, unique_key: str | None) -> str | None:
        """Record a job read back from a store, its `seq` as stored.

        A terminal job joins the history: returns the id of a job that fell
        out of it (for the caller to forget elsewhere), else None.
        """
        job_id = job.job_id
        self.jobs[job_id] = job
        if key is not None and key not in self._keys:
            self._keys[key] = job_id
            self._key_of[job_id] = key
        self.seq = max(self.seq, job.seq + 1)
        if job.status.is_terminal:
            self.finished.append(job_id)
            if len(self.finished) > self.history_limit:
                oldest = self.finished.popleft()
                self._forget_finished(oldest)
                return oldest
            return None
        if unique_key is not None:
            self._unique[unique_key] = job_id
            self._unique_of[job_id] = unique_key
        self.unfinished += 1
        self.idle.clear()
        return None

    def ended(self, job_id: str) -> str | None:
        """`job_id` became terminal: its unique key is free, it joins the history.

        Returns the id of the job that fell out of the history (one in, at
        most one out), for the caller to forget elsewhere, else None.
        """
        if self._unique_of:
            key = self._unique_of.pop(job_id, None)
            if key is not None:
                del self._unique[key]
        self.unfinished -= 1
        if self.unfinished == 0:
            self.idle.set()
        finished = self.finished
        finished.append(job_id)
        if len(finished) > self.history_limit:
            oldest = finished.popleft()
            self._forget_finished(oldest)
            return oldest
        return None

    def reopened(self, job: Job, status: JobStatus) -> None:
        """An operator makes the terminal `job` (which ended `status`) unfinished again:
        the attempt that ended it joins its history."""
        job_id = job.job_id
        if job.attempts:
            self.record_attempt(
                job_id,
                AttemptRecord(
                    job.attempts,
                    status,
                    job.last_error,
                    job.started_at,
                    job.finished_at,
                    job.last_traceback,
                ),
            )
        with contextlib.suppress(ValueError):  # not in the history: restored as finished
            self.finished.remove(job_id)
        self.renumber(job)
        self.unfinished += 1
        self.idle.clear()

    def record_attempt(self, job_id: str, record: AttemptRecord) -> None:
        """Add an ended attempt to the job's history."""
        history = self._history.get(job_id)
        if history is None:
            self._history[job_id] = [record]
        else:
            history.append(record)

    def drop_finished(self, job_ids: Iterable[str]) -> None:
        """Forget these terminal jobs (a purge)."""
        removed = set(job_ids)
        if removed:
            self.finished = deque(j for j in self.finished if j not in removed)
            for job_id in removed:
                self._forget_finished(job_id)

    def forget(self, job: Job) -> None:
        """Forget the unfinished `job` (a backend keeps it from now on)."""
        self._history.pop(job.job_id, None)  # the store keeps its history
        if self.jobs.get(job.job_id) is job:
            del self.jobs[job.job_id]
            self.unfinished -= 1
            if self.unfinished == 0:
                self.idle.set()

    def _forget_finished(self, job_id: str) -> None:
        self.jobs.pop(job_id, None)
        if self._key_of and (key := self._key_of.pop(job_id, None)) is not None:
            del self._keys[key]
        if self._history:
            self._history.pop(job_id, None)
