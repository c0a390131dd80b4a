"""`PostgresStore`: the store API over the package's parts (see the package docstring)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

from jobsched.store import (
    MAX_LEASE_EXPIRIES,
    BacklogRow,
    HistoryRead,
    HistoryRow,
    NewJob,
    Outcome,
    QueueStatsRow,
    SchemaScript,
    SharedJobRow,
    SharedScheduleRow,
    SharedStore,
    Snapshot,
    StoreContext,
    StoreError,
    StoreStats,
    TransactionSubmit,
    WorkerRow,
    check_history_rows,
    check_worker_command,
)

from .._wakeups import DelegatedWakeups
from . import claims, in_transaction, migrations, operations, queries, schedules, submit
from . import history as throughput
from . import workers as registry
from .connection import Database, Wakeups

if TYPE_CHECKING:
    import psycopg


class PostgresStore(DelegatedWakeups):
    """A shared, durable job store in PostgreSQL (see the package docstring).

    `url` is ``postgresql://user:password@host:port/db[?schema=NAME&lease=SECONDS]``.
    Every method is a coroutine run on the caller's event loop; a lost
    connection (server restart, ``pg_terminate_backend``) is re-opened and the
    operation retried. Every write is idempotent or guarded by the lease
    owner, so a retry after a commit whose answer was lost does no harm.
    """

    durable = True
    shared = True

    def __init__(self, url: str, *, lease_seconds: float | None = None) -> None:
        self.db = Database(url)
        self.wakeups: Wakeups = Wakeups(self.db)
        #: The URL with its password masked (the store API's `url`, for messages).
        self.url = self.db.url
        self.dsn = self.db.dsn
        self.schema = self.db.schema
        self.channel = self.db.channel
        lease = lease_seconds
        if lease is None:
            lease = float(self.db.options.get("lease", 30))
        if not lease > 0:
            raise StoreError(f"{self.url}: lease must be a positive number of seconds")
        self.lease_seconds = lease
        self._limits = claims.LimitsSeen()

    def __repr__(self) -> str:
        return f"PostgresStore({self.url!r})"

    # ── Lifecycle ───────────────────────────────────────────────────
    @property
    def closed(self) -> bool:
        """True once `close` was called."""
        return self.db.closed

    @property
    def reconnects(self) -> int:
        """How often a lost connection was re-opened."""
        return self.db.reconnects

    async def open(self, context: StoreContext | None = None) -> Snapshot:
        """Create or migrate the schema, then start listening for notifications.

        Raises `StoreError` for a schema newer than this code, or for a schema
        of that name that holds tables but is not a jobsched store. Returns an
        empty `Snapshot`: in shared mode nothing is restored into a process;
        the jobs stay in the database and are claimed from there.

        With ``context.readonly`` (``jobsched status``) nothing is created,
        migrated or listened to: a schema that does not exist or is not a
        jobsched store is refused with a `StoreError` naming it.
        """
        if context is not None and context.readonly:
            await migrations.check_readable(self.db)
            return Snapshot()
        await migrations.create_or_migrate(self.db)
        await self.wakeups.start()
        return Snapshot()

    async def schema_version(self) -> int:
        """The version the database is at."""
        return await migrations.schema_version(self.db)

    def migration_sql(self, since: int = 0) -> str:
        """The DDL from version `since` (0: no schema) to the current one, for
        this URL's schema, in one transaction (``jobsched store sql``)."""
        return migrations.script(self.db, since)

    async def check_schema(self) -> None:
        """`SchemaTooNewError` naming both versions if a newer jobsched migrated
        the schema since this store was opened (a worker asks on a claim error)."""
        migrations.refuse_newer(self.db, await self.schema_version())

    async def close(self) -> None:
        """Stop listening and close the connections."""
        # The listener first: it reconnects on any error until it is stopped.
        await self.wakeups.stop()
        await self.db.close()

    def connection(self) -> AbstractAsyncContextManager[psycopg.AsyncConnection[Any]]:
        """A transaction on the store's connection (for tools and tests)."""
        return self.db.connection()

    # ── Notifications ───────────────────────────────────────────────
    # The kernel sets these callbacks; they are called on the loop thread.
    # ── Submitting ──────────────────────────────────────────────────
    async def insert(self, jobs: Sequence[NewJob]) -> list[str]:
        """Insert jobs and their dependencies in one transaction; returns their ids.

        A job whose `key` already exists is not inserted again: the existing
        job's id is returned in its place (that is how a job file resumes).
        Dependencies that already ended are settled by the job's trigger rule:
        it may be due at once, or cancelled.
        """
        return await submit.insert(self.db, jobs)

    async def insert_in_transaction(self, conn: Any, jobs: Sequence[NewJob]) -> list[str]:
        """`insert` on the application's connection, in its transaction
        (`jobsched.store.TransactionSubmit`): workers are woken when it commits.

        `conn` is a psycopg 3 ``AsyncConnection`` or ``Connection`` (a sync one
        runs in the calling thread) or an SQLAlchemy ``AsyncConnection``,
        ``AsyncSession``, ``Connection`` or ``Session`` on psycopg.
        """
        return await in_transaction.insert_async(self.db, conn, jobs)

    def insert_in_transaction_sync(self, conn: Any, jobs: Sequence[NewJob]) -> list[str]:
        """`insert_in_transaction` for a sync connection, in the calling thread."""
        return in_transaction.insert_sync(self.db, conn, jobs)

    # ── Claims, leases and limits ───────────────────────────────────
    async def claim(
        self,
        n: int,
        owner: str,
        queues: Mapping[str, int] | None = None,
        *,
        types: Sequence[str] | None = None,
        refuser: str | None = None,
    ) -> tuple[list[SharedJobRow], float | None]:
        """Take up to `n` due jobs in strategy order with a lease for `owner`.

        Only jobs of `types` (None: any) that `refuser` did not refuse.
        Returns the rows (now ``running``, attempts counted) and, when fewer
        than `n` were due, the wall time the next waiting job becomes due
        (None if there is none), so the caller can sleep exactly that long.
        With cluster limits stored (`sync_limits`) the claim also enforces
        them, in the same transaction.
        """
        return await claims.claim(
            self.db, self._limits, self.lease_seconds, n, owner, queues, types, refuser
        )

    async def sync_limits(self, data: dict[str, Any] | None) -> dict[str, Any] | None:
        """Agree on the cluster's limits; returns the limits in force.

        The first process that opens the queue with limits stores them; a
        process with other limits is refused (`StoreError` showing both).
        Change them with `set_limits`.
        """
        return await claims.sync_limits(self.db, data)

    async def set_limits(self, data: dict[str, Any] | None) -> None:
        """Replace the cluster's limits (None or empty: no limits)."""
        await claims.set_limits(self.db, data)

    async def renew(self, job_ids: Iterable[str], owner: str) -> set[str]:
        """Extend `owner`'s leases on `job_ids`; returns the ids whose lease was lost."""
        return await claims.renew(self.db, self.lease_seconds, job_ids, owner)

    async def reap_expired(self, max_expiries: int = MAX_LEASE_EXPIRIES) -> int:
        """Put jobs whose lease expired (their process died) back in the queue;
        a job whose lease expired `max_expiries` times fails instead."""
        return await claims.reap_expired(self.db, max_expiries)

    async def release(self, job_ids: Iterable[str], owner: str) -> int:
        """Give back claimed jobs that never started (their attempt is not counted)."""
        return await claims.release(self.db, job_ids, owner)

    async def refuse(
        self, refusals: Sequence[tuple[str, str]], owner: str, refuser: str, bound: int
    ) -> list[str]:
        """Hand back claimed jobs `owner` cannot build (`SharedStore.refuse`);
        returns the ids that reached `bound` (still held, for `owner` to fail)."""
        return await claims.refuse(self.db, refusals, owner, refuser, bound)

    async def finish(self, outcomes: Sequence[Outcome], owner: str) -> list[str]:
        """Record attempts that ended, in one transaction; returns the ids written.

        Only jobs `owner` still holds are written. Terminal jobs settle their
        dependents by their trigger rules (released, one fewer to wait for,
        or cancelled with the reason, and so on downstream), all in the
        same transaction.
        """
        return await claims.finish(self.db, self._limits, outcomes, owner)

    async def request_cancel(self, job_id: str) -> bool:
        """Cancel a job from any process; False if unknown or already finished.

        A waiting job is cancelled at once (its dependents settled as
        `finish` does); a running
        one is flagged and its owner notified, which cancels the attempt.
        """
        return await claims.request_cancel(self.db, job_id)

    async def request_cancel_many(self, job_ids: Sequence[str]) -> list[str]:
        """`request_cancel` each of `job_ids` in one transaction; the ids
        cancelled or flagged, in the order given."""
        return await operations.request_cancel_many(self.db, job_ids)

    async def delete_finished(self, job_ids: Sequence[str]) -> list[str]:
        """Delete the terminal jobs of `job_ids` in one transaction; the ids
        deleted, in the order given."""
        return await operations.delete_finished(self.db, job_ids)

    async def cancel_requests(self, owner: str) -> list[str]:
        """Jobs `owner` runs that someone asked to cancel (the safety net for NOTIFY)."""
        return await claims.cancel_requests(self.db, owner)

    # ── Schedules ───────────────────────────────────────────────────
    async def add_schedule(self, schedule: SharedScheduleRow) -> SharedScheduleRow:
        """Create the schedule unless it exists; returns the stored one."""
        return await schedules.add_schedule(self.db, schedule)

    async def get_schedule(self, schedule_id: str) -> SharedScheduleRow:
        """The schedule as stored now."""
        return await schedules.get_schedule(self.db, schedule_id)

    async def fire_schedule(
        self, schedule_id: str, expected_next: float, new_next: float, job: NewJob
    ) -> bool:
        """Fire the period due at `expected_next` exactly once across processes."""
        return await schedules.fire_schedule(self.db, schedule_id, expected_next, new_next, job)

    async def deactivate_schedule(self, schedule_id: str) -> bool:
        """Stop a schedule for every process; False if unknown or already stopped."""
        return await schedules.deactivate_schedule(self.db, schedule_id)

    async def schedule_jobs(self, schedule_id: str, limit: int | None = None) -> list[SharedJobRow]:
        """The jobs a schedule fired, in the order they were fired (the last `limit`)."""
        return await schedules.schedule_jobs(self.db, schedule_id, limit)

    # ── Reading ─────────────────────────────────────────────────────
    async def get(self, job_id: str) -> SharedJobRow | None:
        """One job, or None."""
        return await queries.get(self.db, job_id)

    async def jobs(self, job_ids: Sequence[str] | None = None) -> list[SharedJobRow]:
        """Every job (or those with `job_ids`), in submit order."""
        return await queries.jobs(self.db, job_ids)

    async def dependents(self, job_id: str) -> list[str] | None:
        """The ids of the jobs that depend on `job_id`, in submit order; None if unknown."""
        return await queries.dependents(self.db, job_id)

    async def dependents_of(self, job_ids: Sequence[str]) -> dict[str, list[str]]:
        """`dependents` of several jobs in one read; unknown ids left out."""
        return await queries.dependents_of(self.db, job_ids)

    async def counts(self) -> dict[str, int]:
        """How many jobs are in each status (the kept counts: a few rows)."""
        return await queries.counts(self.db)

    async def unfinished(self, job_ids: Sequence[str]) -> int:
        """How many of `job_ids` are not terminal yet."""
        return await queries.unfinished(self.db, job_ids)

    async def page(
        self,
        statuses: Sequence[str] | None,
        type: str | None,
        text: str | None,
        limit: int,
        offset: int,
    ) -> tuple[list[SharedJobRow], int]:
        """One page of matching jobs, newest first, and how many match."""
        return await queries.page(self.db, statuses, type, text, limit, offset)

    async def stats(self, since: float) -> StoreStats:
        """Counts, finished per minute since `since`, leases, limits' use, pause flag."""
        return await queries.stats(self.db, since)

    async def queue_paused(self, queue: str | None = None) -> bool:
        """Whether claiming is paused: every queue (`queue` None) or that one."""
        return await queries.queue_paused(self.db, queue)

    async def queue_stats(self, since: float) -> list[QueueStatsRow]:
        """Each queue at a glance, by name."""
        return await queries.queue_stats(self.db, since)

    # ── Operator actions ────────────────────────────────────────────
    async def retry(self, job_ids: Sequence[str]) -> list[str]:
        """Failed, timed-out or cancelled jobs back to pending; the ids moved."""
        return await operations.retry(self.db, job_ids)

    async def requeue(self, statuses: Sequence[str], type: str | None) -> list[str]:
        """`retry` every job in `statuses` of job type `type`; the ids moved."""
        return await operations.requeue(self.db, statuses, type)

    async def purge(self, before: float, statuses: Sequence[str]) -> int:
        """Delete terminal jobs finished before `before`; how many."""
        return await operations.purge(self.db, before, statuses)

    async def expire_results(self) -> int:
        """Remove results whose ``result_expires`` has passed; how many."""
        return await operations.expire_results(self.db)

    async def set_progress(self, updates: Sequence[tuple[str, dict[str, Any]]], owner: str) -> None:
        """Store the progress of jobs `owner` still runs (one statement)."""
        await operations.set_progress(self.db, updates, owner)

    async def set_queue_paused(self, paused: bool, queue: str | None = None) -> bool:
        """Pause or resume claiming for every process, from every queue (`queue`
        None) or from one; False if it already was so."""
        return await operations.set_queue_paused(self.db, paused, queue)

    async def schedules(self) -> list[SharedScheduleRow]:
        """Every schedule, by id."""
        return await schedules.schedules(self.db)

    async def set_schedule_paused(
        self, schedule_id: str, paused: bool, next_run: float | None = None
    ) -> bool:
        """Pause or resume a schedule; False if unknown or already so."""
        return await operations.set_schedule_paused(self.db, schedule_id, paused, next_run)

    async def trigger_schedule(self, schedule_id: str, job: NewJob) -> bool:
        """Insert `job` for the schedule now without moving its next fire."""
        return await operations.trigger_schedule(self.db, schedule_id, job)

    # ── The worker registry ─────────────────────────────────────────
    async def heartbeat(self, worker: WorkerRow, forget_after: float) -> str | None:
        """Write `worker`'s row (stamped by the server's clock, its request
        kept) and delete the rows not seen for `forget_after` seconds, in one
        statement; returns the row's request (`request_worker`)."""
        return await registry.heartbeat(self.db, worker, forget_after)

    async def request_worker(self, worker_id: str, command: str) -> bool:
        """Leave `command` on a live worker's row and NOTIFY it, in one
        statement (``stop`` stays over ``drain``); False if unknown or lost."""
        return await registry.request_worker(self.db, worker_id, check_worker_command(command))

    async def workers(self) -> tuple[list[WorkerRow], float]:
        """Every registered worker, by id, and the server's clock."""
        return await registry.workers(self.db)

    async def forget_worker(self, worker_id: str) -> bool:
        """Delete a worker's row (a clean stop); False if there was none."""
        return await registry.forget_worker(self.db, worker_id)

    # ── The throughput history ──────────────────────────────────────
    async def add_history(self, rows: Sequence[HistoryRow]) -> None:
        """Add a worker's folded rows to both steps' rows and delete the rows
        kept long enough, in one statement."""
        check_history_rows(rows)
        await throughput.add_history(self.db, rows)

    async def history(
        self, step: float, since: float, type: str | None, queue: str | None
    ) -> HistoryRead:
        """The kept rows of `step` since `since`, per bucket and per job type."""
        return await throughput.history(self.db, step, since, type, queue)

    async def backlog(self, queue: str | None) -> tuple[list[BacklogRow], float]:
        """Each job type's unfinished jobs (of `queue`), by type, and the server's clock."""
        return await throughput.backlog(self.db, queue)

    async def unserved_types(self, known: Sequence[str], scan: int) -> dict[str, int]:
        """Due jobs per job type not in `known`, among the first `scan` due ones."""
        return await registry.unserved_types(self.db, known, scan)


# mypy checks here that the store keeps the shared-store contract.
_CONTRACT: type[SharedStore] = PostgresStore
_IN_TRANSACTION: type[TransactionSubmit] = PostgresStore
_SCRIPT: type[SchemaScript] = PostgresStore
