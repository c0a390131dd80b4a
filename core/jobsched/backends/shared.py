"""`SharedBackend`: several scheduler processes on several hosts serve one store's queue.

With a *shared* store (``store.shared``, e.g. PostgreSQL) the kernel keeps no
queue of its own: `submit` writes the job to the store, and this process gets
work only by claiming it. `SharedBackend` holds everything that differs:

* the **feeder** claims due jobs (in the strategy's order, with a lease) when
  this process has room, on a NOTIFY from the store, when the next delayed
  job is due, or on a slow safety-net poll; claimed rows become `Job` objects
  in the local ready queue (their dependencies were resolved in the database);
* the **renewer** extends the leases of the jobs this process holds, picks up
  cancel requests a lost notification missed, re-queues jobs whose owner
  died (expired leases), and writes this process's heartbeat row in the
  worker registry (`Registration`: ``running``, ``draining`` once it stops
  claiming; deleted on a clean stop), which also forgets workers lost for
  longer than `WORKER_RETENTION` and returns an operator's request: drain
  (claim nothing more) or stop (drain, then the process stops);
* a claimed job starts only while its lease is sure to be alive: a process
  that was paused or stalled past its lease (another process may have run
  the job meanwhile) hands the job back unstarted; an attempt whose lease
  the renewer finds lost is stopped and its end is not written (see
  `SharedBackend.starting`);
* the attempts that end are also counted in memory and handed to the store
  on the renewer's cadence, in one call (`AttemptHistory`): the throughput
  history lags by at most ``lease_seconds / 3``;
* a transition listener turns every attempt that ends into an outcome; the
  outcomes of one loop iteration are written in one transaction, which also
  releases or cancels dependents in the database. A batch the store refuses
  is written row by row (an outcome refused on its own fails its job), and
  outcomes wait, their leases renewed, for a store that does not answer;
* recurring schedules fire through a compare-and-set on the schedule row, so
  each period fires exactly once however many processes run it (`schedules`,
  which `jobsched.Client` uses too); every worker serves every stored
  schedule it can build the job of, so a schedule outlives the process that
  added it.

Times written to the store are wall-clock epoch seconds: monotonic times mean
nothing on another host. Crash semantics are at-least-once.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import secrets
import socket
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import structlog

from .._codec import JobCodec, wall_offset
from .._errors import SchedulerError, SchemaTooNewError
from .._job import Job
from .._status import JobStatus
from .._version import __version__
from ..store import (
    MAX_BUILD_REFUSALS,
    MAX_LEASE_EXPIRIES,
    SharedJobRow,
    SharedScheduleRow,
    SharedStore,
    StoreContext,
    WorkerRow,
    check_max_build_refusals,
    check_max_lease_expiries,
    encode_result,
)
from .claims import claim_target, refuse
from .history import AttemptHistory
from .inserts import Inserts
from .local import LocalBackend
from .outcomes import OutcomeWriter
from .registration import Registration
from .retention import Reaper
from .schedules import ScheduleServer, schedule_row
from .upstreams import with_results

if TYPE_CHECKING:
    from .._recurring import Trigger
    from ..kernel.port import KernelPort

logger = structlog.get_logger("jobsched.shared")

RUNNING = JobStatus.RUNNING
RETRY_WAIT = JobStatus.RETRY_WAIT
COMPLETED = JobStatus.COMPLETED
#: Seconds before a background task that died is started again (one that
#: dies at once must not spin).
RESTART_PAUSE = 1.0
CANCELLED = JobStatus.CANCELLED
SHUTDOWN_ERROR = "scheduler shut down"  # the error a job handed back by a shutdown carries


_instances = itertools.count(1)


def process_identity() -> str:
    """This process's stable name in the store and the logs: ``host:pid``.

    A second scheduler in the same process gets ``host:pid/2`` (and so on):
    leases are per scheduler.
    """
    n = next(_instances)
    base = f"{socket.gethostname()}:{os.getpid()}"
    return base if n == 1 else f"{base}/{n}"


# ── The shared-mode runtime ────────────────────────────────────────────
class SharedBackend(LocalBackend):
    """The feeder, lease renewer, outcome writer and schedules of one process.

    Its collaborators own their parts: `Inserts` (the submitted rows),
    `OutcomeWriter` (ended attempts and progress, in batches), `Reaper`
    (retention), `AttemptHistory` and `Registration`; `claims` sizes its
    claims and refuses what it cannot build. A process that only
    submits and follows jobs uses `jobsched.Client`.
    """

    def __init__(
        self,
        store: SharedStore,
        *,
        identity: str | None = None,
        poll_interval: float = 5.0,
        max_lease_expiries: int = MAX_LEASE_EXPIRIES,
        max_build_refusals: int = MAX_BUILD_REFUSALS,
    ) -> None:
        super().__init__(store)
        self.store: SharedStore = store
        self.identity = identity or process_identity()
        #: A job whose lease expired this many times fails instead of running
        #: again (this process's reaper applies it: `SharedStore.reap_expired`).
        self.max_lease_expiries = check_max_lease_expiries(max_lease_expiries)
        #: A job that this many worker processes claimed and could not build
        #: from its stored arguments fails (`SharedStore.refuse`).
        self.max_build_refusals = check_max_build_refusals(max_build_refusals)
        # Jobs go to the store as data, and come back from it, through one codec
        # (built in bind(), with the kernel's plugins).
        self._bound_codec: JobCodec | None = None
        self.poll_interval = poll_interval
        # A random part makes job ids unique across processes and restarts.
        self._id_suffix = secrets.token_hex(6)
        # Who refused a job, in its row: this process and no other, even one
        # that later runs with the same host:pid (a restarted container).
        self._refuser = f"{self.identity}#{self._id_suffix}"
        # The job types this process claims: its registry's names, read again
        # when the registry changes (a task's module imported late).
        self._types_of: object = None
        self._types: tuple[str, ...] = ()
        # Claimed here, not yet written back -> when its lease was last known
        # alive (the kernel's monotonic clock as the claim or renewal began).
        self._held: dict[str, float] = {}
        self._log = logger.bind(process=self.identity)
        self._history = AttemptHistory(store, logger.bind(process=self.identity))
        # Ended attempts and progress reports, written in batches; `writing`:
        # the ids whose outcome is not written yet.
        self._outcomes = OutcomeWriter(store, self.identity, self._log)
        # Submitted jobs, written from open() on: those submitted before
        # start() wait for it.
        self._inserts = Inserts(store, self._log)
        self._early_cancels: set[str] = set()
        # Expired results and old finished jobs (`KernelPort.retention`).
        self._reaper = Reaper(store, lambda: self.kernel.retention, self._log)
        #: A submitted job whose key the store already had -> the stored job's id.
        self.aliases: dict[str, str] = self._inserts.aliases
        # The kernel's per-job hooks: the store's queue, not the kernel's.
        self.listener = self._on_transition
        self.admit = self._submit
        # Progress of held jobs, written in batches (`SharedStore.set_progress`).
        self.progress = self._on_progress
        self.starting = self._starting_job
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._side_tasks: set[asyncio.Task[Any]] = set()
        self._schedules: list[SharedScheduleRow] = []
        self._schedule_server: ScheduleServer | None = None
        self._opened = False
        self.registration = Registration(
            store, self.identity, row=self.worker_row, act=self._asked, log=self._log
        )

    def bind(self, kernel: KernelPort) -> None:
        super().bind(kernel)
        self._bound_codec = JobCodec(kernel.plugins)

    @property
    def leases_held(self) -> int:
        """Jobs this process has claimed (holds a lease on) and not yet written back."""
        return len(self._held)

    @property
    def _codec(self) -> JobCodec:
        assert self._bound_codec is not None, "the backend is not bound to a kernel yet"
        return self._bound_codec

    # ── Lifecycle ───────────────────────────────────────────────────
    async def open(self) -> None:
        await self.store.open(StoreContext(worker_id=self.identity, shared=True))
        try:
            await self._sync_limits()
        except BaseException:
            await self.store.close()
            raise
        self._opened = True
        # A row left with this identity is a dead predecessor's (a restarted
        # container): its requests are not this process's.
        await self.registration.forget()
        await self.registration.beat()  # an operator sees the worker from its start
        self.store.on_cancel = self._on_cancel
        self.store.on_work = self._wake.set
        self.store.on_resync = self._wake.set
        self.store.on_worker_request = self.registration.told
        self._wake.set()
        self._inserts.release()  # jobs submitted before start()
        self._tasks = [
            asyncio.create_task(self._supervised("feeder", self._feed), name="jobsched-feeder"),
            asyncio.create_task(self._supervised("renewer", self._renew), name="jobsched-renewer"),
            asyncio.create_task(
                self._supervised("reaper", self._reaper.run), name="jobsched-reaper"
            ),
        ]
        self._schedule_server = ScheduleServer(
            self.store,
            codec=self._codec,
            strategy_key=self.kernel.sort_key,
            submitted_by=self.identity,
            job_id_suffix=self._id_suffix,
            retry_pause=self.poll_interval,
        )
        for row in self._schedules:
            self._schedule_server.add(row)
        self._schedule_server.watch()
        self._log.info("shared scheduler started", store=repr(self.store))

    async def _supervised(self, name: str, run: Callable[[], Awaitable[None]]) -> None:
        """Run a background task for the life of the process.

        One that dies is logged with its traceback and started again after a
        pause (a silent dead feeder would claim nothing more while its jobs
        stay running). A store migrated by a newer jobsched stops the
        scheduler instead (`KernelPort.fail`): nothing this code does with it
        can be trusted.
        """
        while True:
            try:
                await run()
                return
            except SchemaTooNewError as exc:
                self._log.error("store schema newer than this jobsched; stopping", error=str(exc))
                self.kernel.fail(exc)
                return
            except Exception:
                self._log.exception("background task died; restarting it", task=name)
                await asyncio.sleep(RESTART_PAUSE)

    async def _check_schema(self) -> None:
        """Raise `SchemaTooNewError` if a newer jobsched migrated the store
        (asked after a claim failed: the rows may hold what this code does
        not know). A store that cannot say, or cannot be reached, passes."""
        check = getattr(self.store, "check_schema", None)
        if check is None:
            return
        try:
            await check()
        except SchemaTooNewError:
            raise
        except Exception as exc:
            self._log.warning("could not check the store's schema version", error=str(exc))

    async def _sync_limits(self) -> None:
        """Make this process's limits the cluster's, or refuse a mismatch (docs/limits.md)."""
        limiter = self.kernel.limiter
        data = limiter.limits.as_data() if limiter is not None else None
        sync = getattr(self.store, "sync_limits", None)
        if sync is None:
            if data:
                raise SchedulerError(
                    f"{self.store!r} cannot enforce limits across processes; "
                    "run without limits or use a store that can (postgresql://)"
                )
            return
        await sync(data)

    async def stop_claiming(self) -> None:
        """Claim nothing more (called first thing in stop()); the registry
        says so (``draining``) while the running jobs finish."""
        await self._quiet()
        if self._opened:
            await self.registration.beat()

    async def _quiet(self) -> None:
        """Claim nothing more and fire no schedule (idempotent)."""
        for task in self._tasks[:1]:
            task.cancel()
        if self._schedule_server is not None:
            await self._schedule_server.close()
        await asyncio.gather(*self._tasks[:1], return_exceptions=True)
        self.registration.draining = True

    async def _asked(self, command: str) -> None:
        """An operator's request, read back by a heartbeat (`Registration`):
        ``drain`` claims nothing more and hands back the claimed jobs not
        started yet (other workers take them now), while the running ones
        finish; ``stop`` does that and asks the process to stop."""
        await self._quiet()
        s = self.kernel
        unstarted = [
            job_id
            for job_id in self._held
            if (job := s.find(job_id)) is not None and job.status is JobStatus.PENDING
        ]
        for job_id in unstarted:  # no longer held: `_starting_job` drops them
            del self._held[job_id]
        if unstarted:
            self._hand_back(unstarted)
        if command == "stop":
            s.ask_stop()

    async def close(self) -> BaseException | None:
        """After the workers exited: hand back unstarted jobs, flush, close the store."""
        s = self.kernel
        unstarted = [
            job_id
            for job_id in self._held
            if (job := s.find(job_id)) is not None and job.status is JobStatus.PENDING
        ]
        self._outcomes.closing()
        # Refusals under way may fail a job at the bound: that outcome is
        # flushed with the others.
        await asyncio.gather(*self._side_tasks, return_exceptions=True)
        await self.flush()
        if self._schedule_server is not None:
            await self._schedule_server.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, *self._side_tasks, return_exceptions=True)
        if self._opened:
            if unstarted:
                await self.store.release(unstarted, self.identity)
            await self._history.flush()
            await self.registration.forget()
            await self.store.close()
        self._log.info("shared scheduler stopped")
        return None

    async def flush(self) -> None:
        """Return once every submit and outcome so far is written to the store."""
        writers = (self._inserts, self._outcomes)
        while any(writer.busy for writer in writers):
            await asyncio.gather(*(writer.drain() for writer in writers))

    # ── Submitting ──────────────────────────────────────────────────
    def _submit(
        self,
        job: Job,
        delay: float,
        depends_on: Sequence[str],
        key: str | None,
        unique_key: str | None,
        trigger_rule: str = "all_success",
    ) -> str:
        """The kernel's admit hook: describe `job` as a row and queue it for the
        store; returns its id (the kernel keeps nothing). The store applies
        its `trigger_rule` to its dependencies.

        `key` and `unique_key` are checked by the store, for the whole cluster,
        when the row is written: a job they deduplicate is not stored, and
        after `flush()` `resolve(job_id)` gives the id of the job that was.
        """
        s = self.kernel
        clock = s.clock
        row = self._codec.new_job(
            job,
            job_id=f"{job.job_id}-{self._id_suffix}",
            strategy_key=s.sort_key,
            now=clock.time(),
            offset=wall_offset(clock),
            delay=delay,
            depends_on=depends_on,
            key=key,
            unique_key=unique_key,
            submitted_by=self.identity,
            trigger_rule=trigger_rule,
        )
        job.job_id = row.job_id
        self._inserts.add(row)
        return job.job_id

    def resolve(self, job_id: str) -> str:
        """The stored job's id for an id `submit` returned (see `_submit`)."""
        return self._inserts.resolve(job_id)

    def follow(self, job_ids: Iterable[str]) -> None:
        """Make `join` also wait for these stored jobs (say, the runs of a schedule)."""
        self._inserts.follow(job_ids)

    async def join(self) -> None:
        """Wait until every job this process submitted is terminal in the store."""
        await self.flush()
        await self._inserts.wait_finished(self.poll_interval)

    # ── Claiming ────────────────────────────────────────────────────
    async def _feed(self) -> None:
        s = self.kernel
        # Keep up to one extra job per worker queued here so a worker that
        # finishes finds its next job without a round trip to the database;
        # more while jobs are shorter than a claim (`claims.claim_target`).
        base = target = 2 * s.num_workers
        while not s.stopping:
            self._wake.clear()
            queued = s.queued
            room = target - s.running - queued
            timeout = self.poll_interval
            # Claim in batches (a round trip per job would cost more than the
            # job): when half the local backlog is gone or the heap ran dry.
            if room >= target // 2 or (room > 0 and not queued):
                asked_at = s.clock.now()  # the leases begin after this
                try:
                    rows, next_due = await self.store.claim(
                        room,
                        self.identity,
                        s.claim_rooms(room, self._held_by_queue),
                        types=self.claim_types(),
                        refuser=self._refuser,
                    )
                except Exception as exc:
                    self._log.error("claim failed", error=str(exc))
                    await self._check_schema()
                    rows, next_due = [], None
                claimed = len(rows)
                target = claim_target(target, base, claimed == room, s)
                try:
                    ready = await self._with_results(rows)
                except Exception:
                    # The feeder dies (and is started again): the rows it
                    # claimed go back rather than wait for their leases to expire.
                    self._hand_back(
                        [row.job_id for row in rows if row.job_id not in self._outcomes.writing]
                    )
                    raise
                self._take(ready, asked_at)
                if claimed == room:
                    continue
                if next_due is not None:
                    timeout = min(timeout, max(0.0, next_due - time.time()))
            if not self._wake.is_set():
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout)

    def claim_types(self) -> tuple[str, ...]:
        """The job types this process claims: every one its plugins registered
        (entry points, ``@task`` in imported modules, registered types), the
        only ones it can build. A stored type name is never imported."""
        registry = self.kernel.plugins.registry["job_types"]
        if registry is not self._types_of:
            self._types_of, self._types = registry, tuple(sorted(registry))
        return self._types

    def _held_by_queue(self) -> dict[str, int]:
        """Jobs claimed here and not yet ended, by queue (a queue's concurrency
        bounds what the feeder claims of it: `KernelPort.claim_rooms`)."""
        held: dict[str, int] = {}
        find = self.kernel.find
        for job_id in self._held:
            job = find(job_id)
            if job is not None:
                held[job.queue] = held.get(job.queue, 0) + 1
        return held

    def _take(self, rows: list[SharedJobRow], asked_at: float) -> None:
        """Adopt claimed rows; one that cannot be made a job fails alone, saying
        why, and one this process's job types cannot build is refused."""
        refused: list[tuple[SharedJobRow, str]] = []
        for row in rows:
            try:
                refusal = self._adopt(row, asked_at)
            except Exception as exc:
                self._log.exception("cannot take claimed job", job_id=row.job_id)
                self._outcome(row.job_id, "failed", error=f"cannot take job: {exc!r}")
                continue
            if refusal is not None:
                refused.append((row, refusal))
        if refused:
            task = asyncio.get_running_loop().create_task(self._refuse(refused))
            self._side_tasks.add(task)
            task.add_done_callback(self._side_tasks.discard)

    async def _refuse(self, refused: list[tuple[SharedJobRow, str]]) -> None:
        """Hand back jobs this process cannot build (`claims.refuse`): they
        wait for a worker with another version of their type. One that has
        been refused `max_build_refusals` times fails, naming why."""
        if await refuse(
            self.store,
            refused,
            owner=self.identity,
            refuser=self._refuser,
            bound=self.max_build_refusals,
            fail=self._fail,
            log=self._log,
        ):
            self._wake.set()

    async def _with_results(self, rows: list[SharedJobRow]) -> list[SharedJobRow]:
        """Claimed rows with their `result_of` markers replaced by the upstreams'
        stored results (`upstreams.with_results`: a row whose result cannot be
        had fails, a failed read hands the rows back)."""
        return await with_results(
            self.store, rows, fail=self._fail, hand_back=self._hand_back, log=self._log
        )

    def _adopt(self, row: SharedJobRow, asked_at: float) -> str | None:
        """Make a claimed row a local job in the ready queue (no await: atomic).

        Returns why it cannot be built (the job is refused, see `_refuse`),
        or None.
        """
        s = self.kernel
        earlier = s.find(row.job_id)
        if row.job_id in self._outcomes.writing or (
            earlier is not None and not earlier.status.is_terminal
        ):
            # An earlier attempt of this job is still here: its lease ran out
            # unnoticed and the job was queued again. Its result must not be
            # written over this claim, so this claim is handed back.
            self._lose(row.job_id, "claimed again while its earlier attempt is here")
            self._hand_back([row.job_id])
            return None
        offset = wall_offset(s.clock)
        try:
            job = self._codec.build(row.type, row.args, row.options, offset, f"job {row.job_id}")
        except Exception as exc:
            # Never run what cannot be rebuilt. The type is one of ours (the
            # claim asked for those only), so the job was stored by another
            # version of it (a rolling deploy): a worker of that version
            # may run it. Said once: this process never claims it again.
            error = f"{type(exc).__name__}: {exc}"
            self._log.warning(
                "cannot build claimed job; handed back for a worker of another version",
                job_id=row.job_id,
                type=row.type,
                error=str(exc),
            )
            return error

        job.job_id = row.job_id
        if row.queue != job.queue:  # the store's column is the truth (a plain SQL insert)
            job.queue = row.queue
        job.attempts = row.attempts - 1  # the kernel counts the attempt it starts
        job.submitted_at = row.submitted_at - offset
        self._held[job.job_id] = asked_at
        self._history.claimed(job.job_id, row.type)
        s.adopt(job)
        if row.cancel_requested or job.job_id in self._early_cancels:
            self._early_cancels.discard(job.job_id)
            s.cancel(job.job_id)
        return None

    # ── Leases, cancel requests, dead owners ────────────────────────
    def _starting_job(self, job: Job) -> bool:
        """The kernel's starting hook: start `job` only while its lease is sure to last.

        That is, while at least one renewal interval of the lease is left
        since it was last known alive, so the renewer can extend it in time.
        A process paused or stalled longer than that may have lost the lease
        to another process, which may have run the job already: the job is
        handed back unstarted (released, if the lease is still this
        process's after all). A job whose lease the renewer found lost is
        no longer held and is dropped here too.
        """
        confirmed = self._held.get(job.job_id)
        if confirmed is None:
            return False
        lease = self.store.lease_seconds
        age = self.kernel.clock.now() - confirmed
        if age <= lease - lease / 3:
            return True
        self._lose(job.job_id, f"lease not renewed for {age:.1f}s (it lasts {lease:g}s)")
        self._hand_back([job.job_id])
        return False

    def _lose(self, job_id: str, reason: str) -> None:
        """Stop holding `job_id`: another process may own it now. Says so once.

        An attempt running here is cancelled, and its end is not written (the
        store's owner guard would ignore it anyway); a claim not started yet
        is dropped when a worker takes it (`_starting_job`).
        """
        if self._held.pop(job_id, None) is None:
            return
        job = self.kernel.find(job_id)
        running = job is not None and job.status is RUNNING
        self._log.warning(
            "lease lost",
            job_id=job_id,
            reason=reason,
            action="attempt stopped" if running else "not started",
        )
        if running:
            self.kernel.cancel(job_id)

    def _hand_back(self, job_ids: list[str]) -> None:
        """Release claims this process will not start (a no-op for leases it lost)."""
        task = asyncio.get_running_loop().create_task(self._release(job_ids))
        self._side_tasks.add(task)
        task.add_done_callback(self._side_tasks.discard)

    async def _release(self, job_ids: list[str]) -> None:
        try:
            await self.store.release(job_ids, self.identity)
        except Exception as exc:  # the leases expire and the jobs are reaped
            self._log.error("could not hand back jobs", job_ids=job_ids, error=str(exc))

    async def _renew(self) -> None:
        interval = self.store.lease_seconds / 3
        clock = self.kernel.clock
        loop = asyncio.get_running_loop()
        due = loop.time() + interval
        while True:
            if await self.registration.wait(due - loop.time()):
                await self.registration.beat()  # a request was told: read it now
                continue
            due = loop.time() + interval
            try:
                # Leases whose outcome is still being written are kept too:
                # the store may be slow or down, and the outcome waits for it.
                asked, asked_at = [*self._held, *self._outcomes.writing], clock.now()
                lost = await self.store.renew(asked, self.identity)
                for job_id in asked:
                    if job_id in lost:
                        self._lose(job_id, "renewal found the lease taken")
                    elif job_id in self._held:
                        self._held[job_id] = max(self._held[job_id], asked_at)
                for job_id in await self.store.cancel_requests(self.identity):
                    self._on_cancel(job_id)
                await self.store.reap_expired(self.max_lease_expiries)
            except Exception as exc:
                self._log.error("lease renewal failed", error=str(exc))
            await self.registration.beat()
            await self._history.flush()

    # ── The worker registry ─────────────────────────────────────────
    def worker_row(self) -> WorkerRow:
        """This process's registry row as it stands (the store stamps the times)."""
        return WorkerRow(
            worker_id=self.identity,
            host=socket.gethostname(),
            pid=os.getpid(),
            queues=self.kernel.served_queues,
            job_types=list(self.claim_types()),
            version=__version__,
            started_at=0.0,
            last_seen=0.0,
            lost_after=self.store.lease_seconds,
            running=self.kernel.running,
            state="draining" if self.registration.draining else "running",
        )

    async def flush_history(self) -> None:
        """Hand the attempts ended here since the last flush to the store (the
        renewer does it every ``lease_seconds / 3``; never raises)."""
        await self._history.flush()

    # ── Retention: expired results and old finished jobs ────────────
    async def reap_once(self) -> tuple[int, int]:
        """One pass of the reaper: ``(results expired, jobs purged)``; a store
        error is logged (the next pass tries again) and counts as nothing."""
        return await self._reaper.once()

    def _on_cancel(self, job_id: str) -> None:
        s = self.kernel
        job = s.find(job_id)
        if job is None:
            # Claimed by us but not adopted yet, or someone else's: remember briefly.
            self._early_cancels.add(job_id)
            if len(self._early_cancels) > 1000:
                self._early_cancels.clear()
            return
        if not job.status.is_terminal:
            self._log.info("cancel requested by another process", job_id=job_id)
            s.cancel(job_id)

    def cancel(self, job_id: str) -> bool:
        """Ask the store to cancel a job this process does not hold."""
        if not self._opened:
            return False
        task = asyncio.get_running_loop().create_task(self.store.request_cancel(job_id))
        self._side_tasks.add(task)
        task.add_done_callback(self._side_tasks.discard)
        return True

    # ── Outcomes ────────────────────────────────────────────────────
    def _on_transition(self, job: Job, old: JobStatus, new: JobStatus) -> None:
        """Listener: an attempt that ended (or a claimed job cancelled) is an outcome."""
        if new is RUNNING or job.job_id not in self._held:
            return
        if old is RUNNING and new is not CANCELLED:
            started = job.started_at
            ran = 0.0 if started is None else self.kernel.clock.now() - started
            self._history.ended(job.job_id, job.queue, new is COMPLETED, ran)
        if new is RETRY_WAIT:
            self._outcome(
                job.job_id,
                "retry_wait",
                error=job.last_error,
                run_at=job.run_at + wall_offset(self.kernel.clock),
                attempt="timed_out" if job.last_failure_timed_out else "failed",
                traceback=job.last_traceback,
            )
        elif new is COMPLETED:
            # keep_result=False stores nothing; a result_ttl makes the store
            # stamp result_expires, and the reaper removes it after that.
            keep = job.keep_result
            ttl = job.result_ttl if job.result_ttl is not None else self.kernel.result_ttl
            self._outcome(
                job.job_id,
                "completed",
                result=encode_result(job.result) if keep else None,
                error=job.last_error,
                result_ttl=ttl if keep else None,
            )
        else:
            self._outcome(job.job_id, new.value, error=job.last_error, traceback=job.last_traceback)
        self._wake.set()

    def _on_progress(self, job: Job, done: float, total: float | None, message: str | None) -> None:
        """Progress listener (throttled by the kernel): written with the next batch."""
        if job.job_id not in self._held:
            return
        self._outcomes.progress(job.job_id, done, total, message)

    def interrupted(self, job: Job) -> bool:
        """Torn down by our own shutdown: handed back, so another process runs it again.

        Its outcome is written now; the CANCELLED the kernel records next is
        then no longer ours to write (the job is not held any more).
        """
        if job.job_id not in self._held:
            return False
        self._outcome(
            job.job_id,
            "retry_wait",
            error=SHUTDOWN_ERROR,
            run_at=time.time(),
            attempt="handed_back",
        )
        self._wake.set()
        return True

    def retry(self, job: Job) -> bool:
        """A job waiting for its retry goes back to the store, not the local heap."""
        return True

    def retried(self, job: Job) -> None:
        """Refused: the store decides where a job runs again (`Client.retry`)."""
        raise SchedulerError(
            f"{job.job_id} is kept in the shared store {self.store.url}: retry it with "
            "jobsched.Client(store).retry(job_id), which any worker then runs"
        )

    def _outcome(
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
        self._held.pop(job_id, None)
        self._history.forget(job_id)
        self._outcomes.add(
            job_id,
            status,
            result=result,
            error=error,
            run_at=run_at,
            result_ttl=result_ttl,
            attempt=attempt,
            traceback=traceback,
        )

    def _fail(self, job_id: str, error: str) -> None:
        """Fail a claimed job before it runs, saying why."""
        self._outcome(job_id, "failed", error=error)

    # ── Schedules ───────────────────────────────────────────────────
    def schedule_recurring(
        self,
        factory: Callable[[], Job],
        interval: float | None,
        trigger: Trigger | dict[str, Any] | None,
        options: dict[str, Any],
    ) -> str:
        """`JobScheduler.schedule_recurring` on a shared store: a schedule shared
        by every process that registers the same one (see `schedules`)."""
        unsupported = [
            name
            for name, used in (
                ("misfire_grace_time", options["misfire_grace_time"] is not None),
                ("coalesce", options["coalesce"] != "one"),
                ("jitter", bool(options["jitter"])),
                ("key", options["key"] is not None),
            )
            if used
        ]
        if unsupported:
            raise SchedulerError(
                "a shared store does not support misfire_grace_time, coalesce, jitter "
                "or key on recurring schedules yet (missed periods coalesce into one)"
            )
        row = schedule_row(
            self._codec,
            factory(),
            every=interval,
            trigger=trigger,
            start_in=options["start_in"],
            allow_overlap=options["allow_overlap"],
            now=time.time(),
            offset=wall_offset(self.kernel.clock),
        )
        self._schedules.append(row)
        if self._schedule_server is not None and not self.registration.draining:
            self._schedule_server.add(row)  # a draining process fires no schedule
        return row.schedule_id

    def cancel_recurring(self, schedule_id: str) -> bool:
        """Stop a shared schedule for every process."""
        known = any(row.schedule_id == schedule_id for row in self._schedules)
        if self._schedule_server is not None:
            self._schedule_server.stop(schedule_id)
        self._schedules = [row for row in self._schedules if row.schedule_id != schedule_id]
        if self._opened:
            task = asyncio.get_running_loop().create_task(
                self.store.deactivate_schedule(schedule_id)
            )
            self._side_tasks.add(task)
            task.add_done_callback(self._side_tasks.discard)
        return known
