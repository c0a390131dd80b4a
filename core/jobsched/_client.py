"""`Client` and `BlockingClient`: submit and follow jobs on a shared store, never run one.

A web app, a script or ``jobsched run FILE --store URL`` enqueues work through
a client; ``jobsched worker --store URL`` processes claim and run it. The
client talks to the store only (``insert``, ``get``, ``jobs``,
``request_cancel``, ``wait_finished``, the schedule calls of `SharedStore`):
it builds no scheduler, claims nothing and holds no lease.

`BlockingClient` is the same API as plain calls, for code without an event
loop (Django, Flask, scripts): it runs a `Client` on its own loop thread and
hands each call to it with `asyncio.run_coroutine_threadsafe`, so any number
of threads may share one.

Across `os.fork` (gunicorn ``--preload``, Celery's prefork pool,
multiprocessing's "fork" start method) a child must never use its parent's
connection, event loop or thread: a `BlockingClient` made from a store URL
reopens itself in the child at its first call there; an async `Client`
refuses every call in the child, saying to open a new one there.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import math
import os
import secrets
import threading
import time
import weakref
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence, Set
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

import attrs
import structlog

from ._codec import JobCodec, sort_key
from ._errors import (
    InvalidTransitionError,
    JobFailedError,
    SchedulerError,
    UnknownJobError,
    UnknownScheduleError,
)
from ._job import FunctionJob, Job, new_job_id
from ._limits import Limits
from ._options import (
    NOT_GIVEN,
    NotGiven,
    check_job_id,
    id_list,
    to_priority,
)
from ._plugins import PluginManager, default_plugin_manager
from ._result_of import markers_in
from ._status import JobPriority, JobStatus
from ._submission import (
    Submission,
    check_submission,
    check_workflow_options,
    overrides,
    with_options,
)
from ._trigger_rules import ALL_SUCCESS
from ._workflow import Workflow, expand
from .backends.schedules import (
    ended,
    next_fire,
    overdue,
    schedule_row,
    serve,
    triggered_job,
)
from .store import (
    AttemptRow,
    NewJob,
    SharedJobRow,
    SharedScheduleRow,
    StoreContext,
    StoreStats,
    new_worker_id,
    resolve_store,
)

T = TypeVar("T")
P = ParamSpec("P")

logger = structlog.get_logger("jobsched.client")

#: The store calls a client needs: a store without them cannot be shared.
_CLIENT_CALLS = ("insert", "get", "jobs", "request_cancel", "wait_finished")
#: The statuses `retry` and `requeue` take a job from.
RETRYABLE = frozenset({"failed", "timed_out", "cancelled"})
TERMINAL_STATUSES = frozenset({"completed", "failed", "timed_out", "cancelled"})
#: Minutes of throughput `Client.stats` reports.
_THROUGHPUT_MINUTES = 60
#: How long a waiter sleeps without a "finished" notification before it looks
#: again anyway (a notification lost while the store reconnected).
_SAFETY_POLL = 5.0

#: The clients of this process, told in a forked child that what they hold
#: (a connection, an event loop, a thread) is the parent's.
_clients: weakref.WeakSet[Client | BlockingClient] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    # Runs in the child, in its only thread, before anything else does.
    for client in list(_clients):
        client._forked()


if hasattr(os, "register_at_fork"):  # not on Windows, which cannot fork
    os.register_at_fork(after_in_child=_after_fork_in_child)


@attrs.frozen(kw_only=True)
class Progress:
    """What a running job last reported with `jobsched.progress` (`JobInfo.progress`)."""

    #: Work done so far, in the job's own unit.
    done: float
    #: The whole work in that unit, None if unknown.
    total: float | None
    message: str | None
    #: When it was reported, wall clock.
    updated_at: float

    @classmethod
    def from_data(cls, data: Mapping[str, Any] | None) -> Progress | None:
        """The record of a store's progress mapping (None stays None)."""
        if not data:
            return None
        total = data.get("total")
        return cls(
            done=float(data.get("done") or 0.0),
            total=None if total is None else float(total),
            message=data.get("message"),
            updated_at=float(data.get("updated_at") or 0.0),
        )


@attrs.frozen(kw_only=True)
class Attempt:
    """One ended attempt of a job (`JobInfo.history`)."""

    #: 1 for the first attempt (a retried job counts from 1 again).
    number: int
    #: How it ended: ``completed``, ``failed``, ``timed_out``, ``cancelled``,
    #: ``handed_back`` (its worker shut down and gave the job back to run
    #: again) or ``lease_expired`` (its worker died; the job was queued
    #: again). A store's older rows may read ``retry_wait``: it failed and
    #: another attempt followed.
    status: str
    error: str | None
    started_at: float | None
    finished_at: float | None
    #: The worker that ran it (``host:pid:random``).
    worker: str | None

    @classmethod
    def from_row(cls, row: AttemptRow) -> Attempt:
        """The public record of a store's attempt row."""
        return cls(
            number=row.number,
            status=row.status,
            error=row.error,
            started_at=row.started_at,
            finished_at=row.finished_at,
            worker=row.worker,
        )


@attrs.frozen(kw_only=True)
class JobInfo:
    """A job as the store holds it now: what `Client.get`, `jobs` and `wait` return.

    Times are wall-clock epoch seconds (None until they happen).
    """

    job_id: str
    #: The registered job-type name and the arguments it is built from.
    type: str
    args: Mapping[str, Any]
    status: JobStatus
    name: str | None
    priority: JobPriority
    #: Attempts started so far (a retried job has more than one).
    attempts: int
    #: The last attempt's error ("ConnectionError: ..."), None if it had none
    #: (a completed job has none: an earlier attempt's error is in `history`).
    last_error: str | None
    #: What a COMPLETED job returned (JSON; a result that is not JSON is stored as
    #: a mapping with its repr). None once expired (`result_expires`).
    result: Any
    #: The worker holding the job while it runs (``host:pid``) and until when.
    lease_owner: str | None
    lease_expires: float | None
    key: str | None
    unique_key: str | None
    #: The recurring schedule that fired it, if any.
    schedule_id: str | None
    #: Who submitted it (a client's or a worker's identity).
    submitted_by: str | None
    submitted_at: float
    #: When it may start (after `delay`, or when its retry backoff ends).
    run_at: float
    started_at: float | None
    finished_at: float | None
    #: What the job last reported with `jobsched.progress`, None if nothing.
    progress: Progress | None = None
    #: Its ended attempts, oldest first (`get` fills it; lists leave it empty).
    history: tuple[Attempt, ...] = ()
    #: The jobs it waits (or waited) for (`get` fills it; lists leave it empty).
    #: The jobs that wait for it: `Client.dependents`.
    depends_on: tuple[str, ...] = ()
    #: When it runs given how `depends_on` end: ``"all_success"`` (the
    #: default), ``"all_done"``, ``"one_success"``, ``"one_failed"`` or
    #: ``"none_failed"`` (docs/tasks.md).
    trigger_rule: str = "all_success"
    #: Its stored options (``name``, ``executor``, ``priority``, ``timeout``,
    #: ``retry``, ``result_ttl``, ...: spelled as the codec stores them).
    options: Mapping[str, Any] = attrs.field(factory=dict)
    #: When its result is removed (its ``result_ttl``), None if it is kept.
    result_expires: float | None = None

    @property
    def done(self) -> bool:
        """Whether the job reached a terminal status (it will not run again)."""
        return self.status.is_terminal

    @classmethod
    def from_row(cls, row: SharedJobRow) -> JobInfo:
        """The public record of a shared store's row."""
        priority = row.options.get("priority")
        return cls(
            job_id=row.job_id,
            type=row.type,
            args=row.args,
            status=JobStatus(row.status),
            name=row.options.get("name"),
            priority=JobPriority.MEDIUM if priority is None else to_priority(priority),
            attempts=row.attempts,
            # A row stored before completions cleared it may still hold one.
            last_error=None if row.status == "completed" else row.last_error,
            result=row.result,
            lease_owner=row.lease_owner,
            lease_expires=row.lease_expires,
            key=row.key,
            unique_key=row.unique_key,
            schedule_id=row.schedule_id,
            submitted_by=row.submitted_by,
            submitted_at=row.submitted_at,
            run_at=row.run_at,
            started_at=row.started_at,
            finished_at=row.finished_at,
            progress=Progress.from_data(row.progress),
            history=tuple(Attempt.from_row(a) for a in row.history),
            depends_on=tuple(row.depends_on),
            trigger_rule=row.trigger_rule,
            options=row.options,
            result_expires=row.result_expires,
        )


@attrs.frozen(kw_only=True)
class JobPage:
    """One page of `Client.page`: the jobs (newest first) and how many match in all."""

    jobs: list[JobInfo]
    total: int


@attrs.frozen(kw_only=True)
class ThroughputBucket:
    """Jobs that ended in one minute (`Stats.throughput`)."""

    #: The minute's start, wall clock (a multiple of 60).
    start: float
    completed: int
    #: Failed and timed-out jobs.
    failed: int


@attrs.frozen(kw_only=True)
class WorkerInfo:
    """A worker holding leases on running jobs (`Stats.workers`)."""

    worker: str
    #: How many jobs it runs.
    running: int
    #: The latest of its leases' expiry times.
    lease_expires: float | None


@attrs.frozen(kw_only=True)
class LimitUse:
    """One cluster limit and how much of it is used now (`Stats.limits`)."""

    #: ``"executor"``, ``"job_type"`` or ``"rate"``.
    kind: str
    #: The executor or job type it limits.
    name: str
    #: Most running jobs (a rate: its burst).
    limit: int
    #: Running jobs now (a rate: tokens of the burst in use).
    in_use: int


@attrs.frozen(kw_only=True)
class Stats:
    """The queue at a glance (`Client.stats`)."""

    #: Jobs per status, every status present (0 when none).
    counts: dict[str, int]
    #: One bucket per minute over the last hour, oldest first (60, zeros included).
    throughput: list[ThroughputBucket]
    workers: list[WorkerInfo]
    limits: list[LimitUse]
    queue_paused: bool
    #: When the store was read (its clock).
    at: float
    #: Calls a timeout or cancel gave up on that still run on a thread or pool
    #: process (`JobScheduler.abandoned_calls`): `LocalClient` counts its
    #: scheduler's; None from a `Client`, which cannot see the workers' threads.
    abandoned: int | None = None


@attrs.frozen(kw_only=True)
class ScheduleInfo:
    """A recurring schedule as the store holds it (`Client.schedules`)."""

    schedule_id: str
    #: The fired job's name (``options["name"]``).
    name: str | None
    #: The fired job's registered type.
    type: str
    #: When it fires: ``{"interval": seconds, "origin": ...}`` or a wall-clock
    #: trigger such as ``{"cron": "0 2 * * *", "tz": "UTC"}``.
    trigger: Mapping[str, Any]
    #: Its next fire time, wall clock; None once it has ended.
    next_run: float | None
    paused: bool
    #: False once cancelled or ended.
    active: bool
    fired: int
    skipped: int
    last_job_id: str | None
    #: Its next fire is more than 10 seconds in the past and it has not fired
    #: (`jobsched.backends.schedules.OVERDUE_AFTER`): no process serves it (no
    #: worker runs, or none has its job type installed). Never for a paused or
    #: ended schedule.
    overdue: bool = False

    @classmethod
    def from_row(cls, row: SharedScheduleRow, now: float | None = None) -> ScheduleInfo:
        """The public record of a shared store's schedule row, read at `now`
        (wall clock; default: now)."""
        return cls(
            schedule_id=row.schedule_id,
            name=row.options.get("name"),
            type=row.type,
            trigger=row.trigger,
            next_run=None if ended(row) else row.next_run,
            paused=row.paused,
            active=row.active,
            fired=row.fired,
            skipped=row.skipped,
            last_job_id=row.last_job_id,
            overdue=overdue(row, time.time() if now is None else now),
        )


# ── jobs as data ───────────────────────────────────────────────────────
def _refuse_functions(job: Any) -> None:
    if isinstance(job, FunctionJob) or (callable(job) and not isinstance(job, Job)):
        raise SchedulerError(
            f"{job!r}: a plain function cannot be stored in a shared store "
            "(other hosts cannot run it); register a job type and submit that"
        )
    if not isinstance(job, Job):
        raise TypeError(f"submit() takes a Job, got {job!r}")


#: The stored jobs a submit without dependencies needs.
_NOTHING: frozenset[str] = frozenset()


def _plain(item: Submission) -> bool:
    """Whether `item` is a job with none of `submit`'s options (dependencies
    aside) and no `result_of` markers to look for."""
    return (
        item.delay == 0.0
        and item.key is None
        and item.unique_key is None
        and item.trigger_rule == ALL_SUCCESS
        and not _takes_results(item.job)
        and not overrides(item)
    )


def _takes_results(job: object) -> bool:
    """Whether `job` may hold `result_of` markers; True for what is not a job
    (the checked path refuses it with the reason)."""
    return bool(getattr(job, "takes_results", True))


@attrs.frozen
class _Encoded:
    """A job checked and encoded for the store, before it has its final id."""

    type: str
    args: dict[str, Any]
    options: dict[str, Any]
    sort_key: tuple[float, ...]


class Client:
    """Submit jobs to a shared store, look them up, cancel them and wait for them.

    ``async with Client("postgresql://host/db") as client:`` (or ``await
    client.open()`` / ``await client.close()``). `store` is a URL or a store
    instance implementing `jobsched.SharedStore`. `plugins` says which job
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
        self._submit_hooks = self.plugins.submit_hooks()
        built = resolve_store(store, self.plugins)
        missing = [name for name in _CLIENT_CALLS if not hasattr(built, name)]
        if built is None or missing:
            raise SchedulerError(
                f"{store!r} is not a shared store (it lacks {', '.join(missing) or 'a URL'}): "
                "a Client needs a store several processes share, such as postgresql://host/db"
            )
        self.store: Any = built
        self.limits = limits
        if limits and not hasattr(built, "sync_limits"):
            raise SchedulerError(f"{built!r} cannot enforce limits across processes")
        #: This client's name in the store (``submitted_by``).
        self.identity = new_worker_id()
        # A random part makes job ids unique across processes and restarts.
        self._id_suffix = secrets.token_hex(6)
        self._state = "new"  # -> "open" -> "closed", or "forked" in a forked child
        self._opened_in = 0  # the process that opened it
        self._finished = 0  # "some job finished" notifications seen
        self._finished_event: asyncio.Event | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        # `submit` calls waiting to be stored together (see `_flush_submits`).
        self._queued: list[tuple[list[NewJob], Set[str], asyncio.Future[str]]] = []
        self._flusher: asyncio.Task[None] | None = None
        self._changed_event: asyncio.Event | None = None

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
        _clients.add(self)
        self._finished_event = asyncio.Event()
        self._spawn(self._watch_finished(), "jobsched-client-finished")
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
        if self._flusher is not None:
            # Submits already accepted are stored before the store closes.
            await asyncio.gather(self._flusher, return_exceptions=True)
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
        applies to a job without one).

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
        """
        if isinstance(job, Workflow):
            check_workflow_options(
                job,
                delay=delay,
                given=(key, unique_key, priority, retry, name, result_ttl, keep_result),
                timeout=timeout,
                trigger_rule=trigger_rule,
            )
            plan = job.plan(())
            self._check_open()
            planned = self._rows(
                [
                    Submission(j, depends_on=after or tuple(id_list(depends_on, "depends_on")))
                    for j, after in plan
                ]
            )
            return (await self._store(*planned))[-1]
        self._check_open()
        # Checked and encoded now: a bad job is refused at the call.
        rows: list[NewJob]
        outside: Set[str]
        if (
            delay == 0.0
            and depends_on == ()
            and key is None
            and unique_key is None
            and priority is None
            and timeout is NOT_GIVEN
            and retry is None
            and name is None
            and result_ttl is None
            and keep_result is None
            and trigger_rule == ALL_SUCCESS
            and not _takes_results(job)
        ):
            now = time.time()
            rows, outside = [self._plain_row(job, now, now - time.monotonic())], _NOTHING
        else:
            submission = Submission(
                job,
                delay=delay,
                depends_on=tuple(id_list(depends_on, "depends_on")),
                key=key,
                unique_key=unique_key,
                priority=priority,
                timeout=timeout,
                retry=retry,
                name=name,
                result_ttl=result_ttl,
                keep_result=keep_result,
                trigger_rule=trigger_rule,
            )
            rows, outside = self._rows([submission])
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._queued.append((rows, outside, future))
        if self._flusher is None:
            self._flusher = asyncio.create_task(
                self._flush_submits(), name="jobsched-client-submits"
            )
        return await future

    async def _flush_submits(self) -> None:
        # Runs one loop iteration after the first queued submit, so every
        # submit made in that iteration is in its first batch; the ones made
        # while a batch is written form the next.
        try:
            while self._queued:
                batch, self._queued = self._queued, []
                await self._store_queued(batch)
        finally:
            self._flusher = None

    async def _store_queued(
        self, batch: list[tuple[list[NewJob], Set[str], asyncio.Future[str]]]
    ) -> None:
        try:
            ids = await self._store(
                [row for rows, _, _ in batch for row in rows],
                set().union(*(outside for _, outside, _ in batch)),
            )
        except Exception as exc:
            if len(batch) == 1:
                _settle(batch[0][2], exc=exc)
                return
            # One bad job (an unknown dependency) must not fail the others:
            # store them one by one, each caller getting its own answer.
            for rows, outside, future in batch:
                try:
                    (job_id,) = await self._store(rows, outside)
                except Exception as one:
                    _settle(future, exc=one)
                else:
                    _settle(future, result=job_id)
            return
        for (_, _, future), job_id in zip(batch, ids, strict=True):
            _settle(future, result=job_id)

    async def submit_many(self, jobs: Iterable[Job | Submission | Workflow]) -> list[str]:
        """Store several jobs in one transaction (one round trip); returns their ids.

        Each item is a `Job`, a `Submission` (a job with `submit`'s options)
        or a workflow (`jobsched.chain`, `group`, `chord`: each of its jobs
        gets an id, in its submit order); a `Submission` may depend on an
        earlier `Job` of the same batch by naming the object, and so may a
        `result_of` marker. Every job is checked before anything is stored:
        one bad job stores none.
        """
        self._check_open()
        items = [
            item if isinstance(item, Submission) else Submission(item, depends_on=after)
            for item, after in expand(jobs)
        ]
        rows, outside = self._rows(items)
        return await self._store(rows, outside)

    def _rows(self, items: Sequence[Submission]) -> tuple[list[NewJob], set[str]]:
        """The store rows for `items` (each checked), and the stored ids they depend on."""
        now = time.time()
        offset = now - time.monotonic()
        rows: list[NewJob] = []
        ids_in_batch: dict[int, str] = {}
        in_batch: set[str] = set()  # the ids given so far, for result_of's upstreams
        outside: set[str] = set()

        def id_of(job: Job) -> str:
            if id(job) not in ids_in_batch:
                raise ValueError(
                    f"result_of: {job!r} is not an earlier job of this batch; "
                    "name a stored job by the id submit returned"
                )
            return ids_in_batch[id(job)]

        for item in items:
            if not self._submit_hooks and not item.depends_on and _plain(item):
                row = self._plain_row(item.job, now, offset)
                ids_in_batch[id(item.job)] = row.job_id
                in_batch.add(row.job_id)
                rows.append(row)
                continue
            encoded = self._encode(item, now, offset, id_of)
            job_id = f"{new_job_id()}-{self._id_suffix}"
            depends_on: list[str] = []
            upstreams: Iterable[Any] = item.depends_on
            if item.job.takes_results:
                # The markers' upstreams, already named by id in the encoded args.
                marked = [
                    upstream
                    for value in encoded.args.values()
                    for marker in markers_in(value)
                    for upstream in marker.ids(str)
                ]
                if marked:
                    known = {ids_in_batch.get(id(d), d) for d in upstreams}
                    upstreams = [*upstreams, *(m for m in dict.fromkeys(marked) if m not in known)]
            for dep in upstreams:
                if isinstance(dep, Job):
                    if id(dep) not in ids_in_batch:
                        raise ValueError(
                            f"depends_on: {dep!r} is not an earlier job of this batch; "
                            "name a stored job by the id submit returned"
                        )
                    depends_on.append(ids_in_batch[id(dep)])
                elif isinstance(dep, str):
                    depends_on.append(dep)
                    if dep not in in_batch:
                        outside.add(dep)
                else:
                    raise TypeError(f"depends_on takes job ids, got {dep!r}")
            if item.trigger_rule != ALL_SUCCESS and not depends_on:
                # result_of's upstreams count: a rule may rest on them alone.
                raise ValueError(f"trigger_rule={item.trigger_rule!r} needs depends_on")
            ids_in_batch[id(item.job)] = job_id
            in_batch.add(job_id)
            rows.append(
                NewJob(
                    job_id=job_id,
                    key=item.key,
                    type=encoded.type,
                    args=encoded.args,
                    options=encoded.options,
                    run_at=now + item.delay,
                    submitted_at=now,
                    sort_key=encoded.sort_key,
                    depends_on=tuple(depends_on),
                    submitted_by=self.identity,
                    unique_key=item.unique_key,
                    trigger_rule=item.trigger_rule,
                )
            )
        return rows, outside

    def _plain_row(self, job: Job, now: float, offset: float) -> NewJob:
        """The row of a job submitted without options (the common case, kept lean)."""
        if self._submit_hooks:
            rows, _ = self._rows([Submission(job)])
            return rows[0]
        _refuse_functions(job)
        encoded = self._describe(job, now, offset)
        return NewJob(
            job_id=f"{new_job_id()}-{self._id_suffix}",
            type=encoded.type,
            args=encoded.args,
            options=encoded.options,
            run_at=now,
            submitted_at=now,
            sort_key=encoded.sort_key,
            submitted_by=self.identity,
        )

    async def _store(self, rows: list[NewJob], outside: Set[str]) -> list[str]:
        """Insert `rows` (`outside`: the stored jobs they depend on, which must exist)."""
        if outside:
            known = {row.job_id for row in await self.store.jobs(sorted(outside))}
            unknown = sorted(outside - known)
            if unknown:
                raise UnknownJobError(f"unknown dependencies: {unknown}")
        return list(await self.store.insert(rows))

    def _encode(
        self,
        item: Submission,
        now: float,
        offset: float,
        id_of: Callable[[Job], str] | None = None,
    ) -> _Encoded:
        """`item`'s job as data, its options overridden and checked, and its sort key.

        `offset` turns the job's monotonic times into wall-clock time; `id_of`
        names an earlier job of the batch that a `result_of` marker holds.
        """
        check_submission(item)
        _refuse_functions(item.job)
        # The codec describes the job as it will be stored: a copy with the
        # submit's options, so the caller's job is never changed. Without
        # options to set or hooks that may change it, the job itself is read.
        if not self._submit_hooks and not overrides(item):
            return self._describe(item.job, now, offset, id_of)
        probe = with_options(item.job, item, self.plugins, self._submit_hooks)
        return self._describe(probe, now, offset, id_of)

    def _describe(
        self, job: Job, now: float, offset: float, id_of: Callable[[Job], str] | None = None
    ) -> _Encoded:
        """`job` as the store keeps it (the codec), and its sort key; `offset`
        turns its monotonic times into wall-clock time."""
        type_name, args, options = self.codec.describe_data(job, offset, id_of)
        key = sort_key(self.strategy.key, job, submitted_at=now, offset=offset)
        return _Encoded(type_name, args, options, key)

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

    async def jobs(
        self,
        *,
        status: JobStatus | str | Iterable[JobStatus | str] | None = None,
        type: str | None = None,
        schedule: str | None = None,
        limit: int | None = None,
    ) -> list[JobInfo]:
        """Stored jobs in submit order, optionally only those in `status` (one or
        several), of job type `type` or fired by `schedule`; at most `limit`."""
        self._check_open()
        wanted = wanted_statuses(status)
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
            raise TypeError(f"limit must be an integer, got {limit!r}")
        if schedule is not None:
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
        given = [check_job_id(job_id) for job_id in id_list(job_ids, "wait_many")]
        ids = list(dict.fromkeys(given))
        deadline = None if timeout is None else time.monotonic() + timeout
        done: dict[str, JobInfo] = {}
        while True:
            seen = self._finished
            todo = [job_id for job_id in ids if job_id not in done]
            rows = {row.job_id: row for row in await self.store.jobs(todo)}
            unknown = [job_id for job_id in todo if job_id not in rows]
            if unknown:
                raise UnknownJobError(f"unknown jobs {unknown} in {self.store.url}")
            for row in rows.values():
                if JobStatus(row.status).is_terminal:
                    done[row.job_id] = JobInfo.from_row(row)
            if len(done) == len(ids):
                return [done[job_id] for job_id in given]
            left = _SAFETY_POLL if deadline is None else deadline - time.monotonic()
            if left <= 0:
                pending = [job_id for job_id in ids if job_id not in done]
                raise TimeoutError(f"jobs {pending} did not finish within {timeout} s")
            await self._next_finished(seen, min(left, _SAFETY_POLL))

    async def _watch_finished(self) -> None:
        # One task consumes the store's "finished" wake-up and counts it, so
        # every waiter sees every notification (several waiters reading the
        # store's one event would take it from each other).
        # The loop also ends on the state `close` sets before cancelling this
        # task: Python 3.11's wait_for loses a cancellation that arrives as the
        # awaited event is set (a store poll seeing our own write), and
        # `close` would wait for this task forever.
        assert self._finished_event is not None
        while self._state == "open":
            await self.store.wait_finished(_SAFETY_POLL)
            self._finished += 1
            self._finished_event.set()
            self._finished_event = asyncio.Event()

    async def _next_finished(self, seen: int, timeout: float) -> None:
        """Return once a notification newer than `seen` arrived, or after `timeout`."""
        if self._finished != seen or self._finished_event is None:
            return
        with contextlib.suppress(TimeoutError, asyncio.TimeoutError):
            await asyncio.wait_for(self._finished_event.wait(), timeout)

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
        _refuse_functions(job)
        now = time.time()
        row = schedule_row(
            self.codec,
            job,
            every=every,
            trigger=trigger,
            start_in=start_in,
            times=times,
            key=key,
            allow_overlap=allow_overlap,
            now=now,
            offset=now - time.monotonic(),
        )
        stored = await self.store.add_schedule(row)
        self._spawn(
            serve(
                self.store,
                stored,
                codec=self.codec,
                strategy_key=self.strategy.key,
                submitted_by=self.identity,
                job_id_suffix=self._id_suffix,
                retry_pause=_SAFETY_POLL,
            ),
            f"jobsched-schedule-{row.schedule_id}",
        )
        return row.schedule_id

    async def cancel_schedule(self, schedule_id: str) -> bool:
        """Stop a schedule for every process; False if it had already ended."""
        self._check_open()
        return bool(await self.store.deactivate_schedule(schedule_id))

    async def wait_schedule(self, schedule_id: str, timeout: float | None = None) -> None:
        """Wait until the schedule has ended (its `times` ran, its trigger is
        exhausted, or it was cancelled); `TimeoutError` after `timeout` seconds."""
        self._check_open()
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            seen = self._finished
            if ended(await self.store.get_schedule(schedule_id)):
                return
            left = _SAFETY_POLL if deadline is None else deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"schedule {schedule_id} did not end within {timeout} s")
            # Its last run ends it: a finished job is the moment to look again.
            await self._next_finished(seen, min(left, _SAFETY_POLL, 0.25))

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
        first = (math.floor(now / 60) - (_THROUGHPUT_MINUTES - 1)) * 60.0
        raw = await self.store.stats(first)
        # The buckets follow the store's clock (it stamped finished_at).
        last = math.floor(raw.at / 60) * 60.0
        starts = [last - 60.0 * i for i in range(_THROUGHPUT_MINUTES - 1, -1, -1)]
        completed = dict.fromkeys(starts, 0)
        failed = dict.fromkeys(starts, 0)
        for minute, status, n in raw.finished:
            if status == "completed" and minute in completed:
                completed[minute] += n
            elif status in ("failed", "timed_out") and minute in failed:
                failed[minute] += n
        counts = {s.value: 0 for s in JobStatus}
        counts.update(raw.counts)
        return Stats(
            counts=counts,
            throughput=[
                ThroughputBucket(start=m, completed=completed[m], failed=failed[m]) for m in starts
            ],
            workers=[
                WorkerInfo(worker=owner, running=n, lease_expires=expires)
                for owner, n, expires in sorted(raw.leases)
            ],
            limits=_limit_uses(raw),
            queue_paused=raw.queue_paused,
            at=raw.at,
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
        wanted = wanted_statuses(status) or frozenset()
        wrong = sorted(wanted - RETRYABLE)
        if wrong or not wanted:
            raise ValueError(
                "requeue takes failed, timed_out or cancelled jobs, "
                f"not {', '.join(wrong) or 'none'}"
            )
        if type is not None and not isinstance(type, str):
            raise TypeError(f"type must be a string, got {type!r}")
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
        seconds = _check_seconds("older_than", older_than)
        wanted = wanted_statuses(status) or TERMINAL_STATUSES
        wrong = sorted(wanted - TERMINAL_STATUSES)
        if wrong:
            raise ValueError(
                f"purge deletes finished jobs only; {', '.join(wrong)} is not a finished status "
                f"(finished: {', '.join(sorted(TERMINAL_STATUSES))})"
            )
        return int(await self.store.purge(time.time() - seconds, sorted(wanted)))

    # ── operator actions: schedules ─────────────────────────────────
    async def schedules(self) -> list[ScheduleInfo]:
        """Every stored schedule (running, paused or ended), by id; one that no
        process fires is flagged `ScheduleInfo.overdue`."""
        self._check_open()
        rows = await self.store.schedules()
        now = time.time()
        return [ScheduleInfo.from_row(row, now) for row in rows]

    async def _schedule(self, schedule_id: str) -> SharedScheduleRow:
        rows: list[SharedScheduleRow] = await self.store.schedules()
        for row in rows:
            if row.schedule_id == schedule_id:
                return row
        raise UnknownScheduleError(f"unknown schedule {schedule_id!r} in {self.store.url}")

    async def pause_schedule(self, schedule_id: str) -> bool:
        """Stop a schedule firing (for every process) until it is resumed;
        False if it was paused already, `UnknownScheduleError` if unknown."""
        self._check_open()
        if await self.store.set_schedule_paused(schedule_id, True):
            return True
        await self._schedule(schedule_id)
        return False

    async def resume_schedule(self, schedule_id: str) -> bool:
        """Let a paused schedule fire again, from its next period after now
        (the periods missed while paused are not fired); False if it was not
        paused, `UnknownScheduleError` if unknown."""
        self._check_open()
        row = await self._schedule(schedule_id)
        if not row.paused:
            return False
        now = time.time()
        next_run: float | None = None
        if not ended(row) and row.next_run <= now:
            following = next_fire(row.trigger, row.next_run, now, self._resolve_trigger)
            next_run = math.inf if following is None else following
        return bool(await self.store.set_schedule_paused(schedule_id, False, next_run))

    async def trigger_schedule(self, schedule_id: str) -> str:
        """Submit the schedule's job once, now, without moving its next fire;
        returns the job's id (counted as fired). `UnknownScheduleError` if unknown.

        The stored job is submitted as stored: its job type (a ``@task``'s
        code) need not be known here, only to the workers that run it."""
        self._check_open()
        row = await self._schedule(schedule_id)
        # The stored job is copied, not built: no job type or task code needed here.
        job = triggered_job(
            row,
            now=time.time(),
            strategy_key=self.strategy.key,
            submitted_by=self.identity,
            job_id_suffix=self._id_suffix,
        )
        if not await self.store.trigger_schedule(schedule_id, job):
            raise UnknownScheduleError(f"unknown schedule {schedule_id!r} in {self.store.url}")
        return job.job_id

    # ── operator actions: the queue ─────────────────────────────────
    async def pause_queue(self) -> bool:
        """Stop every worker claiming new jobs (running ones finish); False if
        the queue was paused already."""
        self._check_open()
        return bool(await self.store.set_queue_paused(True))

    async def resume_queue(self) -> bool:
        """Let workers claim again (they are woken); False if it was not paused."""
        self._check_open()
        return bool(await self.store.set_queue_paused(False))

    async def queue_paused(self) -> bool:
        """Whether the queue is paused."""
        self._check_open()
        return bool(await self.store.queue_paused())

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
        seconds = _check_seconds("timeout", timeout)
        if self._changed_event is None:
            self._changed_event = asyncio.Event()
            self._spawn(self._watch_changes(), "jobsched-client-changes")
        event = self._changed_event
        with contextlib.suppress(TimeoutError, asyncio.TimeoutError):
            await asyncio.wait_for(event.wait(), seconds)
        return event.is_set()

    async def _watch_changes(self) -> None:
        # One task consumes the store's wake-up and sets a fresh event per
        # change, so every waiter sees every change (as `_watch_finished`).
        while self._state == "open":
            if await self.store.wait_changed(_SAFETY_POLL):
                assert self._changed_event is not None
                self._changed_event.set()
                self._changed_event = asyncio.Event()

    @property
    def _resolve_trigger(self) -> Any:
        return lambda name: self.plugins.resolve("triggers", name)


def _settle(
    future: asyncio.Future[str], *, result: str = "", exc: BaseException | None = None
) -> None:
    """Answer a queued `submit` (unless its caller stopped waiting)."""
    if future.done():
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(result)


def _check_count(what: str, value: Any, *, low: int, high: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f">= {low}"
        raise ValueError(f"{what} must be {bound}, got {value!r}")


def _check_seconds(what: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{what} must be a number of seconds, got {value!r}")
    if not (value >= 0 and math.isfinite(value)):
        raise ValueError(f"{what} must be a finite number of seconds >= 0, got {value!r}")
    return float(value)


def _limit_uses(raw: StoreStats) -> list[LimitUse]:
    """Each stored limit with what uses it now."""
    data = raw.limits or {}
    uses = [
        LimitUse(kind=kind, name=name, limit=int(limit), in_use=running.get(name, 0))
        for kind, key, running in (
            ("executor", "executors", raw.running_executors),
            ("job_type", "job_types", raw.running_types),
        )
        for name, limit in sorted((data.get(key) or {}).items())
    ]
    for name, rate in sorted((data.get("rates") or {}).items()):
        burst = int(rate["burst"])
        interval = 1.0 / float(rate["per_second"])
        # GCRA: the bucket is `ahead` seconds of tokens in debt.
        ahead = max(raw.rate_tats.get(name, raw.at) - raw.at, 0.0)
        used = min(burst, math.ceil(ahead / interval - 1e-9))
        uses.append(LimitUse(kind="rate", name=name, limit=burst, in_use=max(used, 0)))
    return uses


def wanted_statuses(
    status: JobStatus | str | Iterable[JobStatus | str] | None,
) -> frozenset[str] | None:
    """The status values `status` names (one status or several; None: any),
    or a `ValueError` naming an unknown one."""
    if status is None:
        return None
    given = [status] if isinstance(status, JobStatus | str) else list(status)
    known = {s.value for s in JobStatus}
    values = set()
    for one in given:
        value = one.value if isinstance(one, JobStatus) else one
        if value not in known:
            raise ValueError(f"unknown status {one!r} (statuses: {', '.join(sorted(known))})")
        values.add(value)
    return frozenset(values)


def check_page_query(
    status: JobStatus | str | Iterable[JobStatus | str] | None,
    type: str | None,
    q: str | None,
    limit: int,
    offset: int,
) -> frozenset[str] | None:
    """The arguments of a ``page`` call checked (as every client checks them);
    returns the status values wanted."""
    wanted = wanted_statuses(status)
    _check_count("limit", limit, low=1, high=1000)
    _check_count("offset", offset, low=0)
    for what, value in (("type", type), ("q", q)):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{what} must be a string, got {value!r}")
    return wanted


def finished_result(info: JobInfo) -> Any:
    """A finished job's result, or `JobFailedError` if it did not complete."""
    if info.status is JobStatus.COMPLETED:
        return info.result
    raise JobFailedError.from_job(info.job_id, info.status.value, info.last_error, info.attempts)


class BlockingClient:
    """`Client` as plain calls, for code without an event loop (Django, Flask, scripts).

    ``with BlockingClient("postgresql://host/db") as client: client.submit(job)``.
    It runs a `Client` on an event loop in its own daemon thread; every
    method hands its call to that loop and blocks until it is answered, so
    several threads may use one client at once. `close` (or leaving the
    ``with`` block) stops the thread; a closed client refuses every call.

    A client opened before the process forks (gunicorn ``--preload``,
    Celery's prefork pool, multiprocessing's "fork") reopens itself in each
    child at its first call there: a new connection, loop and thread of the
    child's own, while the parent's stay the parent's (never used or closed
    in the child). That needs the store as a URL; one given as a store
    object cannot be rebuilt, and the child's calls raise `SchedulerError`
    saying so.
    """

    def __init__(
        self,
        store: Any,
        *,
        plugins: PluginManager | None = None,
        strategy: Any = "priority",
        limits: Limits | None = None,
    ) -> None:
        self._client = Client(store, plugins=plugins, strategy=strategy, limits=limits)
        # What a forked child builds its own Client from (`_reopen`).
        self._store = store
        self._options: dict[str, Any] = {"plugins": plugins, "strategy": strategy, "limits": limits}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._closed = False
        # Opened in a process this one forked from: reopen before the next call.
        self._parents = False
        self._lock = threading.Lock()
        _clients.add(self)

    def __repr__(self) -> str:
        return f"BlockingClient({self._client.store.url!r})"

    @property
    def client(self) -> Client:
        """The async `Client` it runs (for its attributes; call it only on its loop)."""
        return self._client

    def open(self) -> BlockingClient:
        """Start the loop thread and open the client; returns self."""
        with self._lock:
            if self._closed:
                raise SchedulerError(f"{self!r} is closed; open a new client")
            if self._loop is not None:
                raise SchedulerError(f"{self!r} was already opened; a client opens once")
            self._start_loop()
        try:
            self._call(Client.open)
        except BaseException:
            self.close()
            raise
        return self

    def _start_loop(self) -> tuple[asyncio.AbstractEventLoop, threading.Thread]:
        loop = asyncio.new_event_loop()
        thread = threading.Thread(
            target=loop.run_forever, name="jobsched-blocking-client", daemon=True
        )
        thread.start()
        self._loop, self._thread = loop, thread
        return loop, thread

    def _forked(self) -> None:
        """In a forked child: the loop, its thread and the client are the parent's."""
        # Another thread of the parent may have held the lock at the fork.
        self._lock = threading.Lock()
        if self._loop is not None and not self._closed:
            self._parents = True

    def _reopen(self) -> None:
        """In a forked child: a client, loop and thread of this process's own."""
        with self._lock:
            if not self._parents or self._closed:
                return
            if not isinstance(self._store, str):
                raise SchedulerError(
                    f"{self!r} was opened before this process ({os.getpid()}) forked, with a "
                    "store object, which cannot be rebuilt here: its connection stays the "
                    "parent's. Open a new BlockingClient in the child, or give the store's "
                    "URL, and the client reopens itself in each child"
                )
            # The parent's client, loop and thread are let go, never called or
            # closed: as SQLAlchemy's dispose(close=False) does. Collected before
            # this process connects: psycopg never ends a session from a process
            # that did not open it, and a SQLite handle collected here releases
            # this process's own locks only, while one left open would share its
            # lock bookkeeping with the new connection to the same file.
            self._client = Client(self._store, **self._options)
            self._loop = self._thread = None
            gc.collect()
            loop, thread = self._start_loop()
            try:
                asyncio.run_coroutine_threadsafe(self._client.open(), loop).result()
            except BaseException:
                # Not reopened: the next call tries again.
                loop.call_soon_threadsafe(loop.stop)
                thread.join()
                loop.close()
                self._loop = self._thread = None
                raise
            self._parents = False
        logger.info("client reopened after a fork", store=self._client.store.url, pid=os.getpid())

    def close(self) -> None:
        """Close the client and stop its thread. Closing twice is harmless.

        In a forked child that has not reopened the client it only marks it
        closed (what it holds is the parent's)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            loop, thread = self._loop, self._thread
            if self._parents:
                return
        if loop is None or thread is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self._client.close(), loop).result()
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join()
            loop.close()

    def __enter__(self) -> BlockingClient:
        return self.open()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _call(
        self,
        method: Callable[Concatenate[Client, P], Coroutine[Any, Any, T]],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """``method(client, *args, **kwargs)`` on the loop thread, its answer here."""
        if self._parents:
            self._reopen()
        loop = self._loop
        if self._closed or loop is None:
            state = (
                "closed; open a new client" if self._closed else "not open: use `with` or open()"
            )
            raise SchedulerError(f"{self!r} is {state}")
        if threading.current_thread() is self._thread:
            raise SchedulerError(f"{self!r} cannot be called from its own loop; use its Client")
        coro = method(self._client, *args, **kwargs)
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    def submit(self, job: Job | Workflow, **options: Any) -> str:
        """`Client.submit` (a job or a workflow)."""
        return self._call(Client.submit, job, **options)

    def submit_many(self, jobs: Iterable[Job | Submission | Workflow]) -> list[str]:
        """`Client.submit_many`."""
        return self._call(Client.submit_many, list(jobs))

    def get(self, job_id: str) -> JobInfo:
        """`Client.get`."""
        return self._call(Client.get, job_id)

    def dependents(self, job_id: str) -> list[str]:
        """`Client.dependents`."""
        return self._call(Client.dependents, job_id)

    def jobs(self, **filters: Any) -> list[JobInfo]:
        """`Client.jobs`."""
        return self._call(Client.jobs, **filters)

    def cancel(self, job_id: str) -> bool:
        """`Client.cancel`."""
        return self._call(Client.cancel, job_id)

    def wait(self, job_id: str, timeout: float | None = None) -> JobInfo:
        """`Client.wait`."""
        return self._call(Client.wait, job_id, timeout=timeout)

    def wait_many(self, job_ids: Iterable[str], timeout: float | None = None) -> list[JobInfo]:
        """`Client.wait_many`."""
        return self._call(Client.wait_many, id_list(job_ids, "wait_many"), timeout=timeout)

    def add_schedule(self, job: Job, **options: Any) -> str:
        """`Client.add_schedule` (the workers serve the schedule, and this client while open)."""
        return self._call(Client.add_schedule, job, **options)

    def cancel_schedule(self, schedule_id: str) -> bool:
        """`Client.cancel_schedule`."""
        return self._call(Client.cancel_schedule, schedule_id)

    def wait_schedule(self, schedule_id: str, timeout: float | None = None) -> None:
        """`Client.wait_schedule`."""
        return self._call(Client.wait_schedule, schedule_id, timeout=timeout)

    def result(self, job_id: str, timeout: float | None = None) -> Any:
        """`Client.result`."""
        return self._call(Client.result, job_id, timeout=timeout)

    def page(self, **filters: Any) -> JobPage:
        """`Client.page`."""
        return self._call(Client.page, **filters)

    def stats(self) -> Stats:
        """`Client.stats`."""
        return self._call(Client.stats)

    def retry(self, job_id: str) -> JobInfo:
        """`Client.retry`."""
        return self._call(Client.retry, job_id)

    def requeue(self, **filters: Any) -> list[str]:
        """`Client.requeue`."""
        return self._call(Client.requeue, **filters)

    def purge(self, *, older_than: float, status: Any = None) -> int:
        """`Client.purge`."""
        return self._call(Client.purge, older_than=older_than, status=status)

    def schedules(self) -> list[ScheduleInfo]:
        """`Client.schedules`."""
        return self._call(Client.schedules)

    def pause_schedule(self, schedule_id: str) -> bool:
        """`Client.pause_schedule`."""
        return self._call(Client.pause_schedule, schedule_id)

    def resume_schedule(self, schedule_id: str) -> bool:
        """`Client.resume_schedule`."""
        return self._call(Client.resume_schedule, schedule_id)

    def trigger_schedule(self, schedule_id: str) -> str:
        """`Client.trigger_schedule`."""
        return self._call(Client.trigger_schedule, schedule_id)

    def pause_queue(self) -> bool:
        """`Client.pause_queue`."""
        return self._call(Client.pause_queue)

    def resume_queue(self) -> bool:
        """`Client.resume_queue`."""
        return self._call(Client.resume_queue)

    def queue_paused(self) -> bool:
        """`Client.queue_paused`."""
        return self._call(Client.queue_paused)

    def wait_for_change(self, timeout: float) -> bool:
        """`Client.wait_for_change`."""
        return self._call(Client.wait_for_change, timeout)
