"""`LocalClient`: the operator API of `Client` over a scheduler running in this process.

A web app that runs its own `JobScheduler` (the memory store, or a SQLite
file it owns) uses ``LocalClient(scheduler)`` where another would open a
`Client` on a shared store: the same coroutines (`get`, `page`, `stats`,
`retry`, `pause_queue`, `wait_for_change`, ...) returning the same records
(`JobInfo`, `Stats`, `ScheduleInfo`, ...). Everything is read from and done
to the scheduler itself, on its loop: no store is read, and a scheduler that
no `LocalClient` looks at does no work for one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable, Iterable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ._codec import JobCodec
from ._errors import (
    SchedulerError,
    UnknownJobError,
    UnknownScheduleError,
)
from ._job import Job, callable_name
from ._local_records import LocalRecords, ScheduledJob
from ._local_stats import LocalStats
from ._operator import OperatorAPI
from ._options import (
    NOT_GIVEN,
    NotGiven,
    check_job_id,
    check_queue,
    id_batch,
    id_list,
)
from ._records import (
    MAX_SCHEDULE_RUNS,
    RETRYABLE,
    History,
    JobInfo,
    JobPage,
    QueueInfo,
    ScheduleInfo,
    Stats,
    WorkerRecord,
    check_count,
    check_page_query,
    check_purge,
    check_requeue,
    check_seconds,
    finished_result,
    wanted_statuses,
)
from ._recurring import IntervalTrigger
from ._status import JobPriority, JobStatus
from ._submission import Submission
from ._trigger_rules import ALL_SUCCESS
from ._workflow import Workflow
from .backends import SharedBackend
from .store import encode_json

if TYPE_CHECKING:
    from ._scheduler import JobScheduler


class LocalClient:
    """`Client`'s operator API over a `JobScheduler` running in this process.

    ``client = LocalClient(scheduler)``; no `open`/`close` is needed, but
    ``async with LocalClient(scheduler) as client:`` works too (leaving it
    stops the client's listeners). Every method is a coroutine to await on
    the scheduler's loop. A scheduler on a shared store (PostgreSQL, SQLite
    in shared mode) holds only the jobs it runs: operate it with
    ``Client(store_url)`` instead; this refuses it with `SchedulerError`.

    `submit` and `submit_many` take what `Client`'s take (`Submission`s,
    workflows, every option, checked the same way), and plain functions too.
    `add_schedule` schedules in the scheduler (no `times`: nothing stores
    it); not here: `wait_schedule` (see docs/client.md).

    What the scheduler remembers is what a `LocalClient` sees: unfinished
    jobs and the last `history_limit` finished ones (with the SQLite store
    the file keeps the rest). Jobs that are plain functions show the
    function's qualified name as their `JobInfo.type` and their arguments'
    reprs as `args` (``{"args": [...], "kwargs": {...}}``).
    """

    def __init__(self, scheduler: JobScheduler) -> None:
        if isinstance(scheduler.kernel.backend, SharedBackend):
            raise SchedulerError(
                f"{scheduler.store!r} is shared by several processes: a LocalClient sees only "
                "this process's jobs; use jobsched.Client(store) to operate the shared store"
            )
        self.scheduler = scheduler
        self.codec = JobCodec(scheduler.plugins)
        self._changed: asyncio.Event | None = None
        clock = scheduler.kernel.clock
        # The kernel keeps monotonic times: one offset turns them into wall
        # time, so a job reads the same every time it is read.
        self._offset = clock.time() - clock.now()
        # Jobs and schedules as the records a Client returns.
        self._records = LocalRecords(scheduler, self.codec, self._offset)
        # Stats, history, workers and queues: read by a collaborator, which
        # also keeps the scheduler's throughput history from now on.
        self._stats = LocalStats(scheduler, self._offset)

    def __repr__(self) -> str:
        return f"LocalClient({self.scheduler!r})"

    # ── lifecycle (nothing to open) ─────────────────────────────────
    async def open(self) -> LocalClient:
        """Nothing to open; returns the client (for code written for `Client`)."""
        return self

    async def close(self) -> None:
        """Stop the client's listeners (`wait_for_change`). The scheduler runs on."""
        if self._changed is not None:
            self.scheduler.remove_listener(self._on_transition)
            self.scheduler.remove_progress_listener(self._on_progress)
            self._changed.set()  # waiters return
            self._changed = None

    async def __aenter__(self) -> LocalClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # ── submitting and waiting ──────────────────────────────────────
    async def submit(
        self,
        job: Job | Workflow | Callable[..., Any],
        *args: Any,
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
        trigger_rule: str = ALL_SUCCESS,
        conn: Any = None,
        queue: str | None = None,
        group: str | None = None,
        **options: Any,
    ) -> str:
        """Queue `job` and return its id: `Client.submit`'s job, options and checks.

        For a `Job`, the options are `Client.submit`'s: `delay`, `depends_on`
        (ids), `key`, `unique_key`, `trigger_rule`, `group`, and `priority`, `timeout`
        (None or False: no timeout; left out: the job's own), `retry`, `name`, `result_ttl` and
        `keep_result` and `queue` overriding the job's own. With one of the last seven the
        scheduler queues a copy of the job (under its id) and the caller's
        object is left as it was; without, the job object itself is queued.
        A workflow takes `depends_on` only; its last job's id is returned.

        Beyond `Client`: a plain function or coroutine function with its
        arguments and `FunctionJob`'s options, as `JobScheduler.submit` takes
        them (``submit(resize, "cat.png", retry="none")``).

        `conn` (the application's transaction) is refused: an in-process
        scheduler has no database to insert in.
        """
        _no_connection(conn)
        # The job's own options, given or not, as the scheduler takes them.
        given = (("priority", priority), ("retry", retry), ("name", name), ("queue", queue))
        options.update((k, v) for k, v in given if v is not None)
        if timeout is not NOT_GIVEN:
            options["timeout"] = timeout  # None: no timeout
        # JobScheduler.submit takes these options for every kind of job, with
        # the same checks (the default rule is given as unset, so a function
        # with a `trigger_rule` parameter is not refused).
        return self.scheduler.submit(
            job,
            *args,
            delay=delay,
            depends_on=depends_on,
            key=key,
            unique_key=unique_key,
            result_ttl=result_ttl,
            keep_result=keep_result,
            trigger_rule=None if trigger_rule == ALL_SUCCESS else trigger_rule,
            group=group,
            **options,
        )

    async def submit_many(
        self,
        jobs: Iterable[Job | Submission | Workflow | Callable[..., Any]],
        *,
        conn: Any = None,
    ) -> list[str]:
        """Queue several jobs; returns every job's id (`Client.submit_many`).

        Each item is a `Job`, a `Submission` (a job with `submit`'s options,
        which may depend on an earlier `Job` of the batch by naming the
        object), a workflow (each of its jobs gets an id, in its submit
        order) or a plain function taking no arguments. Every item is checked
        before any is queued: a bad option, an unknown dependency or a job
        already submitted queues none. `conn` is refused, as by `submit`.
        """
        _no_connection(conn)
        return self.scheduler.submit_many(jobs)

    async def get(self, job_id: str) -> JobInfo:
        """The job with this id now, with its history and progress;
        `UnknownJobError` if the scheduler does not know it."""
        return self._records.info(self._records.job(job_id), full=True)

    async def dependents(self, job_id: str) -> list[str]:
        """The ids of the jobs submitted to depend on this one, in submit order,
        among those the scheduler remembers (`JobScheduler.dependents`);
        `UnknownJobError` if it does not know the job."""
        self._records.job(job_id)
        return list(self.scheduler.dependents(job_id))

    async def dependents_of(self, job_ids: Iterable[str]) -> dict[str, list[str]]:
        """`dependents` of several jobs at once, among those the scheduler
        remembers; an unknown id is left out."""
        table = self.scheduler.kernel.table
        return {
            job_id: list(self.scheduler.dependents(job_id))
            for job_id in (check_job_id(i) for i in id_list(job_ids, "dependents_of"))
            if table.find(job_id) is not None
        }

    async def jobs(
        self,
        *,
        status: JobStatus | str | Iterable[JobStatus | str] | None = None,
        type: str | None = None,
        limit: int | None = None,
        ids: Iterable[str] | None = None,
    ) -> list[JobInfo]:
        """The jobs the scheduler knows in submit order, optionally only those in
        `status` (one or several), of job type `type` or with one of the
        `ids` (an unknown id is left out); at most `limit`."""
        wanted = wanted_statuses(status)
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
            raise TypeError(f"limit must be an integer, got {limit!r}")
        candidates: Iterable[Job]
        if ids is not None:
            table = self.scheduler.kernel.table
            known = (table.find(check_job_id(i)) for i in dict.fromkeys(id_list(ids, "ids")))
            candidates = [job for job in known if job is not None]
        else:
            candidates = self.scheduler.jobs()
        found: list[JobInfo] = []
        for job in sorted(candidates, key=_seq):
            if limit is not None and len(found) >= limit:
                break
            if wanted is not None and job.status.value not in wanted:
                continue
            info = self._records.info(job)
            if type is None or info.type == type:
                found.append(info)
        return found

    async def wait(self, job_id: str, timeout: float | None = None) -> JobInfo:
        """Wait until the job is finished and return it; `TimeoutError` after `timeout` s."""
        (info,) = await self.wait_many([job_id], timeout=timeout)
        return info

    async def wait_many(
        self, job_ids: Iterable[str], timeout: float | None = None
    ) -> list[JobInfo]:
        """Wait until every one of the jobs is finished; returns them in the
        order given (`Client.wait_many`). `UnknownJobError` names the ids the
        scheduler does not know; `TimeoutError` after `timeout` s names the
        unfinished ones."""
        given = [check_job_id(job_id) for job_id in id_list(job_ids, "wait_many")]
        ids = list(dict.fromkeys(given))
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            # A retried job is the same object; a forgotten one is gone.
            found: dict[str, Job] = {}
            unknown: list[str] = []
            for job_id in ids:
                job = self.scheduler.kernel.table.find(job_id)
                if job is None:
                    unknown.append(job_id)
                else:
                    found[job_id] = job
            if unknown:
                raise UnknownJobError(f"unknown jobs {unknown}")
            pending = [job_id for job_id, job in found.items() if not job.status.is_terminal]
            if not pending:
                return [self._records.info(found[job_id], full=True) for job_id in given]
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise TimeoutError(f"jobs {pending} did not finish within {timeout} s")
            await self._next_change(left)

    async def result(self, job_id: str, timeout: float | None = None) -> Any:
        """Wait until the job is finished and return its result as a store keeps
        it (JSON: a result JSON cannot hold reads as its repr). A job that
        failed, timed out or was cancelled raises `JobFailedError`;
        `TimeoutError` after `timeout` s; `UnknownJobError` for an unknown id."""
        return finished_result(await self.wait(job_id, timeout=timeout))

    # ── browsing ────────────────────────────────────────────────────
    async def page(
        self,
        *,
        status: JobStatus | str | Iterable[JobStatus | str] | None = None,
        type: str | None = None,
        q: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> JobPage:
        """One page of jobs, newest first, and how many jobs match in all.

        `status` is one status or several; `type` a job type; `q` a
        case-insensitive substring of the job's id, name, type or arguments
        (as JSON). `limit` (1 to 1000) jobs from the `offset`-th on.
        """
        wanted = check_page_query(status, type, q, limit, offset)
        needle = q.lower() if q else None
        matched: list[JobInfo] = []
        for job in sorted(self.scheduler.jobs(), key=_seq, reverse=True):
            if wanted is not None and job.status.value not in wanted:
                continue
            info = self._records.info(job)
            if type is not None and info.type != type:
                continue
            if needle is not None and not _matches(info, needle):
                continue
            matched.append(info)
        return JobPage(jobs=matched[offset : offset + limit], total=len(matched))

    async def stats(self) -> Stats:
        """Counts per status, throughput per minute over the last hour (from
        the finish times of the jobs the scheduler remembers), this process
        as the one worker, the limits' use, whether the queue is paused and
        how many calls its executors abandoned still run."""
        return self._stats.stats()

    async def history(
        self, *, window: str = "24h", type: str | None = None, queue: str | None = None
    ) -> History:
        """Throughput over `window` (``"1h"``, ``"24h"`` or ``"7d"``), per job
        type, and the backlog now, of job type `type` and queue `queue` (None:
        all), as `Client.history`: counted in memory from the first
        `LocalClient` made for the scheduler on (starting with the finished
        jobs it remembered then), without a lag."""
        return self._stats.history(window, type, queue)

    async def workers(self) -> list[WorkerRecord]:
        """This process as the one worker, once its scheduler started (none
        before): its queue, job types, running count and state (``draining``
        once it is stopping)."""
        return self._stats.workers()

    async def drain_worker(self, worker_id: str) -> None:
        """Refused: an in-process scheduler is its own one worker, and its
        program starts and stops it (`SchedulerError` saying so). Its queues
        can be paused (`pause_queue`): running jobs finish, none starts."""
        self._refuse_request(worker_id, "drain")

    async def stop_worker(self, worker_id: str) -> None:
        """Refused, as `drain_worker` is."""
        self._refuse_request(worker_id, "stop")

    def _refuse_request(self, worker_id: str, command: str) -> None:
        if not isinstance(worker_id, str) or not worker_id:
            raise TypeError(f"a worker id is a non-empty string, got {worker_id!r}")
        raise SchedulerError(
            f"cannot {command} worker {worker_id!r}: a LocalClient's scheduler runs in this "
            "process, which starts and stops it (pause_queue holds its jobs back); drain "
            "and stop are for the workers of a shared store (jobsched.Client)"
        )

    # ── operator actions: jobs ──────────────────────────────────────
    async def retry(self, job_id: str) -> JobInfo:
        """Run a failed, timed-out or cancelled job again, now; returns it.

        Its attempts count from 0 again; the earlier ones stay in
        `JobInfo.history`. A job in another status raises
        `InvalidTransitionError` naming it; an unknown id `UnknownJobError`.
        """
        self._records.job(job_id)
        return self._records.info(self.scheduler.retry_job(job_id), full=True)

    async def requeue(
        self,
        *,
        status: JobStatus | str | Iterable[JobStatus | str] = ("failed",),
        type: str | None = None,
    ) -> list[str]:
        """`retry` every job in `status` (failed, timed_out and/or cancelled) of
        job type `type` (None: any); returns the ids requeued, in submit order.
        Another status is a `ValueError`."""
        wanted = check_requeue(status, type)
        return self.scheduler.retry_jobs(tuple(sorted(wanted)), job_type=type)

    async def cancel(self, job_id: str) -> bool:
        """Cancel a job; False if it had already finished, `UnknownJobError` if unknown."""
        self._records.job(job_id)
        return self.scheduler.cancel(job_id)

    async def purge(
        self,
        *,
        older_than: float,
        status: JobStatus | str | Iterable[JobStatus | str] | None = None,
    ) -> int:
        """Forget finished jobs that ended more than `older_than` seconds ago
        (a SQLite file the scheduler owns deletes them); returns how many the
        scheduler forgot. `status` narrows it to some terminal statuses (None:
        all); an unfinished status is a `ValueError`."""
        seconds, wanted = check_purge(older_than, status)
        return self.scheduler.purge(seconds, None if status is None else tuple(sorted(wanted)))

    # ── operator actions: many jobs at once ─────────────────────────
    async def retry_many(self, job_ids: Iterable[str]) -> list[str]:
        """`retry` each failed, timed-out or cancelled job of `job_ids`;
        returns the ids retried, in the order given (`Client.retry_many`:
        unknown ids and jobs in another status are left alone)."""
        ids = id_batch(job_ids, "retry_many")
        find = self.scheduler.kernel.table.find
        done: list[str] = []
        for job_id in ids:
            job = find(job_id)
            if job is not None and job.status.value in RETRYABLE:
                self.scheduler.retry_job(job_id)
                done.append(job_id)
        return done

    async def cancel_many(self, job_ids: Iterable[str]) -> list[str]:
        """`cancel` each unfinished job of `job_ids`; returns the ids
        cancelled, in the order given (`Client.cancel_many`)."""
        ids = id_batch(job_ids, "cancel_many")
        find = self.scheduler.kernel.table.find
        chosen = [job for job_id in ids if (job := find(job_id)) is not None]
        chosen = [job for job in chosen if not job.status.is_terminal]
        # Newest first, as a store cancels them all at once: a dependent of
        # the batch ends "cancelled" itself, not by its upstream's cancel.
        for job in sorted(chosen, key=_seq, reverse=True):
            self.scheduler.cancel(job.job_id)
        return [job.job_id for job in chosen]

    async def purge_many(self, job_ids: Iterable[str]) -> list[str]:
        """Forget the finished jobs of `job_ids` (a SQLite file the scheduler
        owns deletes them); returns the ids forgotten, in the order given
        (`JobScheduler.purge_jobs`: unfinished jobs, and one an unfinished
        job still waits for, are left alone)."""
        return self.scheduler.purge_jobs(id_batch(job_ids, "purge_many"))

    # ── operator actions: schedules ─────────────────────────────────
    async def schedules(self) -> list[ScheduleInfo]:
        """The scheduler's recurring schedules (running or paused), by id."""
        return [self._records.schedule_info(s) for s in self.scheduler.recurring()]

    async def schedule_runs(self, schedule_id: str, limit: int = 5) -> list[JobInfo]:
        """The last `limit` jobs the schedule fired, newest first, among the
        jobs the scheduler remembers (a schedule keeps its last
        `RECENT_RUNS` ids); empty for an unknown schedule."""
        check_count("limit", limit, low=1, high=MAX_SCHEDULE_RUNS)
        for sched in self.scheduler.recurring():
            if sched.schedule_id == schedule_id:
                table = self.scheduler.kernel.table
                jobs = (table.find(job_id) for job_id in reversed(sched.recent))
                return [self._records.info(job) for job in jobs if job is not None][:limit]
        return []

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
        """Schedule `job` in the scheduler (`JobScheduler.schedule_recurring`)
        every `every` seconds (first after `start_in`) or whenever `trigger`
        (a mapping such as ``{"cron": "0 2 * * *", "tz": "Europe/Berlin"}``)
        fires; returns its id (``sched-N``).

        Each fire submits a new job built from `job`'s description (its
        registered type, JSON arguments and options), so `job` must be data
        (`JobSpecError` otherwise). The schedule lives as long as the
        scheduler: `times` needs a store that keeps schedules (`TypeError`).
        """
        if (every is None) == (trigger is None):
            raise TypeError(
                "a schedule takes an interval (every=) or a trigger=: exactly one of them"
            )
        if times is not None:
            raise TypeError(
                "times= needs a stored schedule (Client.add_schedule on a shared store); "
                "an in-process schedule runs until cancel_schedule"
            )
        if trigger is not None and not isinstance(trigger, Mapping):
            raise TypeError(f"trigger must be a mapping such as {{'cron': ...}}, got {trigger!r}")
        type_name, args, options = self.codec.describe_data(job, self._offset)
        factory = ScheduledJob(
            codec=self.codec,
            type=type_name,
            args=args,
            options=options,
            rule={"interval": every} if trigger is None else dict(trigger),
            offset=self._offset,
        )
        return self.scheduler.schedule_recurring(
            factory,
            every,
            start_in=start_in,
            allow_overlap=allow_overlap,
            trigger=None if trigger is None else dict(trigger),
            key=key,
        )

    async def update_schedule(
        self,
        schedule_id: str,
        *,
        args: Mapping[str, Any] | None = None,
        every: float | None = None,
        trigger: Mapping[str, Any] | None = None,
    ) -> str:
        """Replace a schedule `add_schedule` made with one of new job `args`
        and/or a new rule (`every` or `trigger`; neither: the same); returns
        the new schedule's id. The old one is cancelled after the new one is
        added (paused if the old one was); an interval fires first one period
        from now. A schedule made in code (``schedule_recurring`` of a
        factory) is changed in that code: `ValueError` here;
        `UnknownScheduleError` if unknown."""
        sched = next((s for s in self.scheduler.recurring() if s.schedule_id == schedule_id), None)
        if sched is None or not sched.active:
            raise UnknownScheduleError(f"unknown recurring schedule {schedule_id!r}")
        made = sched.factory
        if not isinstance(made, ScheduledJob):
            raise ValueError(
                f"schedule {schedule_id} was made in code (schedule_recurring of "
                f"{callable_name(made)}): change it there"
            )
        if every is not None and trigger is not None:
            raise TypeError("a schedule takes an interval (every=) or a trigger=, not both")
        if every is None and trigger is None:
            if "interval" in made.rule:
                every = made.rule["interval"]
            else:
                trigger = made.rule
        job = self.codec.build(
            made.type,
            made.args if args is None else args,
            made.options,
            self._offset,
            f"schedule {schedule_id}",
        )
        if every is not None:
            IntervalTrigger(every)  # its own message before start_in's
        new_id = await self.add_schedule(
            job,
            every=every,
            trigger=trigger,
            start_in=0.0 if every is None else float(every),
            allow_overlap=sched.allow_overlap,
        )
        if sched.paused:
            self.scheduler.pause_schedule(new_id)
        self.scheduler.cancel_recurring(schedule_id)
        return new_id

    async def cancel_schedule(self, schedule_id: str) -> bool:
        """Stop a recurring schedule (`JobScheduler.cancel_recurring`); False if
        it had already ended or is unknown."""
        return self.scheduler.cancel_recurring(schedule_id)

    async def pause_schedule(self, schedule_id: str) -> bool:
        """Stop a schedule firing until it is resumed; False if it was paused
        already, `UnknownScheduleError` if unknown."""
        return self.scheduler.pause_schedule(schedule_id)

    async def resume_schedule(self, schedule_id: str) -> bool:
        """Let a paused schedule fire again, from its next period after now;
        False if it was not paused, `UnknownScheduleError` if unknown."""
        return self.scheduler.resume_schedule(schedule_id)

    async def trigger_schedule(self, schedule_id: str) -> str:
        """Submit the schedule's job once, now, without moving its next fire;
        returns the job's id. `UnknownScheduleError` if unknown."""
        return self.scheduler.trigger_schedule(schedule_id)

    # ── operator actions: the queue ─────────────────────────────────
    async def pause_queue(self, name: str | None = None) -> bool:
        """Start no new job (running ones finish) of any queue (`name` None) or
        of the queue `name`; False if paused already."""
        return self.scheduler.pause_queue(name)

    async def resume_queue(self, name: str | None = None) -> bool:
        """Start jobs again, of every queue or of the queue `name`; False if
        it was not paused."""
        return self.scheduler.resume_queue(name)

    async def queue_paused(self, name: str | None = None) -> bool:
        """Whether every queue is paused (`name` None); with a name, whether
        that queue's jobs are held back (it is paused, or all are)."""
        scheduler = self.scheduler
        if name is None:
            return scheduler.queue_paused
        return scheduler.queue_paused or check_queue(name) in scheduler.paused_queues

    async def queues(self) -> list[QueueInfo]:
        """Each queue at a glance, by name: the queues this scheduler serves,
        those its remembered jobs name, and ``"default"`` (`Client.queues`)."""
        return self._stats.queues()

    # ── live views ──────────────────────────────────────────────────
    async def wait_for_change(self, timeout: float) -> bool:
        """Return when some job changed (submitted, started, finished,
        progressed), or after `timeout` seconds; True if something changed.

        The first call attaches two listeners to the scheduler (a transition
        and a progress listener setting an event); `close` takes them off.
        """
        return await self._next_change(check_seconds("timeout", timeout))

    async def _next_change(self, timeout: float | None) -> bool:
        event = self._changed
        if event is None:
            event = self._changed = asyncio.Event()
            self.scheduler.add_listener(self._on_transition)
            self.scheduler.add_progress_listener(self._on_progress)
        with contextlib.suppress(TimeoutError, asyncio.TimeoutError):
            await asyncio.wait_for(event.wait(), timeout)
        return event.is_set()

    def _on_transition(self, job: Job, old: JobStatus, new: JobStatus) -> None:
        self._wake()

    def _on_progress(self, job: Job, done: float, total: float | None, message: Any) -> None:
        self._wake()

    def _wake(self) -> None:
        # Each waiter holds the event it waits on: set it, and give the next
        # waiters a fresh one. Every waiter sees every change.
        event = self._changed
        if event is not None:
            event.set()
            self._changed = asyncio.Event()


def _seq(job: Job) -> int:
    return job.seq


def _matches(info: JobInfo, needle: str) -> bool:
    if needle in info.job_id.lower() or needle in info.type.lower():
        return True
    if info.name is not None and needle in info.name.lower():
        return True
    try:
        return needle in encode_json(info.args).lower()
    except (TypeError, ValueError):
        return needle in json.dumps(info.args, default=repr).lower()


def _no_connection(conn: Any) -> None:
    if conn is not None:
        raise SchedulerError(
            f"conn={conn!r}: an in-process scheduler keeps its jobs in its own memory, "
            "so it cannot insert them in an application's transaction; conn= needs a "
            "Client on a database store (postgresql://, or a shared sqlite:/// file)"
        )


#: LocalClient implements the operator contract: mypy checks it here.
_OPERATOR: type[OperatorAPI] = LocalClient
