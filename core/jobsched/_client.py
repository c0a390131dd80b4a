"""`Client`: submit and follow jobs on a shared store, never run one.

A web app, a script or ``jobsched run FILE --store URL`` enqueues work through
a client; ``jobsched worker --store URL`` processes claim and run it. The
client talks to the store only (``insert``, ``get``, ``jobs``,
``request_cancel``, ``wait_finished``, the schedule calls of `SharedStore`):
it builds no scheduler, claims nothing and holds no lease. `BlockingClient`
(`jobsched._blocking`) offers it as plain calls.

Across `os.fork` (gunicorn ``--preload``, Celery's prefork pool,
multiprocessing's "fork" start method) a child must never use its parent's
connection or event loop: an async `Client` refuses every call in the child,
saying to open a new one there.
"""

from __future__ import annotations

import asyncio
import math
import os
import secrets
import time
from collections.abc import Coroutine, Iterable, Mapping
from types import TracebackType
from typing import Any, cast

from ._client_schedules import ClientSchedules
from ._client_submit import Submitter
from ._client_waits import Waits
from ._codec import JobCodec
from ._errors import (
    InvalidTransitionError,
    MissingRoleError,
    SchedulerError,
    UnknownJobError,
    UnknownWorkerError,
)
from ._fork import on_fork_in_child
from ._job import Job
from ._limits import Limits
from ._operator import OperatorAPI
from ._options import (
    NOT_GIVEN,
    NotGiven,
    check_job_id,
    check_queue,
    id_batch,
    id_list,
)
from ._plugins import PluginManager, default_plugin_manager
from ._records import (
    MAX_SCHEDULE_RUNS,
    RETRYABLE,
    THROUGHPUT_MINUTES,
    History,
    JobInfo,
    JobPage,
    QueueInfo,
    ScheduleInfo,
    Stats,
    WorkerRecord,
    check_count,
    check_history_query,
    check_page_query,
    check_purge,
    check_requeue,
    check_seconds,
    finished_result,
    served_types,
    wanted_statuses,
    window_start,
)
from ._status import JobPriority, JobStatus
from ._submission import Submission
from ._workflow import Workflow
from .store import (
    UNSERVED_SCAN,
    SharedStore,
    StoreContext,
    new_worker_id,
    offers_a_role,
    require_roles,
    resolve_store,
)

#: How long a waiter sleeps without a "finished" notification before it looks
#: again anyway (a notification lost while the store reconnected).
_SAFETY_POLL = 5.0


class Client:
    """Submit jobs to a shared store, look them up, cancel them and wait for them.

    ``async with Client("postgresql://host/db") as client:`` (or ``await
    client.open()`` / ``await client.close()``). `store` is a URL or a store
    instance implementing `jobsched.store.SharedStore`. `plugins` says which job
    types, retry policies and strategies exist (default: every installed
    plugin). `strategy` (a registered name or a `SchedulingStrategy`)
    computes the key jobs are claimed in: workers claim in the store's key
    order whatever strategy they use, so give a client the strategy the
    workers use, or the jobs it submits sort by another rule than theirs.
    `limits` are the cluster's limits (docs/limits.md): stored when the
    client opens if the store has none, refused with a `StoreError` showing
    both if it has others; without them the client leaves the stored ones.

    Every method is a coroutine of the loop the client was opened on.
    """

    def __init__(
        self,
        store: Any,
        *,
        plugins: PluginManager | None = None,
        strategy: Any = "priority",
        limits: Limits | None = None,
    ) -> None:
        self.plugins = plugins if plugins is not None else default_plugin_manager()
        if isinstance(strategy, str):
            strategy = self.plugins.resolve("strategies", strategy)()
        if not callable(getattr(strategy, "key", None)):
            raise TypeError(f"strategy must have a key(job) method, got {strategy!r}")
        self.strategy = strategy
        self.codec = JobCodec(self.plugins)
        built = resolve_store(store, self.plugins)
        if built is None or not offers_a_role(built):
            raise SchedulerError(
                f"{store!r} is not a shared store: a Client needs a store "
                "several processes share, such as postgresql://host/db"
            )
        # The roles a client needs to open; each other role (submit, operate,
        # ...) is needed by the methods that use it, and named when missing.
        needs = ("lookup", "limits") if limits else ("lookup",)
        self.store: SharedStore = require_roles(cast(SharedStore, built), needs, "a Client")
        self.limits = limits
        #: This client's name in the store (``submitted_by``).
        self.identity = new_worker_id()
        # A random part makes job ids unique across processes and restarts.
        self._id_suffix = secrets.token_hex(6)
        self._state = "new"  # -> "open" -> "closed", or "forked" in a forked child
        self._opened_in = 0  # the process that opened it
        self._tasks: set[asyncio.Task[Any]] = set()
        # Submits are planned, batched and stored by a collaborator of their own.
        self._submitter = Submitter(
            self.store,
            plugins=self.plugins,
            codec=self.codec,
            strategy=self.strategy,
            identity=self.identity,
            id_suffix=self._id_suffix,
            check_open=self._check_open,
        )
        # Stored schedules: built, edited and served by a collaborator.
        self._schedules = ClientSchedules(
            self.store,
            plugins=self.plugins,
            codec=self.codec,
            strategy=self.strategy,
            identity=self.identity,
            id_suffix=self._id_suffix,
            spawn=self._spawn,
            retry_pause=_SAFETY_POLL,
        )
        # Waiting for jobs, schedules and changes: the store's wake-ups, counted.
        self._waits = Waits(
            self.store,
            is_open=lambda: self._state == "open",
            spawn=self._spawn,
            safety_poll=_SAFETY_POLL,
        )

    def __repr__(self) -> str:
        return f"Client({self.store.url!r})"

    # ── lifecycle ───────────────────────────────────────────────────
    async def open(self) -> Client:
        """Connect to the store (creating or migrating its schema); returns the client."""
        if self._state != "new":
            raise SchedulerError(f"{self!r} was already opened; a client opens once")
        await self.store.open(StoreContext(worker_id=self.identity, shared=True, operator=True))
        if self.limits:
            try:
                await self.store.sync_limits(self.limits.as_data())
            except BaseException:
                await self.store.close()
                raise
        self._state = "open"
        self._opened_in = os.getpid()
        on_fork_in_child(self._forked)
        self._waits.start()
        return self

    def _forked(self) -> None:
        """In a forked child: the connection and the loop are the parent's."""
        if self._state == "open":
            self._state = "forked"

    async def close(self) -> None:
        """Stop serving schedules and disconnect. Closing twice is harmless.

        In a forked child it only marks the client closed: its connection is
        the parent's, which must go on using it."""
        if self._state != "open":
            self._state = "closed"
            return
        self._state = "closed"
        # Submits already accepted are stored before the store closes.
        await self._submitter.drain()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.store.close()

    async def __aenter__(self) -> Client:
        return await self.open()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def _check_open(self) -> None:
        if self._state == "open":
            return
        if self._state == "new":
            raise SchedulerError(
                f"{self!r} is not open: use `async with Client(...) as client` "
                "or `await client.open()` first"
            )
        if self._state == "forked":
            raise SchedulerError(
                f"{self!r} was opened in process {self._opened_in}, before this process "
                f"({os.getpid()}) forked from it: its connection and event loop stay the "
                "parent's. Open a new Client in the child (after the fork: gunicorn's "
                "post_fork hook, the child's own asyncio.run), or use a BlockingClient "
                "made from the store's URL, which reopens itself in the child"
            )
        raise SchedulerError(f"{self!r} is closed; open a new client")

    def _spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ── submitting ──────────────────────────────────────────────────
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
        group: str | None = None,
    ) -> str:
        """Store `job` for a worker to run; returns its id.

        `job` is a registered job type (built with `jobsched.build_job`, or an
        attrs job class a plugin registers): a plain function is refused, as
        no other process could run it. `delay` is seconds from now;
        `depends_on` are ids of stored jobs. `key` is an external id: a key the
        store knows returns that job's id and stores nothing. `unique_key`
        deduplicates while the job with that key is unfinished. `priority`,
        `timeout` (seconds per attempt; None or False: no timeout; left out:
        the job's own), `retry` and `name` override the job's own, spelled
        as in `JobScheduler.submit` (``"low"``, ``retry="none"`` or
        ``{"policy": "fixed", "seconds": 2}``).
        `result_ttl` (seconds the result is kept once completed; then a
        worker's reaper removes it) and `keep_result` (False: store no result)
        override the job's own; None keeps them (the workers' ``--result-ttl``
        applies to a job without one). `queue` puts the job in that queue
        instead of its own (``"default"`` unless its type or task names one):
        only a worker serving it claims it (docs/queues.md).

        `group` puts the job in a group (a tenant, a customer): the workers'
        ``Limits(group=N)`` caps the jobs running per group, cluster-wide,
        and claims take groups in turn (docs/limits.md, "Tenant fairness").

        `trigger_rule` says when a job with `depends_on` runs, given how they
        end: ``"all_success"`` (the default: every one completed; cancelled
        as soon as one did not), ``"all_done"``, ``"one_success"``,
        ``"one_failed"`` or ``"none_failed"`` (docs/tasks.md). The store
        applies it, whichever process finishes the upstreams; a job whose
        rule can no longer be met is cancelled with the reason. An unknown
        rule, or a rule for a job with no upstream (neither `depends_on` nor
        a `result_of` marker), is a `ValueError`.

        Concurrent calls (many coroutines submitting at once) are stored
        together, one insert for all the calls waiting at that moment; each
        call still gets its own id, or its own error.

        `job` may be a workflow (`jobsched.chain`, `group`, `chord`): its jobs
        are stored in one transaction, its first steps waiting for
        `depends_on`, and the id of its last job is returned. A task job
        whose arguments hold `jobsched.result_of` markers depends on those
        upstreams too (the stored jobs' ids, or a `Job` of the same batch).

        `conn` is the application's own connection to the store's database,
        in a transaction (docs/client.md): the job is inserted there, not
        through this client's connection, and workers are woken only when
        that transaction commits; a rollback leaves no job. PostgreSQL takes
        a psycopg connection (async or sync) or an SQLAlchemy connection or
        session (async or sync) on psycopg; shared SQLite an
        ``sqlite3.Connection`` on the store's file. The transaction is
        never committed or rolled back here; a dependency may be a job
        inserted earlier in it.
        """
        return await self._submitter.submit(
            job,
            delay=delay,
            depends_on=depends_on,
            key=key,
            unique_key=unique_key,
            priority=priority,
            timeout=timeout,
            retry=retry,
            name=name,
            result_ttl=result_ttl,
            keep_result=keep_result,
            trigger_rule=trigger_rule,
            conn=conn,
            queue=queue,
            group=group,
        )

    async def submit_many(
        self, jobs: Iterable[Job | Submission | Workflow], *, conn: Any = None
    ) -> list[str]:
        """Store several jobs in one transaction (one round trip); returns their ids.

        Each item is a `Job`, a `Submission` (a job with `submit`'s options)
        or a workflow (`jobsched.chain`, `group`, `chord`: each of its jobs
        gets an id, in its submit order); a `Submission` may depend on an
        earlier `Job` of the same batch by naming the object, and so may a
        `result_of` marker. Every job is checked before anything is stored:
        one bad job stores none. `conn`: in the application's transaction,
        as `submit` takes it.
        """
        return await self._submitter.submit_many(jobs, conn)

    def _submit_on(self, conn: Any, job: Job | Workflow, **options: Any) -> str:
        """`submit` with a sync `conn`, in the calling thread (`BlockingClient`)."""
        return self._submitter.submit_on(conn, job, **options)

    def _submit_many_on(self, conn: Any, jobs: Iterable[Job | Submission | Workflow]) -> list[str]:
        """`submit_many` with a sync `conn`, in the calling thread (`BlockingClient`)."""
        return self._submitter.submit_many_on(conn, jobs)

    # ── looking up ──────────────────────────────────────────────────
    async def get(self, job_id: str) -> JobInfo:
        """The job with this id as stored now; `UnknownJobError` if there is none."""
        self._check_open()
        row = await self.store.get(check_job_id(job_id))
        if row is None:
            raise UnknownJobError(f"unknown job {job_id!r} in {self.store.url}")
        return JobInfo.from_row(row)

    async def dependents(self, job_id: str) -> list[str]:
        """The ids of the jobs submitted to depend on this one (its downstream
        jobs: waiting, running or ended), in submit order; `UnknownJobError`
        if there is no such job.

        One indexed store query, however many jobs the store holds
        (`JobInfo.depends_on` is the other direction).
        """
        self._check_open()
        found: list[str] | None = await self.store.dependents(check_job_id(job_id))
        if found is None:
            raise UnknownJobError(f"unknown job {job_id!r} in {self.store.url}")
        return found

    async def dependents_of(self, job_ids: Iterable[str]) -> dict[str, list[str]]:
        """`dependents` of several jobs in one store read: each of `job_ids`
        that exists, mapped to the ids of its dependents in submit order (an
        unknown id is left out, not an error). The dashboard walks a whole
        workflow with it, one read per step of the walk."""
        self._check_open()
        ids = [check_job_id(job_id) for job_id in id_list(job_ids, "dependents_of")]
        found: dict[str, list[str]] = await self.store.dependents_of(ids)
        return found

    async def jobs(
        self,
        *,
        status: JobStatus | str | Iterable[JobStatus | str] | None = None,
        type: str | None = None,
        schedule: str | None = None,
        limit: int | None = None,
        ids: Iterable[str] | None = None,
    ) -> list[JobInfo]:
        """Stored jobs in submit order, optionally only those in `status` (one or
        several), of job type `type`, fired by `schedule` or with one of the
        `ids` (one store query for all of them; an unknown id is left out);
        at most `limit`."""
        self._check_open()
        wanted = wanted_statuses(status)
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
            raise TypeError(f"limit must be an integer, got {limit!r}")
        if ids is not None:
            wanted_ids = dict.fromkeys(check_job_id(i) for i in id_list(ids, "ids"))
            rows = await self.store.jobs(list(wanted_ids))
            if schedule is not None:
                rows = [row for row in rows if row.schedule_id == schedule]
        elif schedule is not None:
            rows = await self.store.schedule_jobs(schedule)
        else:
            rows = await self.store.jobs()
        found: list[JobInfo] = []
        for row in rows:
            if limit is not None and len(found) >= limit:
                break
            if (wanted is None or row.status in wanted) and (type is None or row.type == type):
                found.append(JobInfo.from_row(row))
        return found

    # ── cancelling ──────────────────────────────────────────────────
    async def cancel(self, job_id: str) -> bool:
        """Cancel a job wherever it is; False if it had already finished.

        A waiting job is cancelled at once, with the jobs that depend on it; a
        running one is cancelled by the worker that holds it (soon after).
        """
        self._check_open()
        if await self.store.request_cancel(check_job_id(job_id)):
            return True
        await self.get(job_id)  # unknown -> UnknownJobError
        return False

    # ── waiting ─────────────────────────────────────────────────────
    async def wait(self, job_id: str, timeout: float | None = None) -> JobInfo:
        """Wait until the job is finished (completed, failed, timed out or
        cancelled) and return it; `TimeoutError` after `timeout` seconds."""
        (info,) = await self.wait_many([job_id], timeout=timeout)
        return info

    async def wait_many(
        self, job_ids: Iterable[str], timeout: float | None = None
    ) -> list[JobInfo]:
        """Wait until every one of the jobs is finished; returns them in the order given.

        Woken by the store's "a job finished" notification, not by polling.
        """
        self._check_open()
        return await self._waits.wait_many(job_ids, timeout)

    # ── recurring schedules ─────────────────────────────────────────
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
        """Store a recurring schedule submitting `job` every `every` seconds (first
        after `start_in`) or whenever `trigger` fires (a mapping such as
        ``{"cron": "0 2 * * *", "tz": "Europe/Berlin"}``); returns its id.

        A schedule fires once per period however many processes serve it; the
        same job, trigger and `key` give the same id (a worker's
        ``schedule_recurring`` of the same job and trigger too), so registering
        it again (a rerun) resumes it. `times` ends it after that many runs.

        The schedule is stored: every worker on the store fires it (each
        worker serves every stored schedule whose job type it has), and so
        does this client while it is open (a client runs no job: firing a
        period only submits one), so it goes on after this process exits,
        until `cancel_schedule`. Missed periods coalesce into one fire; a
        schedule no process fires is flagged `ScheduleInfo.overdue`.
        """
        self._check_open()
        return await self._schedules.add(
            job,
            every=every,
            trigger=trigger,
            start_in=start_in,
            allow_overlap=allow_overlap,
            times=times,
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
        """Change a schedule's job arguments (`args`) or its rule (`every`
        seconds, or a `trigger` mapping such as ``{"cron": "0 2 * * *", "tz":
        "Europe/Berlin"}``); returns the schedule's id, a new one when
        anything changed.

        A schedule's id names its job and rule (``sched-<hash>``, as
        `add_schedule` makes it), so an edit is the edited schedule added
        (kept paused if the old one was) and then the old one cancelled: a
        crash in between leaves both, never neither. The job's type and
        other options, ``times``, ``key`` and ``allow_overlap`` are kept; an
        interval fires first one period from now, a trigger at its next fire.
        The job type must be installed here (the arguments are checked
        against its fields: `JobSpecError`); an ended schedule cannot be
        edited (`ValueError`). `UnknownScheduleError` if unknown.
        """
        self._check_open()
        return await self._schedules.update(schedule_id, args=args, every=every, trigger=trigger)

    async def schedule_runs(self, schedule_id: str, limit: int = 5) -> list[JobInfo]:
        """The last `limit` jobs the schedule fired (1 to `MAX_SCHEDULE_RUNS`),
        newest first, in their status now; empty for an unknown schedule.

        One indexed store query that reads `limit` rows, however many jobs
        the schedule fired."""
        self._check_open()
        check_count("limit", limit, low=1, high=MAX_SCHEDULE_RUNS)
        rows = await self.store.schedule_jobs(schedule_id, limit)
        return [JobInfo.from_row(row) for row in reversed(rows)]

    async def cancel_schedule(self, schedule_id: str) -> bool:
        """Stop a schedule for every process; False if it had already ended."""
        self._check_open()
        return bool(await self.store.deactivate_schedule(schedule_id))

    async def wait_schedule(self, schedule_id: str, timeout: float | None = None) -> None:
        """Wait until the schedule has ended (its `times` ran, its trigger is
        exhausted, or it was cancelled); `TimeoutError` after `timeout` seconds."""
        self._check_open()
        await self._waits.wait_schedule(schedule_id, timeout)

    # ── results ─────────────────────────────────────────────────────
    async def result(self, job_id: str, timeout: float | None = None) -> Any:
        """Wait until the job is finished and return its result (JSON, as stored).

        A job that failed, timed out or was cancelled raises `JobFailedError`
        (its ``error_type``, ``message`` and ``attempts``); `TimeoutError`
        after `timeout` seconds; `UnknownJobError` for an unknown id. Woken by
        the store's "a job finished" notification, as `wait` is. A result
        removed by its ``result_ttl`` reads as None.
        """
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

        `status` is one status or several (as in `jobs`); `type` a job type;
        `q` a case-insensitive substring of the job's id, name, type or
        arguments (as JSON). `limit` (1 to 1000) jobs from the `offset`-th on.
        """
        self._check_open()
        wanted = check_page_query(status, type, q, limit, offset)
        rows, total = await self.store.page(
            None if wanted is None else sorted(wanted), type, q or None, limit, offset
        )
        return JobPage(jobs=[JobInfo.from_row(row) for row in rows], total=total)

    async def stats(self) -> Stats:
        """Counts per status, throughput per minute over the last hour, the
        workers holding leases, the limits' use and whether the queue is paused."""
        self._check_open()
        now = time.time()
        first = (math.floor(now / 60) - (THROUGHPUT_MINUTES - 1)) * 60.0
        raw = await self.store.stats(first)
        return Stats.from_store(raw, await self._unserved())

    async def history(
        self, *, window: str = "24h", type: str | None = None, queue: str | None = None
    ) -> History:
        """Throughput over `window` (``"1h"``, ``"24h"`` or ``"7d"``), per job
        type, and the backlog now, of job type `type` and queue `queue`
        (None: all). Reads the history workers keep in the store (a few rows
        per type and bucket, never the finished jobs) and the unfinished jobs.
        Needs the ``history`` role."""
        self._check_open()
        step, name = check_history_query(window, type, queue)
        # A store without the role says so naming this call (its first member).
        history, backlog_of = self.store.history, self.store.backlog
        backlog, at = await backlog_of(name)
        read = await history(step, window_start(window, at), type, name)
        return History.from_rows(window, read, backlog, at, type=type, queue=name)

    async def _unserved(self) -> dict[str, int]:
        """Due jobs per job type no live worker registered (none for a store
        without the workers role: it keeps no registry to tell)."""
        try:
            rows, now = await self.store.workers()
        except MissingRoleError:
            return {}
        known = served_types(WorkerRecord.from_row(row, now) for row in rows)
        return await self.store.unserved_types(known, UNSERVED_SCAN)

    async def workers(self) -> list[WorkerRecord]:
        """Every worker in the store's registry, by id: live (running jobs),
        idle, draining (stopping: claims nothing new) and lost (no heartbeat
        for longer than its lease time; its row goes after
        `jobsched.store.WORKER_RETENTION` seconds). Needs the ``workers`` role."""
        self._check_open()
        rows, now = await self.store.workers()
        return [WorkerRecord.from_row(row, now) for row in rows]

    async def drain_worker(self, worker_id: str) -> None:
        """Ask a live worker to drain: claim nothing more (the jobs it claimed
        and has not started go back to the queue), finish its running jobs
        and stay, shown ``draining``, until stopped. Sidekiq's *quiet*.

        The worker reads the request with its next heartbeat (a third of its
        lease time), at once on a store that tells it (PostgreSQL). Draining
        is one way: a drained worker claims again only once restarted.
        `UnknownWorkerError` if no live worker has this id (never registered,
        stopped, or lost). Needs the ``workers`` role.
        """
        await self._request_worker(worker_id, "drain")

    async def stop_worker(self, worker_id: str) -> None:
        """Ask a live worker to stop: it drains (`drain_worker`), then its
        process stops as on SIGTERM (``jobsched worker``: its running jobs get
        its ``--grace``, then go back to the queue), leaving the registry.
        A `JobScheduler` a program runs itself drains and its program decides
        (``await scheduler.kernel.wait_stop_asked()``). A stop is never taken back
        by a later drain. `UnknownWorkerError` as for `drain_worker`."""
        await self._request_worker(worker_id, "stop")

    async def _request_worker(self, worker_id: str, command: str) -> None:
        self._check_open()
        if not isinstance(worker_id, str) or not worker_id:
            raise TypeError(f"a worker id is a non-empty string, got {worker_id!r}")
        if await self.store.request_worker(worker_id, command):
            return
        rows, now = await self.store.workers()
        found = next((row for row in rows if row.worker_id == worker_id), None)
        if found is None:
            raise UnknownWorkerError(
                f"unknown worker {worker_id!r} in {self.store.url} (never registered, or "
                "stopped): jobsched workers lists them"
            )
        raise UnknownWorkerError(
            f"worker {worker_id!r} is lost (no heartbeat for {now - found.last_seen:.0f}s): "
            "nothing would read the request"
        )

    # ── operator actions: jobs ──────────────────────────────────────
    async def retry(self, job_id: str) -> JobInfo:
        """Run a failed, timed-out or cancelled job again, now; returns it.

        Its attempts count from 0 again; the earlier ones stay in
        `JobInfo.history`. A job in another status raises
        `InvalidTransitionError` naming it; an unknown id `UnknownJobError`.
        """
        self._check_open()
        moved = await self.store.retry([check_job_id(job_id)])
        row = await self.store.get(job_id)
        if row is None:
            raise UnknownJobError(f"unknown job {job_id!r} in {self.store.url}")
        if not moved:
            if row.status in RETRYABLE:
                raise InvalidTransitionError(
                    f"job {job_id} cannot be retried: another unfinished job holds its "
                    f"unique_key {row.unique_key!r}"
                )
            raise InvalidTransitionError(
                f"job {job_id} is {row.status}: only failed, timed_out or cancelled jobs "
                "can be retried"
            )
        return JobInfo.from_row(row)

    async def requeue(
        self,
        *,
        status: JobStatus | str | Iterable[JobStatus | str] = ("failed",),
        type: str | None = None,
    ) -> list[str]:
        """`retry` every job in `status` (failed, timed_out and/or cancelled) of
        job type `type` (None: any); returns the ids requeued, in submit order.
        Another status is a `ValueError`."""
        self._check_open()
        wanted = check_requeue(status, type)
        return list(await self.store.requeue(sorted(wanted), type))

    async def purge(
        self,
        *,
        older_than: float,
        status: JobStatus | str | Iterable[JobStatus | str] | None = None,
    ) -> int:
        """Delete finished jobs that ended more than `older_than` seconds ago,
        with their history; returns how many. `status` narrows it to some
        terminal statuses (None: all of them); an unfinished status is a
        `ValueError`. Unfinished jobs are never deleted."""
        self._check_open()
        seconds, wanted = check_purge(older_than, status)
        return int(await self.store.purge(time.time() - seconds, sorted(wanted)))

    # ── operator actions: many jobs at once ─────────────────────────
    async def retry_many(self, job_ids: Iterable[str]) -> list[str]:
        """`retry` each failed, timed-out or cancelled job of `job_ids`, in one
        store transaction; returns the ids retried, in the order given.

        A bulk action tolerates what changed since the ids were chosen: an
        unknown id, a job in another status (one that is running again, say)
        or one whose ``unique_key`` another unfinished job holds is left
        alone and not returned, never an error. An id given twice counts
        once. A bad id (not a string, a NUL character) is a `TypeError` or
        `ValueError` naming it, before anything changes.
        """
        self._check_open()
        ids = id_batch(job_ids, "retry_many")
        if not ids:
            return []
        moved = set(await self.store.retry(ids))
        return [job_id for job_id in ids if job_id in moved]

    async def cancel_many(self, job_ids: Iterable[str]) -> list[str]:
        """`cancel` each unfinished job of `job_ids`, in one store transaction;
        returns the ids cancelled, in the order given.

        Waiting jobs are cancelled at once, with the jobs that depend on them;
        running ones are cancelled by the workers that hold them (soon after:
        they are returned, as `cancel` returns True for them). Unknown and
        finished ids are left alone and not returned, as in `retry_many`.
        """
        self._check_open()
        ids = id_batch(job_ids, "cancel_many")
        if not ids:
            return []
        return list(await self.store.request_cancel_many(ids))

    async def purge_many(self, job_ids: Iterable[str]) -> list[str]:
        """Delete the finished jobs of `job_ids` (completed, failed, timed out
        or cancelled) with their history, in one store transaction; returns
        the ids deleted, in the order given.

        `purge` by id, whenever they finished. Unfinished jobs are never
        deleted: they and unknown ids are left alone and not returned, as in
        `retry_many`.
        """
        self._check_open()
        ids = id_batch(job_ids, "purge_many")
        if not ids:
            return []
        return list(await self.store.delete_finished(ids))

    # ── operator actions: schedules ─────────────────────────────────
    async def schedules(self) -> list[ScheduleInfo]:
        """Every stored schedule (running, paused or ended), by id; one that no
        process fires is flagged `ScheduleInfo.overdue`."""
        self._check_open()
        rows = await self.store.schedules()
        now = time.time()
        return [ScheduleInfo.from_row(row, now) for row in rows]

    async def pause_schedule(self, schedule_id: str) -> bool:
        """Stop a schedule firing (for every process) until it is resumed;
        False if it was paused already, `UnknownScheduleError` if unknown."""
        self._check_open()
        if await self.store.set_schedule_paused(schedule_id, True):
            return True
        await self._schedules.find(schedule_id)
        return False

    async def resume_schedule(self, schedule_id: str) -> bool:
        """Let a paused schedule fire again, from its next period after now
        (the periods missed while paused are not fired); False if it was not
        paused, `UnknownScheduleError` if unknown."""
        self._check_open()
        return await self._schedules.resume(schedule_id)

    async def trigger_schedule(self, schedule_id: str) -> str:
        """Submit the schedule's job once, now, without moving its next fire;
        returns the job's id (counted as fired). `UnknownScheduleError` if unknown.

        The stored job is submitted as stored: its job type (a ``@task``'s
        code) need not be known here, only to the workers that run it."""
        self._check_open()
        return await self._schedules.trigger(schedule_id)

    # ── operator actions: the queue ─────────────────────────────────
    async def pause_queue(self, name: str | None = None) -> bool:
        """Stop every worker claiming new jobs (running ones finish), of every
        queue (`name` None) or of the queue `name` alone; False if it was
        paused already."""
        self._check_open()
        queue = None if name is None else check_queue(name)
        return bool(await self.store.set_queue_paused(True, queue))

    async def resume_queue(self, name: str | None = None) -> bool:
        """Let workers claim again (they are woken), from every queue (`name`
        None: undo a pause of all) or from the queue `name`; False if it was
        not paused."""
        self._check_open()
        queue = None if name is None else check_queue(name)
        return bool(await self.store.set_queue_paused(False, queue))

    async def queue_paused(self, name: str | None = None) -> bool:
        """Whether every queue is paused (`name` None); with a name, whether
        workers hold that queue's jobs back (it is paused, or all are)."""
        self._check_open()
        if name is None:
            return bool(await self.store.queue_paused())
        queue = check_queue(name)
        return bool(await self.store.queue_paused()) or bool(await self.store.queue_paused(queue))

    async def queues(self) -> list[QueueInfo]:
        """Each queue at a glance, by name (`QueueInfo`): every queue holding
        an unfinished job, finished one in the last minute or paused, and
        ``"default"``. Reads the store's unfinished jobs (not a kept count)."""
        self._check_open()
        now = time.time()
        rows = await self.store.queue_stats(now - 60.0)
        return [QueueInfo.from_row(row, now) for row in rows]

    # ── live views ──────────────────────────────────────────────────
    async def wait_for_change(self, timeout: float) -> bool:
        """Return when some job may have changed (submitted, finished, retried,
        progressed), or after `timeout` seconds; True if something changed.

        For live pages: PostgreSQL wakes it by NOTIFY (every insert, claim,
        outcome, progress write, retry, cancel, purge and result expiry
        sends one in its own statement or transaction), SQLite by its poll
        of the file (every commit, claims too, seen within the poll interval).
        Any number of coroutines may wait at once; each sees every change
        made after it began waiting.
        """
        self._check_open()
        seconds = check_seconds("timeout", timeout)
        return await self._waits.changed(seconds)


#: Client implements the operator contract: mypy checks it here.
_OPERATOR: type[OperatorAPI] = Client
