"""The store contracts: `StoreBase`, `Store` (one owner), `SharedStore`, `StoreReader`."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from ._history import BacklogRow, HistoryRead, HistoryRow
from ._rows import (
    MAX_LEASE_EXPIRIES,
    JobRow,
    LimitsData,
    NewJob,
    Outcome,
    PurgeRow,
    QueueStatsRow,
    ScheduleRow,
    SharedJobRow,
    SharedScheduleRow,
    Snapshot,
    StoreContext,
    StoreStats,
    WorkerRow,
)


# ── the contracts ──────────────────────────────────────────────────────
class StoreBase(Protocol):
    """What every store has; built by a plugin's factory as ``factory(url)``."""

    #: The URL it was built from, password masked: every error message names it.
    url: str
    #: False means the scheduler does no store work at all (the ``memory``
    #: store); True means every job is kept in the store.
    durable: bool
    #: The store's own preference: True runs the scheduler in shared mode
    #: (`SharedStore`, several processes on one queue), False in one-owner mode
    #: (`Store`). A store may implement both contracts.
    shared: bool

    async def open(self, context: StoreContext) -> Snapshot:
        """Called once, first: create or migrate the schema and take the store.

        Refuse, with a `StoreError` naming it, a schema newer than this code, a
        file or database that is not a jobsched store, or (one-owner stores) a
        store another scheduler owns; change no data when refusing. With
        ``context.readonly`` create, migrate and lock nothing (a missing store
        is an error). Returns the rows to restore (`Snapshot`; empty for a
        shared store, and for a readonly open without ``context.load``).
        """
        ...

    async def close(self) -> None:
        """Called once, last (also after a failed `open`): release everything."""
        ...


@runtime_checkable
class Store(StoreBase, Protocol):
    """A store with **one owner**: one scheduler process keeps the queues in
    memory and journals every change here (the SQLite store)."""

    async def write(self, batch: Sequence[JobRow | ScheduleRow | PurgeRow]) -> None:
        """Upsert `batch` in **one transaction**: all rows or none.

        A `PurgeRow` (an operator purged finished jobs) deletes the rows it
        describes, after the batch's other rows are written.

        Each row is the full current state of its job or schedule, keyed by
        ``job_id`` / ``schedule_id``; rows come in the order the scheduler
        changed them, `JobRow` and `ScheduleRow` mixed. Writes are never
        concurrent (the next one starts after this one returned). On failure
        raise `StoreError` with nothing written; the scheduler retries the
        same state later.
        """
        ...


@runtime_checkable
class StoreReader(StoreBase, Protocol):
    """What ``jobsched status`` reads from a durable store, a page at a time.

    Every store with the inspect role offers it (`InspectRole`); a
    one-owner store may too (the SQLite file, in either mode), opened with
    ``StoreContext(readonly=True, load=False)``. None of these reads more
    than a page of jobs into memory, however many the store holds.
    """

    async def page(
        self,
        statuses: Sequence[str] | None,
        type: str | None,
        text: str | None,
        limit: int,
        offset: int,
    ) -> tuple[list[SharedJobRow], int]:
        """One page of jobs, newest first, and how many match (`InspectRole.page`;
        a one-owner store may refuse `text` with a `StoreError`)."""
        ...

    async def counts(self) -> dict[str, int]:
        """How many jobs are in each status (`InspectRole.counts`), cheaply."""
        ...

    async def schedules(self) -> list[SharedScheduleRow]:
        """Every recurring schedule, by id (`ScheduleRole.schedules`)."""
        ...


@runtime_checkable
class SubmitRole(StoreBase, Protocol):
    """The **submit** role: put jobs into the queue (`Client.submit`)."""

    async def insert(self, jobs: Sequence[NewJob]) -> list[str]:
        """Insert `jobs` and their dependencies in one transaction.

        Keep an edge for every dependency, ended or not: `get` returns them
        as ``depends_on`` and `dependents` reads them by upstream.

        Returns one id per job, in order: the job's own, or, when the job was
        deduplicated, the id of the stored job that took its place (a job
        with its `NewJob.key` exists, or an unfinished job has its
        `NewJob.unique_key`; a later job in the batch that depends on it then
        depends on that job). Dependencies that already ended are settled
        by the job's `NewJob.trigger_rule` (`Upstreams`), in ``depends_on``
        order: a job its rule releases (for ``all_success``: every dependency
        completed) is pending at once, and one its rule can no longer meet is
        cancelled with the reason `Upstreams.settle` gives (for
        ``all_success``: ``last_error`` ``"upstream ID STATUS"``). An
        unknown dependency raises `StoreError` and inserts nothing. Wakes
        waiting processes (`wait`) when a job is due now.
        """
        ...


@runtime_checkable
class TransactionSubmit(Protocol):
    """Optional, beside the submit role: insert in the **application's own
    transaction** (`Client.submit` with ``conn=``).

    `conn` is a connection of the application to the store's database (for
    PostgreSQL a psycopg connection or an SQLAlchemy connection or session;
    for SQLite an ``sqlite3.Connection`` on the store's file). The jobs are
    inserted there, as `SubmitRole.insert` would insert them (the same rows,
    keys, unique keys and dependencies, which may be jobs inserted earlier
    in that transaction), and processes are woken only once it commits: a
    rolled-back transaction leaves no job and wakes nobody. Never commit or
    roll back the caller's transaction. A connection of another kind, to
    another database, or not in a transaction raises `StoreError` naming
    it; an unknown dependency `UnknownJobError`.
    """

    async def insert_in_transaction(self, conn: Any, jobs: Sequence[NewJob]) -> list[str]:
        """Insert `jobs` on `conn`, an async connection (awaited) or a sync
        one (used in the calling thread, as the application does)."""
        ...

    def insert_in_transaction_sync(self, conn: Any, jobs: Sequence[NewJob]) -> list[str]:
        """Insert `jobs` on `conn`, a sync connection, in the calling thread
        (`BlockingClient`); an async connection raises `StoreError`."""
        ...


@runtime_checkable
class SchemaScript(Protocol):
    """Optional: the store's schema as SQL a DBA applies (``jobsched store sql``)."""

    def migration_sql(self, since: int = 0) -> str:
        """The SQL that brings the store's schema from version `since` (0:
        none yet) to the version this code writes, as opening the store
        would; a store opened on the result migrates nothing. Another
        `since` raises `ValueError` naming the versions there are."""
        ...


@runtime_checkable
class QueueRole(StoreBase, Protocol):
    """The **queue** role: a worker's side of the queue (``jobsched worker``).

    Claims in strategy order under leases, renewals, outcomes, wake-ups and
    the worker's half of cancelling, progress and result expiry.
    """

    #: How long a claim's lease lasts, in seconds. The scheduler renews the
    #: leases it holds every ``lease_seconds / 3``; a lease not renewed in
    #: time (its process died) expires and `reap_expired` queues the job again.
    lease_seconds: float
    #: Callbacks the scheduler sets after `open` (None until then). Call them
    #: on the event loop thread, never from inside a store call's transaction.
    #: ``on_work()``: new work may be due (a job inserted, released, finished).
    on_work: Callable[[], None] | None
    #: ``on_cancel(job_id)``: some process asked to cancel this running job.
    on_cancel: Callable[[str], None] | None
    #: ``on_resync()``: notifications may have been missed (a reconnect).
    on_resync: Callable[[], None] | None

    async def claim(
        self,
        n: int,
        owner: str,
        queues: Mapping[str, int] | None = None,
        *,
        types: Sequence[str] | None = None,
        refuser: str | None = None,
    ) -> tuple[list[SharedJobRow], float | None]:
        """Take up to `n` due jobs for `owner`, in strategy order.

        `queues` maps each queue to claim from to the most jobs to take from
        it (``{"emails": 2, "reports": 8}``: at most 2 emails); jobs of other
        queues are not touched. None takes from every queue. Claiming stays
        one statement on the common path (a store walks each queue's jobs in
        strategy order, e.g. an index leading with the queue).

        Due means pending or retry_wait, released by its dependencies
        (``unmet`` 0: for ``all_success``, every one completed; see
        `NewJob.trigger_rule`), and ``run_at <= now``. With `types`, only
        jobs of those job types are due (a worker claims what it can build;
        the others wait for a worker that knows them); with `refuser`, no
        job it refused (`refuse`; in the job's ``refused_by``). Both are
        terms of the claim's own statement, never a second round trip.
        Order is ascending
        ``(sort_key, seq)``. No job is claimed by two processes (lock rows,
        e.g. ``FOR UPDATE SKIP LOCKED``, or serialize claims). Each claimed
        job becomes ``running`` with ``attempts + 1``, ``started_at = now``,
        ``lease_owner = owner`` and ``lease_expires = now + lease_seconds``.
        With cluster limits stored (`sync_limits`) jobs at a limit are
        skipped, not waited for. While every queue is paused
        (`set_queue_paused`) nothing is claimed and the next due time is
        None; checking the flag costs no extra round trip. A queue paused on
        its own is skipped, and its jobs do not count for the next due time.

        Returns the claimed rows (in claim order) and, when fewer than `n`
        were due, the wall time the next waiting job becomes due (None if
        none; only jobs this claim could take count), so the caller can
        sleep until then. A claimed row that cannot be read (changed by
        hand: `checked_shared_job` raises `BadRowError`) is not returned:
        its job is failed with that error, as `finish`
        would write it, and the other rows are returned.
        """
        ...

    async def renew(self, job_ids: Iterable[str], owner: str) -> set[str]:
        """Extend `owner`'s leases on `job_ids` to ``now + lease_seconds``.

        Returns the ids whose lease `owner` no longer holds (expired and
        reaped, or finished elsewhere): their attempt may run twice.
        """
        ...

    async def reap_expired(self, max_expiries: int = MAX_LEASE_EXPIRIES) -> int:
        """Queue again (``pending``, lease cleared, attempts kept) every running
        job whose lease expired: its process died. Each such attempt goes to
        the job's history with status ``lease_expired`` (worker: the old
        owner), and counts in the job's ``lease_expiries``. A job whose
        count reaches `max_expiries` is not queued again: it ends ``failed``
        (``last_error`` ``"lease expired N times: ..."``, the same text in its
        history entry) and settles its dependents as `finish` does, so that
        a job that kills or blocks every worker that runs it cannot walk the
        cluster. `retry` sets the count back to 0. Returns how many were
        reaped."""
        ...

    async def release(self, job_ids: Iterable[str], owner: str) -> int:
        """Give back jobs `owner` claimed but never started (shutting down):
        ``pending`` again, lease cleared, the claim's attempt uncounted.
        Returns how many were released."""
        ...

    async def refuse(
        self, refusals: Sequence[tuple[str, str]], owner: str, refuser: str, bound: int
    ) -> list[str]:
        """Hand back claimed jobs `owner` cannot build: ``(job_id, error)`` each.

        A worker that runs another version of a job's type (a rolling
        deploy) refuses it untouched: for each job still ``running`` under
        `owner`'s lease, in one transaction, ``build_refusals + 1``,
        ``last_refusal = error`` and `refuser` appended to ``refused_by``
        (a claim with that `refuser` skips it from then on); then, below
        `bound` refusals, it is ``pending`` again as `release` leaves it
        (lease cleared, the claim's attempt uncounted). A job whose count
        reaches `bound` stays running under `owner`, which fails it with
        `finish` (naming the type and the error: `build_refused_error`).
        Returns the ids that reached the bound; jobs `owner` does not hold
        are left alone. Wakes waiting processes when a job is pending again.
        """
        ...

    async def finish(self, outcomes: Sequence[Outcome], owner: str) -> list[str]:
        """Write ended attempts in one transaction; returns the ids written.

        Only jobs still ``running`` under `owner`'s lease are written (an
        expired lease means the job belongs to someone else now); the others
        are ignored. Sets status, result, error (when given), ``run_at`` (for
        retry_wait) and ``finished_at = now`` (terminal), clears the lease
        and the cancel request. In the same transaction each terminal job
        settles its waiting dependents by their trigger rule (`Upstreams`):
        one fewer unmet dependency each, released (``unmet`` 0) or cancelled
        with the reason `Upstreams.settle` gives (for ``all_success``, any
        end but completed: ``last_error`` ``"upstream ID STATUS"``); a
        dependent cancelled so settles its own dependents as ``cancelled``,
        and so on downstream. A dependent its rule released early is not
        touched by its other upstreams. Also in the same
        transaction, with one statement for the batch, each written outcome
        is appended to the job's history (`AttemptRow`, worker `owner`), and
        a completed job with `Outcome.result_ttl` gets ``result_expires``.
        Wakes waiting processes.
        """
        ...

    async def wait(self, timeout: float) -> bool:
        """Return when another process may have made work due, or after
        `timeout` seconds (``inf``: no limit). True if woken, False on timeout."""
        ...

    async def cancel_requests(self, owner: str) -> list[str]:
        """Ids of the jobs `owner` runs that someone asked to cancel (the
        scheduler polls this as a safety net for a lost ``on_cancel``)."""
        ...

    async def set_progress(self, updates: Sequence[tuple[str, dict[str, Any]]], owner: str) -> None:
        """Store the progress of running jobs, in one statement.

        Each update is ``(job_id, {"done", "total", "message", "updated_at"})``;
        only jobs still ``running`` under `owner`'s lease are written (others
        are ignored: the attempt has ended or belongs to someone else).
        Wakes `wait_changed` waiters.
        """
        ...

    async def expire_results(self) -> int:
        """Remove every result whose ``result_expires`` has passed (the job
        stays, its result None); returns how many. Called by a reaper, never on
        the hot path."""
        ...


@runtime_checkable
class LookupRole(StoreBase, Protocol):
    """The **lookup** role: read jobs by id and wait for them (`Client.get`, `Client.wait`)."""

    async def get(self, job_id: str) -> SharedJobRow | None:
        """The job with this id as stored now (with its ``history`` and
        ``depends_on``), or None if there is none."""
        ...

    async def jobs(self, job_ids: Sequence[str] | None = None) -> list[SharedJobRow]:
        """Every job (or those of `job_ids` that exist), in ``seq`` order."""
        ...

    async def dependents(self, job_id: str) -> list[str] | None:
        """The ids of the jobs inserted to depend on `job_id` (its downstream
        jobs, waiting or not, ended or not), in ``seq`` order; None if no job
        has this id.

        One indexed read (the dependencies by ``upstream``), whatever the
        store holds: the dashboard's job page calls it. A dependent purged
        since is not listed.
        """
        ...

    async def dependents_of(self, job_ids: Sequence[str]) -> dict[str, list[str]]:
        """`dependents` of several jobs in one read: each of `job_ids` that
        exists, mapped to the ids of its dependents in ``seq`` order (an
        unknown id is left out). The dashboard walks a workflow with it, one
        read per step of the walk instead of one per job.
        """
        ...

    async def unfinished(self, job_ids: Sequence[str]) -> int:
        """How many of `job_ids` exist and are not terminal yet."""
        ...

    async def wait_finished(self, timeout: float) -> bool:
        """Return when some job may have finished, or after `timeout` seconds.
        True if woken, False on timeout."""
        ...


@runtime_checkable
class InspectRole(StoreReader, Protocol):
    """The **inspect** role: the whole queue at a glance (``jobsched web``, `Client.stats`).

    A `StoreReader` (pages, counts, schedules) with the queue's statistics
    and a wake-up for live views.
    """

    async def page(
        self,
        statuses: Sequence[str] | None,
        type: str | None,
        text: str | None,
        limit: int,
        offset: int,
    ) -> tuple[list[SharedJobRow], int]:
        """One page of jobs, newest first (descending ``seq``), and how many match.

        Only jobs in `statuses` (None: any), of job type `type` (None: any)
        and, with `text`, whose id, name (``options["name"]``), type or
        arguments' JSON contain it, case-insensitively. Skips `offset`
        matching jobs and returns at most `limit`; the total counts every
        matching job. Rows come without ``history`` and ``depends_on``.
        """
        ...

    async def counts(self) -> dict[str, int]:
        """How many jobs are in each status (statuses with none are left out).

        Cheap however many jobs the store holds: a shared store keeps the
        counts (``jobsched status`` and the stats read them).
        """
        ...

    async def stats(self, since: float) -> StoreStats:
        """Counts, jobs finished per minute since `since` (wall clock), lease
        holders, running jobs per limit key, limits and the queue's pause flag,
        read in one transaction (`StoreStats`)."""
        ...

    async def queue_stats(self, since: float) -> list[QueueStatsRow]:
        """Each queue at a glance, by name (`QueueStatsRow`; jobs finished since
        `since`, wall clock), read in one transaction: every queue that holds
        an unfinished job, finished one since `since` or is paused, and
        ``"default"`` always."""
        ...

    async def wait_changed(self, timeout: float) -> bool:
        """Return when some job may have changed (submitted, claimed, finished,
        retried, progressed, purged), or after `timeout` seconds. True if
        woken. For live views: it should cost the hot path no round trip (the
        PostgreSQL store sends a claim's notification from the claiming
        statement; the SQLite store's poll sees every commit)."""
        ...


@runtime_checkable
class OperateRole(StoreBase, Protocol):
    """The **operate** role: an operator's actions on jobs and on the queue
    (``jobsched jobs retry|requeue|cancel|purge``, ``jobsched queue``)."""

    async def retry(self, job_ids: Sequence[str]) -> list[str]:
        """Run failed, timed-out or cancelled jobs again; returns the ids moved.

        Each job of `job_ids` that is in one of those statuses becomes
        ``pending`` with ``attempts`` 0, ``run_at`` now, no lease,
        ``finished_at``, result, ``result_expires``, progress, cancel request,
        lease expiries or build refusals (``refused_by`` empty);
        its history stays. A job that waits for dependencies counts the ones
        not completed again (``unmet``; with a trigger rule other than
        ``all_success``, the ones not finished: it runs once they have).
        Other ids (unknown, another status, or a job whose ``unique_key``
        another unfinished job holds now) are left as they are and not
        returned. Wakes waiting processes.
        """
        ...

    async def requeue(self, statuses: Sequence[str], type: str | None) -> list[str]:
        """`retry` every job in `statuses` (a subset of failed, timed_out and
        cancelled) of job type `type` (None: any); returns the ids moved, in
        ``seq`` order."""
        ...

    async def purge(self, before: float, statuses: Sequence[str]) -> int:
        """Delete the jobs in `statuses` (terminal ones only) that finished
        before `before` (wall clock), with their dependency edges and attempt
        history; returns how many jobs were deleted. Unfinished jobs are never
        deleted."""
        ...

    async def request_cancel(self, job_id: str) -> bool:
        """Cancel a job from any process; False if unknown or already finished.

        A waiting job is cancelled at once (``last_error`` ``"cancelled"``),
        and settles its dependents as `finish` does. A running one is flagged
        (``cancel_requested``) and its owner told (its ``on_cancel``); the
        owner stops the attempt and writes the outcome itself.
        """
        ...

    async def request_cancel_many(self, job_ids: Sequence[str]) -> list[str]:
        """`request_cancel` each job of `job_ids`, in **one transaction**;
        returns the ids cancelled or flagged, in the order given.

        Unknown and already finished ids are left alone and not returned;
        an id given twice counts once. The waiting ones are cancelled
        together and then settle their dependents as `finish` does. Wakes
        waiting processes and tells the owners of the running ones, as
        `request_cancel` does.
        """
        ...

    async def delete_finished(self, job_ids: Sequence[str]) -> list[str]:
        """Delete the terminal jobs of `job_ids` (completed, failed, timed out,
        cancelled), with their dependency edges and attempt history, in
        **one transaction**; returns the ids deleted, in the order given.

        `purge` by id: unfinished and unknown ids are left alone and not
        returned (unfinished jobs are never deleted). A one-owner file (an
        operator's `Client` on it) also keeps a job an unfinished job
        depends on, as its owner's purge does.
        """
        ...

    async def set_queue_paused(self, paused: bool, queue: str | None = None) -> bool:
        """Pause or resume claiming for the whole cluster; False if it already was.

        `queue` None pauses every queue: `claim` returns no job (and no next
        due time). A queue name pauses that queue alone, on a flag of its
        own: `claim` skips its jobs. Running jobs finish. Resuming wakes
        waiting processes.
        """
        ...

    async def queue_paused(self, queue: str | None = None) -> bool:
        """Whether claiming is paused (`set_queue_paused`): every queue's flag
        (`queue` None) or the named queue's own."""
        ...


@runtime_checkable
class ScheduleRole(StoreBase, Protocol):
    """The **schedules** role: recurring schedules shared by every process,
    fired once per period (``jobsched worker``, ``jobsched schedules``)."""

    async def add_schedule(self, schedule: SharedScheduleRow) -> SharedScheduleRow:
        """Create the schedule unless its id exists (then make it active
        again and keep its stored state); returns the schedule as stored."""
        ...

    async def get_schedule(self, schedule_id: str) -> SharedScheduleRow:
        """The schedule as stored now; `StoreError` if unknown."""
        ...

    async def fire_schedule(
        self, schedule_id: str, expected_next: float, new_next: float, job: NewJob
    ) -> bool:
        """Fire the period due at `expected_next` exactly once across processes.

        A compare-and-set: only if the active schedule's ``next_run`` is still
        `expected_next`, set it to `new_next` and, in the same transaction,
        insert `job` (as `insert` would) and count it (``fired + 1``,
        ``last_job_id``). If ``allow_overlap`` is false and the previous job
        is unfinished, the period is consumed but skipped (``skipped + 1``, no
        job). When the trigger's ``times`` is reached, set ``next_run`` to
        ``inf``. A paused schedule (`set_schedule_paused`) does not fire.
        Returns False if another process fired it first or the schedule is
        paused (nothing changed), True otherwise.
        """
        ...

    async def deactivate_schedule(self, schedule_id: str) -> bool:
        """Stop a schedule for every process; False if unknown or already stopped."""
        ...

    async def schedule_jobs(self, schedule_id: str, limit: int | None = None) -> list[SharedJobRow]:
        """The jobs a schedule fired, in ``seq`` order (empty for an unknown schedule).

        With `limit`, only the last `limit` of them (the newest, still in
        ``seq`` order), read through an index on ``(schedule_id, seq)``: the
        dashboard's "last runs" of a schedule that fired a million times
        costs `limit` rows, not a million.
        """
        ...

    async def schedules(self) -> list[SharedScheduleRow]:
        """Every schedule (active or not), ordered by id."""
        ...

    async def set_schedule_paused(
        self, schedule_id: str, paused: bool, next_run: float | None = None
    ) -> bool:
        """Pause or resume a schedule; False if unknown or already so.

        A paused schedule does not fire (`fire_schedule` returns False for it).
        Resuming sets ``next_run`` to `next_run` when given (the caller
        computes the next period after now from the trigger).
        """
        ...

    async def trigger_schedule(self, schedule_id: str, job: NewJob) -> bool:
        """Insert `job` for the schedule now, once, without moving ``next_run``;
        counts it as fired (``fired + 1``, ``last_job_id``). Paused schedules
        may be triggered. False (nothing inserted) if the schedule is unknown."""
        ...


@runtime_checkable
class LimitsRole(StoreBase, Protocol):
    """The **limits** role: the cluster's limits, agreed on by every process (docs/limits.md)."""

    async def sync_limits(self, data: LimitsData | None) -> LimitsData | None:
        """Agree on the cluster's limits when a process opens the store.

        The first process with limits stores them; a process with `data`
        that differs from the stored limits is refused (`StoreError` showing
        both); a process without limits (None) follows the stored ones.
        Returns the limits in force (None: none).
        """
        ...

    async def set_limits(self, data: LimitsData | None) -> None:
        """Replace the cluster's limits (None or empty: no limits); wakes the
        waiting processes."""
        ...


@runtime_checkable
class WorkersRole(StoreBase, Protocol):
    """The **workers** role: the worker registry, a heartbeat row per worker
    (``jobsched workers``, the dashboard's Workers page), and the requests
    operators leave on those rows (drain, stop)."""

    #: ``on_worker_request(worker_id)``: an operator asked something of this
    #: worker (`request_worker`). Set by the worker after `open`, like the
    #: queue role's callbacks; called on the event loop thread by a store
    #: with a channel between processes (PostgreSQL's NOTIFY; memory:// in
    #: its process), so the worker reads the request at once. A store
    #: without one never calls it: the worker reads it at its next heartbeat.
    on_worker_request: Callable[[str], None] | None

    async def heartbeat(self, worker: WorkerRow, forget_after: float) -> str | None:
        """Write `worker`'s row, in one transaction with the registry's
        housekeeping; returns the row's request (`request_worker`).

        Inserts the row or replaces the one with its ``worker_id``, stamping
        ``last_seen`` with the store's clock (and ``started_at`` too on the
        first write: a later one keeps it; the row's own values are ignored).
        The row's ``command`` is the store's: an insert has none, a replace
        keeps it, and it is what this call returns (``"drain"``, ``"stop"``
        or None), so a worker learns of a request in the statement it writes
        anyway. In the same transaction, deletes every row whose
        ``last_seen`` is more than `forget_after` seconds old: lost workers,
        kept that long for operators to see (`WORKER_RETENTION`).
        """
        ...

    async def request_worker(self, worker_id: str, command: str) -> bool:
        """Leave `command` (one of `WORKER_COMMANDS`: ``"drain"``, ``"stop"``)
        on a worker's row, for it to act on (`heartbeat` returns it), and
        tell it at once where the store can (`on_worker_request`).

        Requests escalate and never go back: ``"stop"`` stays over a later
        ``"drain"``. False (nothing written) if no worker has this id or it
        is lost (``now - last_seen > lost_after``: nobody would read it). An
        unknown command raises `ValueError` naming it.
        """
        ...

    async def workers(self) -> tuple[list[WorkerRow], float]:
        """Every registered worker, by id, and the store's clock when it read
        them (a worker is lost once ``now - last_seen > lost_after``). A store
        with no registry (a single-owner file) has no rows."""
        ...

    async def forget_worker(self, worker_id: str) -> bool:
        """Delete a worker's row (it stopped cleanly); False if there was none."""
        ...

    async def unserved_types(self, known: Sequence[str], scan: int) -> dict[str, int]:
        """How many due jobs of each job type not in `known` wait to be
        claimed, among the first `scan` due jobs in claim order.

        Due as `QueueRole.claim` takes them (pending or retry_wait, released
        by their dependencies, ``run_at <= now``), in ascending ``(sort_key,
        seq)``: the walk the claim makes, stopped after `scan` jobs
        (`UNSERVED_SCAN`), so that a backlog of millions costs a bounded
        read. With `known` the types live workers registered, these are the
        jobs that wait for a worker that knows their type; they stay at the
        head of that order, as no worker takes them. A store with no
        registry (a single-owner file, whose owner runs what it was given)
        returns none."""
        ...


@runtime_checkable
class HistoryRole(StoreBase, Protocol):
    """The **history** role: throughput history, per queue and job type
    (the dashboard's Overview, `Client.history`; `jobsched.store.HistoryRow`)."""

    async def add_history(self, rows: Sequence[HistoryRow]) -> None:
        """Add a worker's folded attempts, in one transaction.

        Each row is a `FOLD_STEP` bucket of one queue and job type (a
        worker's `HistoryFold`, handed over on its lease-renewal cadence;
        never on the claim or finish path). Add its counts and histogram to
        the store's row of the same key at every one of `HISTORY_STEPS`
        (creating it at zero), and, in the same transaction, delete the rows
        older than their step's `HISTORY_KEEP` (as of the store's clock).
        Concurrent writers must not lose counts (an upsert that adds, in a
        key order they share). A row that is not a `FOLD_STEP` row raises
        `ValueError` (`check_history_rows`) and writes nothing.
        """
        ...

    async def history(
        self, step: float, since: float, type: str | None, queue: str | None
    ) -> HistoryRead:
        """The kept rows of `step` (one of `HISTORY_STEPS`) whose start is at
        or after `since`, of job type `type` and queue `queue` (None: any),
        summed two ways, in one transaction: ``(start, completed, failed)``
        per bucket with rows, by start (over queues and types: the chart),
        and a `HistoryRow` per job type, by type, summed over the buckets and
        queues (histogram included: the per-type table), its ``start``
        `since` and its ``queue`` the one asked for (``"*"`` for None). Reads
        the kept rows alone, never the jobs (two aggregates the store can
        compute itself, e.g. SQL ``GROUP BY``). A single-owner store returns
        none (its owner keeps the history in memory)."""
        ...

    async def backlog(self, queue: str | None) -> tuple[list[BacklogRow], float]:
        """Each job type's queued and running jobs in each queue (`queue`
        alone, or every queue for None), by ``(queue, type)`` (`BacklogRow`:
        queued, running, the oldest due job's ``run_at``), and the store's
        clock when it read them, in one transaction; a queue and type with
        neither is left out. Queued means pending
        or retry_wait and released by its dependencies (``unmet`` 0): the
        jobs the ready indexes of `QueueRole.claim` hold, so that the read
        walks those and the running jobs, never the finished ones."""
        ...


@runtime_checkable
class SharedStore(
    SubmitRole,
    QueueRole,
    LookupRole,
    InspectRole,
    OperateRole,
    ScheduleRole,
    LimitsRole,
    WorkersRole,
    HistoryRole,
    Protocol,
):
    """A store **several processes share** as one queue (PostgreSQL): every role.

    Each method is one transaction, safe to call from many processes at once;
    a call that fails raises `StoreError` and changed nothing. Writes that may
    be retried after a lost answer (a dropped connection) must do no harm
    when repeated: guard them by the lease owner or make them idempotent.
    Wake-ups between processes (a NOTIFY, a file watch, a short poll) are the
    store's business: they reach the scheduler through `wait`,
    `wait_finished` and the callbacks (`on_work`, `on_cancel`, `on_resync`,
    `on_worker_request`).
    """


# The members each contract adds, for the checks below (tests keep them equal
# to the protocols).
BASE_MEMBERS = ("url", "durable", "shared", "open", "close")
STORE_MEMBERS = (*BASE_MEMBERS, "write")
READER_MEMBERS = (*BASE_MEMBERS, "page", "counts", "schedules")

#: Each role by the name the CLI, the dashboard and `Client` declare, with
#: the members it adds to `StoreBase` (docs/plugins.md shows who needs which).
ROLE_MEMBERS: dict[str, tuple[str, ...]] = {
    "submit": ("insert",),
    "queue": (
        "lease_seconds",
        "on_work",
        "on_cancel",
        "on_resync",
        "claim",
        "renew",
        "reap_expired",
        "release",
        "refuse",
        "finish",
        "wait",
        "cancel_requests",
        "set_progress",
        "expire_results",
    ),
    "lookup": ("get", "jobs", "dependents", "dependents_of", "unfinished", "wait_finished"),
    "inspect": ("page", "counts", "schedules", "stats", "queue_stats", "wait_changed"),
    "operate": (
        "retry",
        "requeue",
        "purge",
        "request_cancel",
        "request_cancel_many",
        "delete_finished",
        "set_queue_paused",
        "queue_paused",
    ),
    "schedules": (
        "add_schedule",
        "get_schedule",
        "fire_schedule",
        "deactivate_schedule",
        "schedule_jobs",
        "schedules",
        "set_schedule_paused",
        "trigger_schedule",
    ),
    "limits": ("sync_limits", "set_limits"),
    "workers": (
        "on_worker_request",
        "heartbeat",
        "request_worker",
        "workers",
        "forget_worker",
        "unserved_types",
    ),
    "history": ("add_history", "history", "backlog"),
}
#: The protocol of each role, by the same names.
ROLES: dict[str, type] = {
    "submit": SubmitRole,
    "queue": QueueRole,
    "lookup": LookupRole,
    "inspect": InspectRole,
    "operate": OperateRole,
    "schedules": ScheduleRole,
    "limits": LimitsRole,
    "workers": WorkersRole,
    "history": HistoryRole,
}
#: Every role: what `SharedStore` is.
SHARED_ROLES = tuple(ROLES)
SHARED_STORE_MEMBERS = tuple(
    dict.fromkeys([*BASE_MEMBERS, *(m for ms in ROLE_MEMBERS.values() for m in ms)])
)
