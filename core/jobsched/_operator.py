"""`OperatorAPI`: the one contract of the operator and producer coroutines.

`Client` (a shared store) and `LocalClient` (a scheduler in this process)
both implement it, so code written against it (the dashboard, the command
line, a script) runs on either; `BlockingClient` derives its plain calls
from it. Each method's docstring is the contract; the implementations say
what they add.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ._options import NOT_GIVEN, NotGiven
from ._status import JobPriority, JobStatus

if TYPE_CHECKING:
    from ._job import Job
    from ._records import (
        History,
        JobInfo,
        JobPage,
        QueueInfo,
        ScheduleInfo,
        Stats,
        WorkerRecord,
    )
    from ._submission import Submission
    from ._workflow import Workflow

#: One status or several, as the queries take them (None: any).
Statuses = JobStatus | str | Iterable[JobStatus | str]


@runtime_checkable
class OperatorAPI(Protocol):
    """Submit, look up, wait for and operate jobs and schedules.

    Every method is a coroutine of the loop the client belongs to. Errors are
    the same whichever implementation answers: `UnknownJobError` for an
    unknown id, `UnknownScheduleError` for an unknown schedule,
    `UnknownWorkerError` for a worker no live one has the id of,
    `InvalidTransitionError` for a job in the wrong status, `ValueError` or
    `TypeError` naming a bad argument.
    """

    # ── lifecycle ───────────────────────────────────────────────────
    async def open(self) -> OperatorAPI:
        """Make the client ready (connect to its store); returns it."""
        ...

    async def close(self) -> None:
        """Let go of what the client holds. Closing twice is harmless."""
        ...

    async def __aenter__(self) -> OperatorAPI: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

    # ── submitting and waiting ──────────────────────────────────────
    async def submit(
        self,
        job: Job | Workflow,
        *,
        delay: float = 0.0,
        depends_on: Iterable[str] = (),
        key: str | None = None,
        unique_key: str | None = None,
        priority: JobPriority | str | int | None = None,
        timeout: float | bool | NotGiven | None = NOT_GIVEN,
        retry: Any = None,
        name: str | None = None,
        result_ttl: float | None = None,
        keep_result: bool | None = None,
        trigger_rule: str = "all_success",
        conn: Any = None,
        queue: str | None = None,
    ) -> str:
        """Queue `job` (or a workflow: its last job's id) and return its id
        (`Client.submit` documents the options; `conn` needs a database store)."""
        ...

    async def submit_many(
        self, jobs: Iterable[Job | Submission | Workflow], *, conn: Any = None
    ) -> list[str]:
        """Queue several jobs, all or none; returns every job's id."""
        ...

    async def get(self, job_id: str) -> JobInfo:
        """The job now, with its history and progress."""
        ...

    async def dependents(self, job_id: str) -> list[str]:
        """The ids of the jobs submitted to depend on this one, in submit order."""
        ...

    async def dependents_of(self, job_ids: Iterable[str]) -> dict[str, list[str]]:
        """`dependents` of several jobs at once: each of `job_ids` that exists,
        mapped to its dependents' ids in submit order (an unknown id is left out)."""
        ...

    async def jobs(
        self,
        *,
        status: Statuses | None = None,
        type: str | None = None,
        limit: int | None = None,
        ids: Iterable[str] | None = None,
    ) -> list[JobInfo]:
        """Jobs in submit order, optionally in `status`, of job type `type` or
        with one of the `ids` (read at once: an unknown id is left out); at
        most `limit`."""
        ...

    async def cancel(self, job_id: str) -> bool:
        """Cancel a job; False if it had already finished."""
        ...

    async def wait(self, job_id: str, timeout: float | None = None) -> JobInfo:
        """Wait until the job is finished and return it; `TimeoutError` after `timeout` s."""
        ...

    async def wait_many(
        self, job_ids: Iterable[str], timeout: float | None = None
    ) -> list[JobInfo]:
        """Wait until every one of the jobs is finished; returns them in the order given."""
        ...

    async def result(self, job_id: str, timeout: float | None = None) -> Any:
        """Wait until the job is finished and return its result (JSON, as a
        store keeps it); `JobFailedError` if it did not complete."""
        ...

    # ── browsing ────────────────────────────────────────────────────
    async def page(
        self,
        *,
        status: Statuses | None = None,
        type: str | None = None,
        q: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> JobPage:
        """One page of jobs, newest first, and how many match in all."""
        ...

    async def stats(self) -> Stats:
        """The queue at a glance: counts, throughput, workers, limits."""
        ...

    async def history(
        self, *, window: str = "24h", type: str | None = None, queue: str | None = None
    ) -> History:
        """Throughput over `window` (``"1h"``, ``"24h"``, ``"7d"``) per job
        type, and the backlog now, of job type `type` and queue `queue` (None:
        all) (docs/client.md#history)."""
        ...

    async def workers(self) -> list[WorkerRecord]:
        """Every worker the registry knows, by id: live, idle, draining and
        lost ones (docs/client.md#workers)."""
        ...

    async def drain_worker(self, worker_id: str) -> None:
        """Ask a live worker to claim nothing more, finish its running jobs and
        stay (``draining``); `UnknownWorkerError` if no live worker has the id."""
        ...

    async def stop_worker(self, worker_id: str) -> None:
        """Ask a live worker to drain, then stop (as on SIGTERM);
        `UnknownWorkerError` if no live worker has the id."""
        ...

    # ── operator actions ────────────────────────────────────────────
    async def retry(self, job_id: str) -> JobInfo:
        """Run a failed, timed-out or cancelled job again, now; returns it."""
        ...

    async def requeue(
        self, *, status: Statuses = ("failed",), type: str | None = None
    ) -> list[str]:
        """`retry` every job in `status` of job type `type`; returns their ids."""
        ...

    async def retry_many(self, job_ids: Iterable[str]) -> list[str]:
        """`retry` the failed, timed-out or cancelled jobs of `job_ids`, at once;
        returns the ids retried, in the order given (the others are left alone)."""
        ...

    async def cancel_many(self, job_ids: Iterable[str]) -> list[str]:
        """`cancel` the unfinished jobs of `job_ids`, at once; returns the ids
        cancelled (or, running, asked to stop), in the order given (the others
        are left alone)."""
        ...

    async def purge_many(self, job_ids: Iterable[str]) -> list[str]:
        """Delete (forget) the finished jobs of `job_ids`, at once; returns the
        ids deleted, in the order given. Unfinished jobs are never deleted."""
        ...

    async def purge(self, *, older_than: float, status: Statuses | None = None) -> int:
        """Delete (forget) finished jobs that ended more than `older_than` s
        ago; returns how many."""
        ...

    async def schedules(self) -> list[ScheduleInfo]:
        """The recurring schedules, by id."""
        ...

    async def schedule_runs(self, schedule_id: str, limit: int = 5) -> list[JobInfo]:
        """The last `limit` jobs the schedule fired, newest first (empty for
        an unknown schedule); `limit` is 1 to `MAX_SCHEDULE_RUNS`."""
        ...

    async def add_schedule(
        self,
        job: Job,
        *,
        every: float | None = None,
        trigger: Mapping[str, Any] | None = None,
        start_in: float = 0.0,
        allow_overlap: bool = False,
        times: int | None = None,
        key: str | None = None,
    ) -> str:
        """A recurring schedule submitting `job` every `every` seconds or
        whenever `trigger` (a mapping: ``{"cron": "0 2 * * *", "tz": ...}``)
        fires; returns its id (`Client.add_schedule` documents the options)."""
        ...

    async def update_schedule(
        self,
        schedule_id: str,
        *,
        args: Mapping[str, Any] | None = None,
        every: float | None = None,
        trigger: Mapping[str, Any] | None = None,
    ) -> str:
        """Give a schedule new job arguments or a new rule (interval or
        trigger); returns its id, a new one when anything changed (the edited
        schedule replaces the old: `Client.update_schedule`)."""
        ...

    async def cancel_schedule(self, schedule_id: str) -> bool:
        """Stop a schedule for good; False if it had already ended."""
        ...

    async def pause_schedule(self, schedule_id: str) -> bool:
        """Stop a schedule firing until resumed; False if it was paused already."""
        ...

    async def resume_schedule(self, schedule_id: str) -> bool:
        """Let a paused schedule fire again from its next period; False if it was not paused."""
        ...

    async def trigger_schedule(self, schedule_id: str) -> str:
        """Submit the schedule's job once, now; returns the job's id."""
        ...

    async def pause_queue(self, name: str | None = None) -> bool:
        """Start no new job (running ones finish) of any queue (`name` None) or
        of the queue `name`; False if paused already."""
        ...

    async def resume_queue(self, name: str | None = None) -> bool:
        """Start jobs again, of every queue (`name` None: undo a pause of all)
        or of the queue `name`; False if it was not paused."""
        ...

    async def queue_paused(self, name: str | None = None) -> bool:
        """Whether every queue is paused (`name` None); with a name, whether
        that queue's jobs are held back (it is paused, or all are)."""
        ...

    async def queues(self) -> list[QueueInfo]:
        """Each queue at a glance, by name: depth, oldest ready job's age,
        running, throughput, paused (``"default"`` always listed)."""
        ...

    # ── live views ──────────────────────────────────────────────────
    async def wait_for_change(self, timeout: float) -> bool:
        """Return when some job changed, or after `timeout` s; True if one did."""
        ...
