"""`SQLiteStore`: the store API, in both modes, over the package's parts."""

from __future__ import annotations

import functools
import math
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from jobsched.store import (
    MAX_LEASE_EXPIRIES,
    BacklogRow,
    HistoryRead,
    HistoryRow,
    JobRow,
    NewJob,
    Outcome,
    PurgeRow,
    QueueStatsRow,
    ScheduleRow,
    SchemaScript,
    SharedJobRow,
    SharedScheduleRow,
    SharedStore,
    Snapshot,
    Store,
    StoreContext,
    StoreError,
    StoreStats,
    TransactionSubmit,
    WorkerRow,
    check_history_rows,
    check_max_lease_expiries,
    check_worker_command,
)

from .._wakeups import DelegatedWakeups
from . import (
    claims,
    journal,
    journal_ops,
    journal_reads,
    migrations,
    operations,
    queries,
    schedules,
    submit,
)
from . import history as throughput
from . import workers as registry
from .connection import Database, Wakeups, now, seconds_option

T = TypeVar("T")


class SQLiteStore(DelegatedWakeups):
    """Jobs in one SQLite file, owned by one scheduler or shared by several
    processes on one host (see the package docstring).

    A new file's mode is chosen when the store is opened:
    ``StoreContext(shared=True)`` (the kernel's shared backend: ``jobsched
    worker``, ``Client``, ``JobScheduler(store=..., shared=True)``) or the
    single-owner journal (``shared`` False). An existing file keeps its
    mode, which `shared` says before the store is opened. A `Client`
    (``StoreContext(operator=True)``) opens a file of either mode: a
    single-owner one for reads and the operator actions, applied while no
    owner runs (`Database.as_owner`). Every SQLite call runs on the
    store's one thread, never on the event loop.
    """

    durable = True

    def __init__(self, url: str) -> None:
        self.db = Database(url)
        self.url = url
        self.path = self.db.path
        self.timeout = self.db.timeout
        self.synchronous = self.db.synchronous
        #: Seconds a claimed job's lease lasts (renewed every third of it while it runs).
        self.lease_seconds = seconds_option(url, self.db.options, "lease", 30.0)
        #: Seconds between two looks for other processes' commits (shared mode).
        self.poll_seconds = seconds_option(url, self.db.options, "poll", 0.05)
        self.wakeups: Wakeups = Wakeups(self.db, self.poll_seconds)
        #: Whether the file is shared by several processes (a new file: no,
        #: a scheduler owns it unless told otherwise).
        self.shared = migrations.peek_mode(self.path) == migrations.SHARED
        self.mode: str | None = None  # once open: migrations.SINGLE_OWNER or SHARED
        #: Open on a single-owner file for a `Client`: reads and operator actions.
        self.operator = False
        self._limits_found = False

    def __repr__(self) -> str:
        return f"SQLiteStore({self.url!r})"

    # ── Lifecycle (both modes) ──────────────────────────────────────
    async def open(self, context: StoreContext) -> Snapshot:
        """Open the file in the mode `context` asks for; the rows to restore.

        Single-owner: every job and schedule. Shared: nothing (the jobs stay
        in the file and are claimed from there). Readonly (``jobsched
        status``): every job of a file in either mode. For an operator
        (`Client`): nothing, in the file's mode. Otherwise a file of the
        other mode is refused with a `StoreError` naming both.
        """
        shared = bool(getattr(context, "shared", False))
        mode = migrations.SHARED if shared else migrations.SINGLE_OWNER
        self.db.start()
        try:
            snapshot, self.mode = await self.db.call(journal.open_file, self.db, context, mode)
        except BaseException:
            self.db.stop_thread()
            raise
        self.operator = shared and self.mode == migrations.SINGLE_OWNER
        if shared and not context.readonly:
            # An operator hears of the owner's commits: no cancel requests there.
            self.wakeups.start(context.worker_id, cancels=not self.operator)
        return snapshot

    def migration_sql(self, since: int = 0) -> str:
        """The SQL of a shared file from version `since` (0: a new file) to
        the current one (``jobsched store sql``)."""
        return migrations.shared_script(since)

    async def check_schema(self) -> None:
        """`SchemaTooNewError` naming both versions if a newer jobsched migrated
        the file since this store was opened (a worker asks on a claim error)."""
        await self.db.transaction(
            lambda conn: migrations.file_mode(conn, self.url, self.db.path, readonly=True),
            "read the schema version of",
            write=False,
        )

    async def close(self) -> None:
        if not self.db.started:
            return
        await self.wakeups.stop()
        try:
            await self.db.call(self.db.close_sync)
        finally:
            self.db.stop_thread()

    async def call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn(connection)`` on the store's thread, outside any transaction (tools, tests)."""

        def run() -> T:
            if self.db.conn is None:
                raise StoreError(f"{self.url}: the store is not open")
            return fn(self.db.conn)

        return await self.db.call(run)

    # ── Single-owner mode ───────────────────────────────────────────
    async def write(self, batch: Sequence[JobRow | ScheduleRow | PurgeRow]) -> None:
        """One transaction holding the full current state of each row."""
        self._need(migrations.SINGLE_OWNER, "write")
        await self.db.call(journal.write, self.db, batch)

    # ── Shared mode: notifications ──────────────────────────────────
    # ── Shared mode: submitting ─────────────────────────────────────
    async def insert(self, jobs: Sequence[NewJob]) -> list[str]:
        """Insert jobs and their dependencies in one transaction; returns their ids.

        A job whose `key` already exists (or whose `unique_key` an unfinished
        job holds) is not inserted again: the existing job's id is returned
        in its place. Dependencies that already ended are settled by the
        job's trigger rule: it may be due at once, or cancelled.
        """
        self._need(migrations.SHARED, "submitting jobs")
        if not jobs:
            return []
        ids, ready = await self.db.transaction(
            lambda conn: submit.insert(conn, jobs), f"insert {len(jobs)} jobs into"
        )
        if ready:
            self.wakeups.work()
        else:
            # Other processes see any commit by their poll; this one's live
            # views are told directly (dependents still waiting, cancelled ones).
            self.wakeups.changed()
        return ids

    def insert_in_transaction_sync(self, conn: Any, jobs: Sequence[NewJob]) -> list[str]:
        """`insert` on the application's ``sqlite3.Connection`` to this file, in
        its transaction, in the calling thread (`jobsched.store.TransactionSubmit`):
        other processes see the jobs when it commits, by their poll."""
        self._need(migrations.SHARED, "submitting jobs")
        return submit.insert_in_transaction(conn, jobs, url=self.url, path=self.path)

    async def insert_in_transaction(self, conn: Any, jobs: Sequence[NewJob]) -> list[str]:
        """`insert_in_transaction_sync`: an ``sqlite3.Connection`` belongs to
        the thread that uses it, so it runs in the calling thread."""
        return self.insert_in_transaction_sync(conn, jobs)

    # ── Shared mode: claims, leases and limits ──────────────────────
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
        (None if there is none). Cluster limits (`sync_limits`) are enforced
        in the same transaction.
        """
        self._need(migrations.SHARED, "claim")
        if n <= 0:
            return [], None
        rows, next_due, self._limits_found = await self.db.transaction(
            lambda conn: claims.claim(conn, self.lease_seconds, n, owner, queues, types, refuser),
            "claim jobs in",
        )
        if rows:
            self.wakeups.changed()  # an event set: other processes see it by their poll
        return rows, next_due

    async def sync_limits(self, data: dict[str, Any] | None) -> dict[str, Any] | None:
        """Agree on the cluster's limits; returns the limits in force.

        The first process that opens the file with limits stores them; a
        process with other limits is refused (`StoreError` showing both).
        Change them with `set_limits`.
        """
        self._need(migrations.SHARED, "cluster limits")
        return await self.db.transaction(
            lambda conn: claims.sync_limits(conn, self.url, data), "store the limits in"
        )

    async def set_limits(self, data: dict[str, Any] | None) -> None:
        """Replace the cluster's limits (None or empty: no limits)."""
        self._need(migrations.SHARED, "cluster limits")
        await self.db.transaction(lambda conn: claims.set_limits(conn, data), "store the limits in")
        self.wakeups.work()

    async def renew(self, job_ids: Iterable[str], owner: str) -> set[str]:
        """Extend `owner`'s leases on `job_ids`; returns the ids whose lease was lost."""
        self._need(migrations.SHARED, "renew")
        ids = list(job_ids)
        if not ids:
            return set()
        return await self.db.transaction(
            lambda conn: claims.renew(conn, self.lease_seconds, ids, owner), "renew leases in"
        )

    async def reap_expired(self, max_expiries: int = MAX_LEASE_EXPIRIES) -> int:
        """Put jobs whose lease expired (their process died) back in the queue;
        a job whose lease expired `max_expiries` times fails instead."""
        self._need(migrations.SHARED, "reap_expired")
        check_max_lease_expiries(max_expiries)
        reaped, failed = await self.db.transaction(
            lambda conn: claims.reap_expired(conn, max_expiries), "requeue expired leases in"
        )
        if reaped:
            self.wakeups.work()
        if failed:
            self.wakeups.finished()
        return reaped

    async def release(self, job_ids: Iterable[str], owner: str) -> int:
        """Give back claimed jobs that never started (their attempt is not counted)."""
        self._need(migrations.SHARED, "release")
        ids = list(job_ids)
        if not ids:
            return 0
        count = await self.db.transaction(
            lambda conn: claims.release(conn, ids, owner), "release jobs in"
        )
        if count:
            self.wakeups.work()
        return count

    async def refuse(
        self, refusals: Sequence[tuple[str, str]], owner: str, refuser: str, bound: int
    ) -> list[str]:
        """Hand back claimed jobs `owner` cannot build (`SharedStore.refuse`);
        returns the ids that reached `bound` (still held, for `owner` to fail)."""
        self._need(migrations.SHARED, "refuse")
        batch = list(refusals)
        if not batch:
            return []
        at_bound, released = await self.db.transaction(
            lambda conn: claims.refuse(conn, batch, owner, refuser, bound), "refuse jobs in"
        )
        if released:
            self.wakeups.work()
        return at_bound

    async def finish(self, outcomes: Sequence[Outcome], owner: str) -> list[str]:
        """Record attempts that ended, in one transaction; returns the ids written.

        Only jobs `owner` still holds are written. Terminal jobs settle their
        dependents by their trigger rules (released, one fewer to wait for,
        or cancelled with the reason, and so on downstream), all in the same
        transaction.
        """
        self._need(migrations.SHARED, "finish")
        if not outcomes:
            return []
        written, wake = await self.db.transaction(
            lambda conn: claims.finish(conn, outcomes, owner), "record results in"
        )
        # A finished job frees a limit's slot: wake the claimers it held back.
        if wake or (written and self._limits_found):
            self.wakeups.work()
        if written:
            self.wakeups.finished()
        return written

    async def request_cancel(self, job_id: str) -> bool:
        """Cancel a job from any process; False if unknown or already finished.

        A waiting job is cancelled at once (its dependents settled by their
        trigger rules: cancelled with it, or released); a running
        one is flagged, and its owner cancels the attempt when it sees the
        flag (at its next poll).
        """
        if self.operator:
            cancelled = await self._operate(
                lambda conn: journal_ops.cancel(conn, job_id), "cancel a job"
            )
            if cancelled:
                self.wakeups.finished()
            return cancelled
        self._need(migrations.SHARED, "request_cancel")
        done, owner = await self.db.transaction(
            lambda conn: claims.request_cancel(conn, job_id), "cancel a job in"
        )
        if owner is not None:  # running: its owner may be this process
            self.wakeups.cancel(job_id)
        elif done and owner is None:
            # A dependent its trigger rule released by this cancel is due now.
            self.wakeups.work()
            self.wakeups.finished()
        return done

    async def request_cancel_many(self, job_ids: Sequence[str]) -> list[str]:
        """`request_cancel` each of `job_ids` in one transaction; the ids
        cancelled or flagged, in the order given."""
        ids = list(job_ids)
        if not ids:
            return []
        if self.operator:
            cancelled = await self._operate(
                lambda conn: journal_ops.cancel_many(conn, ids), "cancel jobs"
            )
            if cancelled:
                self.wakeups.finished()
            return cancelled
        self._need(migrations.SHARED, "request_cancel_many")
        done, running = await self.db.transaction(
            lambda conn: operations.request_cancel_many(conn, ids), "cancel jobs in"
        )
        for job_id, _ in running:  # their owners may be this process
            self.wakeups.cancel(job_id)
        if len(done) > len(running):
            self.wakeups.work()
            self.wakeups.finished()
        return done

    async def cancel_requests(self, owner: str) -> list[str]:
        """Jobs `owner` runs that someone asked to cancel (the safety net)."""
        self._need(migrations.SHARED, "cancel_requests")
        return await self.db.transaction(
            lambda conn: claims.cancel_requests(conn, owner), "read cancel requests in", write=False
        )

    # ── Shared mode: schedules ──────────────────────────────────────
    async def add_schedule(self, schedule: SharedScheduleRow) -> SharedScheduleRow:
        """Create the schedule unless it exists; returns the stored one."""
        self._need(migrations.SHARED, "adding a schedule")
        return await self.db.transaction(
            lambda conn: schedules.add_schedule(conn, schedule), "add a schedule to"
        )

    async def get_schedule(self, schedule_id: str) -> SharedScheduleRow:
        """The schedule as stored now."""
        self._need(migrations.SHARED, "following a schedule")
        return await self.db.transaction(
            lambda conn: schedules.get_schedule(conn, schedule_id),
            "read a schedule in",
            write=False,
        )

    async def fire_schedule(
        self, schedule_id: str, expected_next: float, new_next: float, job: NewJob
    ) -> bool:
        """Fire the period due at `expected_next` exactly once across processes."""
        self._need(migrations.SHARED, "fire_schedule")
        fired = await self.db.transaction(
            lambda conn: schedules.fire_schedule(conn, schedule_id, expected_next, new_next, job),
            "fire a schedule in",
        )
        if fired:
            self.wakeups.work()
        return fired

    async def deactivate_schedule(self, schedule_id: str) -> bool:
        """Stop a schedule for every process; False if unknown or already stopped."""
        self._need(migrations.SHARED, "cancelling a schedule")
        return await self.db.transaction(
            lambda conn: schedules.deactivate_schedule(conn, schedule_id), "stop a schedule in"
        )

    async def schedule_jobs(self, schedule_id: str, limit: int | None = None) -> list[SharedJobRow]:
        """The jobs a schedule fired, in the order they were fired (the last `limit`)."""
        if self.mode == migrations.SINGLE_OWNER:
            return await self._read_journal(
                lambda conn: journal_reads.schedule_jobs(conn, self.url, schedule_id, limit)
            )
        return await self._read(lambda conn: schedules.schedule_jobs(conn, schedule_id, limit))

    # ── Reading (either mode, also on a readonly open) ──────────────
    async def get(self, job_id: str) -> SharedJobRow | None:
        """One job, or None."""
        if self.mode == migrations.SINGLE_OWNER:
            return await self._read_journal(lambda conn: journal_reads.get(conn, self.url, job_id))
        return await self._read(lambda conn: queries.get(conn, job_id))

    async def jobs(self, job_ids: Sequence[str] | None = None) -> list[SharedJobRow]:
        """Every job (or those with `job_ids`), in submit order."""
        if self.mode == migrations.SINGLE_OWNER:
            return await self._read_journal(
                lambda conn: journal_reads.jobs(conn, self.url, job_ids)
            )
        return await self._read(lambda conn: queries.jobs(conn, job_ids))

    async def dependents(self, job_id: str) -> list[str] | None:
        """The ids of the jobs that depend on `job_id`, in submit order; None if unknown."""
        if self.mode == migrations.SINGLE_OWNER:
            return await self._read_journal(lambda conn: journal_reads.dependents(conn, job_id))
        return await self._read(lambda conn: queries.dependents(conn, job_id))

    async def dependents_of(self, job_ids: Sequence[str]) -> dict[str, list[str]]:
        """`dependents` of several jobs in one read; unknown ids left out."""
        if self.mode == migrations.SINGLE_OWNER:
            return await self._read_journal(lambda conn: journal_reads.dependents_of(conn, job_ids))
        return await self._read(lambda conn: queries.dependents_of(conn, job_ids))

    async def counts(self) -> dict[str, int]:
        """How many jobs are in each status (the kept counts: a few rows)."""
        if self.mode == migrations.SINGLE_OWNER:
            return await self._read_journal(journal_reads.counts)
        kept = await self._read(queries.kept_counts)
        return {status: n for status, n in kept.items() if n}

    async def unfinished(self, job_ids: Sequence[str]) -> int:
        """How many of `job_ids` are not terminal yet."""
        if self.mode == migrations.SINGLE_OWNER:
            return await self._read_journal(lambda conn: journal_reads.unfinished(conn, job_ids))
        return await self._read(lambda conn: queries.unfinished(conn, job_ids))

    async def page(
        self,
        statuses: Sequence[str] | None,
        type: str | None,
        text: str | None,
        limit: int,
        offset: int,
    ) -> tuple[list[SharedJobRow], int]:
        """One page of matching jobs, newest first, and how many match."""
        if self.mode == migrations.SINGLE_OWNER:
            return await self._read_journal(
                lambda conn: journal_reads.page(conn, self.url, statuses, type, text, limit, offset)
            )
        return await self._read(
            lambda conn: queries.page(conn, statuses, type, text, limit, offset)
        )

    async def stats(self, since: float) -> StoreStats:
        """Counts, finished per minute since `since`, leases, limits' use, pause flag."""
        if self.mode == migrations.SINGLE_OWNER:
            return await self._read_journal(lambda conn: journal_reads.stats(conn, since, now()))
        return await self._read(lambda conn: queries.stats(conn, since, now()))

    # ── Shared mode: operator actions ───────────────────────────────
    async def retry(self, job_ids: Sequence[str]) -> list[str]:
        """Failed, timed-out or cancelled jobs back to pending; the ids moved."""
        if self.operator:
            return await self._operate(lambda conn: journal_ops.retry(conn, job_ids), "retry jobs")
        self._need(migrations.SHARED, "retry")
        moved = await self.db.transaction(
            lambda conn: operations.retry(conn, job_ids), "retry jobs in"
        )
        if moved:
            self.wakeups.work()
        return moved

    async def requeue(self, statuses: Sequence[str], type: str | None) -> list[str]:
        """`retry` every job in `statuses` of job type `type`; the ids moved."""
        if self.operator:
            return await self._operate(
                lambda conn: journal_ops.requeue(conn, statuses, type), "requeue jobs"
            )
        self._need(migrations.SHARED, "requeue")
        moved = await self.db.transaction(
            lambda conn: operations.requeue(conn, statuses, type), "requeue jobs in"
        )
        if moved:
            self.wakeups.work()
        return moved

    async def purge(self, before: float, statuses: Sequence[str]) -> int:
        """Delete terminal jobs finished before `before`; how many."""
        if self.operator:
            return await self._operate(
                lambda conn: journal_ops.purge(conn, before, statuses), "purge jobs"
            )
        self._need(migrations.SHARED, "purge")
        deleted = await self.db.transaction(
            lambda conn: operations.purge(conn, before, statuses), "purge jobs from"
        )
        if deleted:
            self.wakeups.changed()
        return deleted

    async def delete_finished(self, job_ids: Sequence[str]) -> list[str]:
        """Delete the terminal jobs of `job_ids` in one transaction; the ids
        deleted, in the order given."""
        ids = list(job_ids)
        if not ids:
            return []
        if self.operator:
            return await self._operate(
                lambda conn: journal_ops.delete_finished(conn, ids), "delete jobs"
            )
        self._need(migrations.SHARED, "delete_finished")
        deleted = await self.db.transaction(
            lambda conn: operations.delete_finished(conn, ids), "delete jobs from"
        )
        if deleted:
            self.wakeups.changed()
        return deleted

    async def expire_results(self) -> int:
        """Remove results whose ``result_expires`` has passed; how many."""
        self._need(migrations.SHARED, "expire_results")
        return await self.db.transaction(operations.expire_results, "expire results in")

    async def set_progress(self, updates: Sequence[tuple[str, dict[str, Any]]], owner: str) -> None:
        """Store the progress of jobs `owner` still runs (one transaction)."""
        self._need(migrations.SHARED, "set_progress")
        if not updates:
            return
        written = await self.db.transaction(
            lambda conn: operations.set_progress(conn, updates, owner), "store progress in"
        )
        if written:
            self.wakeups.changed()

    async def set_queue_paused(self, paused: bool, queue: str | None = None) -> bool:
        """Pause or resume claiming for every process, from every queue (`queue`
        None) or one; False if it already was so."""
        self._need(migrations.SHARED, "pausing the queue")
        changed = await self.db.transaction(
            lambda conn: operations.set_queue_paused(conn, paused, queue), "pause the queue in"
        )
        if changed and not paused:
            self.wakeups.work()
        return changed

    async def queue_paused(self, queue: str | None = None) -> bool:
        """Whether claiming is paused, from every queue (`queue` None) or from
        that one (a single-owner file: never, its owner keeps a pause in memory)."""
        if self.mode == migrations.SINGLE_OWNER:
            return False
        return await self._read(lambda conn: queries.queue_paused(conn, queue))

    async def queue_stats(self, since: float) -> list[QueueStatsRow]:
        """Each queue at a glance, by name (also a single-owner file's)."""
        if self.mode == migrations.SINGLE_OWNER:
            return await self._read_journal(
                lambda conn: journal_reads.queue_stats(conn, since, now())
            )
        return await self._read(lambda conn: queries.queue_stats(conn, since, now()))

    async def schedules(self) -> list[SharedScheduleRow]:
        """Every schedule, by id (also a single-owner file's)."""
        if self.mode == migrations.SINGLE_OWNER:
            return await self._read_journal(lambda conn: journal_reads.schedules(conn, self.url))
        return await self._read(schedules.schedules)

    async def set_schedule_paused(
        self, schedule_id: str, paused: bool, next_run: float | None = None
    ) -> bool:
        """Pause or resume a schedule; False if unknown or already so."""
        if self.operator:
            # A journal says 0.0 for "no next fire" (journal_reads.schedules).
            stored = 0.0 if next_run == math.inf else next_run
            return await self._operate(
                lambda conn: journal_ops.set_schedule_paused(conn, schedule_id, paused, stored),
                "pause or resume a schedule",
            )
        self._need(migrations.SHARED, "set_schedule_paused")
        return await self.db.transaction(
            lambda conn: operations.set_schedule_paused(conn, schedule_id, paused, next_run),
            "pause a schedule in",
        )

    async def trigger_schedule(self, schedule_id: str, job: NewJob) -> bool:
        """Insert `job` for the schedule now without moving its next fire."""
        self._need(migrations.SHARED, "triggering a schedule")
        done = await self.db.transaction(
            lambda conn: operations.trigger_schedule(conn, schedule_id, job),
            "trigger a schedule in",
        )
        if done:
            self.wakeups.work()
        return done

    async def _read(self, body: Callable[[sqlite3.Connection], T]) -> T:
        self._need(migrations.SHARED, "read jobs")
        return await self.db.transaction(body, "read jobs in", write=False)

    async def _read_journal(self, body: Callable[[sqlite3.Connection], T]) -> T:
        return await self.db.transaction(body, "read jobs in", write=False)

    async def _operate(self, body: Callable[[sqlite3.Connection], T], what: str) -> T:
        """An operator action on a single-owner file, as its owner for one
        transaction; refused, naming the owner, while one runs."""
        result: T = await self.db.call(functools.partial(self.db.as_owner, body, what))
        self.wakeups.changed()
        return result

    def _need(self, mode: str, call: str) -> None:
        """Refuse a call of the other mode's API, naming both."""
        if self.mode == mode:
            return
        if self.mode is None:
            raise StoreError(f"{self.url}: the store is not open")
        if self.operator:
            raise StoreError(
                f"{self.url}: {self.path} is a single-owner file, run by one process at a "
                "time (jobsched run FILE --store URL, JobScheduler(store=URL)); "
                f"{call} is for that process alone. Here: read its jobs and schedules, "
                "retry, requeue, cancel or purge jobs, pause or resume schedules"
            )
        raise StoreError(
            f"{self.url}: {call} is a {mode}-mode call, but this store was opened in "
            f"{self.mode} mode"
        )

    # ── Shared mode: the worker registry ────────────────────────────
    async def heartbeat(self, worker: WorkerRow, forget_after: float) -> str | None:
        """Write `worker`'s row (stamped now, its request kept) and delete the
        rows not seen for `forget_after` seconds, in one transaction; returns
        the row's request (`request_worker`)."""
        self._need(migrations.SHARED, "heartbeat")
        command: str | None = await self.db.transaction(
            lambda conn: registry.heartbeat(conn, worker, forget_after, now()),
            "write a worker's heartbeat in",
        )
        return command

    async def request_worker(self, worker_id: str, command: str) -> bool:
        """Leave `command` on a live worker's row for its next heartbeat
        (``stop`` stays over ``drain``); False if unknown or lost. A file has
        no channel between processes: the worker reads it within a heartbeat
        interval (a third of its lease). A single-owner file registers no
        worker: always False."""
        command = check_worker_command(command)
        if self.mode == migrations.SINGLE_OWNER:
            return False
        self._need(migrations.SHARED, "request_worker")
        done: bool = await self.db.transaction(
            lambda conn: registry.request_worker(conn, worker_id, command, now()),
            "ask a worker in",
        )
        return done

    async def workers(self) -> tuple[list[WorkerRow], float]:
        """Every registered worker, by id, and the time read (none in a
        single-owner file: its owner is not registered)."""
        if self.mode == migrations.SINGLE_OWNER:
            return [], now()
        return await self._read(lambda conn: (registry.workers(conn), now()))

    async def forget_worker(self, worker_id: str) -> bool:
        """Delete a worker's row (a clean stop); False if there was none."""
        self._need(migrations.SHARED, "forget_worker")
        return await self.db.transaction(
            lambda conn: registry.forget_worker(conn, worker_id), "forget a worker in"
        )

    async def unserved_types(self, known: Sequence[str], scan: int) -> dict[str, int]:
        """Due jobs per job type not in `known`, among the first `scan` due
        ones (none in a single-owner file, whose owner runs what it was given)."""
        if self.mode == migrations.SINGLE_OWNER:
            return {}
        return await self._read(lambda conn: registry.unserved_types(conn, known, scan, now()))

    # ── Shared mode: the throughput history ─────────────────────────
    async def add_history(self, rows: Sequence[HistoryRow]) -> None:
        """Add a worker's folded rows to both steps' rows and delete the rows
        kept long enough, in one transaction."""
        self._need(migrations.SHARED, "add_history")
        check_history_rows(rows)
        await self.db.transaction(
            lambda conn: throughput.add_history(conn, rows, now()),
            "write the throughput history in",
        )

    async def history(
        self, step: float, since: float, type: str | None, queue: str | None
    ) -> HistoryRead:
        """The kept rows of `step` since `since`, per bucket and per job type
        (none in a single-owner file: its owner keeps the history in memory)."""
        if self.mode == migrations.SINGLE_OWNER:
            return [], []
        return await self._read(lambda conn: throughput.history(conn, step, since, type, queue))

    async def backlog(self, queue: str | None) -> tuple[list[BacklogRow], float]:
        """Each job type's unfinished jobs (of `queue`), by type, and the time
        read (none in a single-owner file: its owner's `LocalClient` tells)."""
        at = now()
        if self.mode == migrations.SINGLE_OWNER:
            return [], at
        return await self._read(lambda conn: (throughput.backlog(conn, queue, at), at))


# The contracts, checked by mypy: this one class implements both protocols.
_single_owner: type[Store] = SQLiteStore
_shared: type[SharedStore] = SQLiteStore
_in_transaction: type[TransactionSubmit] = SQLiteStore
_script: type[SchemaScript] = SQLiteStore
