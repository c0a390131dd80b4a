"""`SharedMemoryStore`: the store API over a `Queue`, its lock and its wake-ups."""

from __future__ import annotations

import asyncio
import json
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar
from urllib.parse import parse_qsl

import attrs

from jobsched.store import (
    MAX_LEASE_EXPIRIES,
    BacklogRow,
    HistoryRead,
    HistoryRow,
    LimitsData,
    NewJob,
    Outcome,
    QueueStatsRow,
    SharedJobRow,
    SharedScheduleRow,
    Snapshot,
    StoreContext,
    StoreError,
    StoreStats,
    WorkerRow,
    check_history_rows,
    check_max_lease_expiries,
    check_worker_command,
    encode_json,
    queue_rows,
)

from .._wakeups import DelegatedWakeups, WakeupEvents
from .queue import RETRYABLE, TERMINAL, Queue, copy_json

T = TypeVar("T")

_QUEUES: dict[str, Queue] = {}
_QUEUES_LOCK = threading.Lock()


class SharedMemoryStore(DelegatedWakeups):
    """``memory://NAME``: a queue in this process's memory, shared by name.

    Its wake-ups (``wait``, ``wait_finished``, ``wait_changed`` and the
    callbacks) are those of `DelegatedWakeups`, set by every store of the
    queue after each call that changed something.
    """

    durable = True
    shared = True

    def __init__(self, url: str) -> None:
        scheme, _, rest = url.partition("://")
        name, _, query = rest.partition("?")
        if scheme != "memory" or not name.strip("/"):
            raise ValueError(f"a shared memory store URL is 'memory://NAME', got {url!r}")
        options = dict(parse_qsl(query, keep_blank_values=True))
        unknown = sorted(set(options) - {"lease"})
        if unknown:
            raise ValueError(f"{url}: unknown option {unknown[0]!r} (memory://NAME?lease=SECONDS)")
        try:
            lease = float(options.get("lease", 30.0))
        except ValueError:
            lease = math.nan
        if not (lease > 0 and math.isfinite(lease)):
            raise ValueError(f"{url}: lease must be a number of seconds > 0")
        self.url = url
        self.name = name.strip("/")
        #: Seconds a claimed job's lease lasts (renewed every third of it while it runs).
        self.lease_seconds = lease
        self.wakeups = WakeupEvents()
        self._queue: Queue | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"SharedMemoryStore({self.url!r})"

    # ── lifecycle ──────────────────────────────────────────────────────
    async def open(self, context: StoreContext) -> Snapshot:
        """Join the queue of this name (made on first open, unless read-only)."""
        with _QUEUES_LOCK:
            queue = _QUEUES.get(self.name)
            if queue is None:
                if context.readonly:
                    raise StoreError(f"{self.url}: no queue of this name in this process")
                queue = _QUEUES[self.name] = Queue()
        self._queue = queue
        self._loop = asyncio.get_running_loop()
        if not context.readonly:
            with queue.lock:
                queue.stores.add(self)
        return Snapshot()

    async def close(self) -> None:
        if self._queue is not None:
            with self._queue.lock:
                self._queue.stores.discard(self)

    async def call(self, fn: Callable[[Queue], T]) -> T:
        """``fn(queue)`` under the queue's lock, outside the store API (tools,
        tests: what `SQLiteStore.call` is for a file)."""
        return self._run(lambda q, t: fn(q))

    def _run(self, body: Callable[[Queue, float], T]) -> T:
        """`body(queue, now)` as one transaction."""
        queue = self._queue
        if queue is None:
            raise StoreError(f"{self.url}: the store is not open")
        with queue.lock:
            try:
                return body(queue, time.time())
            except StoreError as exc:
                if str(exc).startswith(f"{self.url}:"):
                    raise
                raise StoreError(f"{self.url}: {exc}") from None

    def _wake(self, *what: str, job_id: str | None = None) -> None:
        """Tell every store of the queue, on its own loop: ``work``, ``finished``,
        ``changed`` (implied by the others), ``cancel`` (of `job_id`) or
        ``request`` (to the worker whose id is passed as `job_id`)."""
        assert self._queue is not None
        with self._queue.lock:
            stores = list(self._queue.stores)
        for store in stores:
            if store._loop is None or store._loop.is_closed():
                continue
            store._loop.call_soon_threadsafe(store._woken, what, job_id)

    def _woken(self, what: tuple[str, ...], job_id: str | None) -> None:
        events = self.wakeups
        events.changed_event.set()
        if "finished" in what:
            events.finished_event.set()
        if "work" in what:
            events.work_event.set()
            if events.on_work is not None:
                events.on_work()
        if "cancel" in what and job_id is not None and events.on_cancel is not None:
            events.on_cancel(job_id)
        if "request" in what and job_id is not None and events.on_worker_request is not None:
            events.on_worker_request(job_id)

    # ── submit ─────────────────────────────────────────────────────────
    async def insert(self, jobs: Sequence[NewJob]) -> list[str]:
        """Insert jobs and their dependencies; returns their ids (see `SubmitRole.insert`)."""
        if not jobs:
            return []
        ids, ready = self._run(lambda q, t: q.insert(t, jobs))
        self._wake("work" if ready else "changed")
        return ids

    # ── queue: claims, leases, outcomes ────────────────────────────────
    async def claim(
        self,
        n: int,
        owner: str,
        queues: Mapping[str, int] | None = None,
        *,
        types: Sequence[str] | None = None,
        refuser: str | None = None,
    ) -> tuple[list[SharedJobRow], float | None]:
        """Take up to `n` due jobs in strategy order under a lease (`QueueRole.claim`);
        only jobs of `types` (None: any) that `refuser` did not refuse."""
        if n <= 0:
            return [], None
        kinds = None if types is None else frozenset(types)
        who = owner if refuser is None else refuser
        rows, next_due = self._run(
            lambda q, t: q.claim(t, n, owner, self.lease_seconds, queues, kinds, who)
        )
        if rows:
            self._wake("changed")
        return rows, next_due

    async def renew(self, job_ids: Iterable[str], owner: str) -> set[str]:
        """Extend `owner`'s leases on `job_ids`; the ids whose lease it lost."""
        ids = set(job_ids)

        def body(q: Queue, t: float) -> set[str]:
            lost = set()
            for job_id in ids:
                if q.holds(job_id, owner):
                    q.job(job_id, lease_expires=t + self.lease_seconds)
                else:
                    lost.add(job_id)
            return lost

        return self._run(body) if ids else set()

    async def reap_expired(self, max_expiries: int = MAX_LEASE_EXPIRIES) -> int:
        """Queue again the running jobs whose lease expired; fail those whose
        lease expired `max_expiries` times (`QueueRole.reap_expired`)."""
        check_max_lease_expiries(max_expiries)
        reaped, failed = self._run(lambda q, t: q.reap(t, max_expiries))
        if reaped:
            self._wake("work", *(("finished",) if failed else ()))
        return reaped

    async def refuse(
        self, refusals: Sequence[tuple[str, str]], owner: str, refuser: str, bound: int
    ) -> list[str]:
        """Hand back claimed jobs `owner` cannot build (`QueueRole.refuse`);
        the ids that reached `bound` (still held, for `owner` to fail)."""
        batch = list(refusals)
        at_bound, released = self._run(lambda q, t: q.refuse(batch, owner, refuser, bound))
        if released:
            self._wake("work")
        return at_bound

    async def release(self, job_ids: Iterable[str], owner: str) -> int:
        """Give back claimed jobs that never started; their attempt uncounted."""
        ids = list(dict.fromkeys(job_ids))

        def body(q: Queue, t: float) -> int:
            held = [job_id for job_id in ids if q.holds(job_id, owner)]
            for job_id in held:
                attempts = q.jobs[job_id].attempts - 1
                q.job(
                    job_id,
                    status="pending",
                    lease_owner=None,
                    lease_expires=None,
                    attempts=attempts,
                )
            return len(held)

        count: int = self._run(body) if ids else 0
        if count:
            self._wake("work")
        return count

    async def finish(self, outcomes: Sequence[Outcome], owner: str) -> list[str]:
        """Write ended attempts, settle dependents; the ids written (`QueueRole.finish`)."""
        if not outcomes:
            return []
        results = [None if o.result is None else json.loads(o.result) for o in outcomes]
        written, wake, limited = self._run(lambda q, t: q.finish(t, outcomes, results, owner))
        if written:
            work = wake or limited
            self._wake("finished", *(("work",) if work else ()))
        return written

    async def cancel_requests(self, owner: str) -> list[str]:
        """Ids of the jobs `owner` runs that someone asked to cancel."""
        return self._run(
            lambda q, t: [
                r.job_id
                for r in q.jobs.values()
                if r.status == "running" and r.lease_owner == owner and r.cancel_requested
            ]
        )

    async def set_progress(self, updates: Sequence[tuple[str, dict[str, Any]]], owner: str) -> None:
        """Store the progress of the jobs `owner` still runs."""
        if not updates:
            return
        data = [(job_id, copy_json(progress, "progress")) for job_id, progress in updates]

        def body(q: Queue, t: float) -> int:
            held = [(job_id, p) for job_id, p in data if q.holds(job_id, owner)]
            for job_id, progress in held:
                q.job(job_id, progress=progress)
            return len(held)

        if self._run(body):
            self._wake("changed")

    async def expire_results(self) -> int:
        """Remove the results whose time is up; how many."""

        def body(q: Queue, t: float) -> int:
            due = [
                r.job_id
                for r in q.jobs.values()
                if r.result_expires is not None and r.result_expires <= t
            ]
            for job_id in due:
                q.job(job_id, result=None, result_expires=None)
            return len(due)

        return self._run(body)

    # ── lookup ─────────────────────────────────────────────────────────
    async def get(self, job_id: str) -> SharedJobRow | None:
        """The job as stored now, with its history and dependencies; None if unknown."""

        def body(q: Queue, t: float) -> SharedJobRow | None:
            row = q.jobs.get(job_id)
            if row is None:
                return None
            return attrs.evolve(
                row,
                history=tuple(q.history.get(job_id, ())),
                depends_on=q.upstreams.get(job_id, ()),
            )

        return self._run(body)

    async def jobs(self, job_ids: Sequence[str] | None = None) -> list[SharedJobRow]:
        """Every job (or those of `job_ids` that exist), in ``seq`` order."""

        def body(q: Queue, t: float) -> list[SharedJobRow]:
            if job_ids is None:
                return list(q.jobs.values())
            found = [q.jobs[i] for i in set(job_ids) if i in q.jobs]
            return sorted(found, key=lambda r: r.seq)

        return self._run(body)

    async def dependents(self, job_id: str) -> list[str] | None:
        """The jobs inserted to depend on `job_id`, in ``seq`` order; None if unknown."""

        def body(q: Queue, t: float) -> list[str] | None:
            if job_id not in q.jobs:
                return None
            found = [q.jobs[d] for d in q.downstreams.get(job_id, ()) if d in q.jobs]
            return [r.job_id for r in sorted(found, key=lambda r: r.seq)]

        return self._run(body)

    async def dependents_of(self, job_ids: Sequence[str]) -> dict[str, list[str]]:
        """`dependents` of each of `job_ids` that exists; unknown ids left out."""

        def body(q: Queue, t: float) -> dict[str, list[str]]:
            found: dict[str, list[str]] = {}
            for job_id in job_ids:
                if job_id in q.jobs:
                    below = [q.jobs[d] for d in q.downstreams.get(job_id, ()) if d in q.jobs]
                    found[job_id] = [r.job_id for r in sorted(below, key=lambda r: r.seq)]
            return found

        return self._run(body)

    async def unfinished(self, job_ids: Sequence[str]) -> int:
        """How many of `job_ids` exist and are not terminal yet."""
        return self._run(
            lambda q, t: sum(
                1 for i in set(job_ids) if i in q.jobs and q.jobs[i].status not in TERMINAL
            )
        )

    # ── inspect ────────────────────────────────────────────────────────
    async def counts(self) -> dict[str, int]:
        """How many jobs are in each status (statuses with none left out)."""
        return self._run(lambda q, t: q.counts())

    async def page(
        self,
        statuses: Sequence[str] | None,
        type: str | None,
        text: str | None,
        limit: int,
        offset: int,
    ) -> tuple[list[SharedJobRow], int]:
        """One page of matching jobs, newest first, and how many match."""
        wanted = None if statuses is None else set(statuses)
        needle = text.lower() if text else None

        def matches(r: SharedJobRow) -> bool:
            if (wanted is not None and r.status not in wanted) or (
                type is not None and r.type != type
            ):
                return False
            if needle is None:
                return True
            name = r.options.get("name")
            return any(
                needle in part.lower()
                for part in (
                    r.job_id,
                    r.type,
                    encode_json(r.args),
                    name if isinstance(name, str) else "",
                )
            )

        def body(q: Queue, t: float) -> tuple[list[SharedJobRow], int]:
            found = [r for r in reversed(q.jobs.values()) if matches(r)]
            return found[offset : offset + limit], len(found)

        return self._run(body)

    async def stats(self, since: float) -> StoreStats:
        """Counts, finished per minute, leases, limits' use and the pause flag."""

        def body(q: Queue, t: float) -> StoreStats:
            finished: dict[tuple[float, str], int] = {}
            leases: dict[str, tuple[int, float | None]] = {}
            running_types: dict[str, int] = {}
            running_executors: dict[str, int] = {}
            running_queues: dict[str, int] = {}
            for r in q.jobs.values():
                if r.status in TERMINAL and r.finished_at is not None and r.finished_at >= since:
                    minute = float(int(r.finished_at / 60) * 60)
                    finished[minute, r.status] = finished.get((minute, r.status), 0) + 1
                if r.status != "running":
                    continue
                if r.lease_owner is not None:
                    n, latest = leases.get(r.lease_owner, (0, None))
                    expires = r.lease_expires
                    if latest is not None and (expires is None or latest > expires):
                        expires = latest
                    leases[r.lease_owner] = (n + 1, expires)
                running_types[r.type] = running_types.get(r.type, 0) + 1
                running_queues[r.queue] = running_queues.get(r.queue, 0) + 1
                executor = r.options.get("executor")
                if executor is not None:
                    running_executors[executor] = running_executors.get(executor, 0) + 1
            return StoreStats(
                counts=q.counts(),
                finished=[(m, s, n) for (m, s), n in sorted(finished.items())],
                leases=[(owner, n, e) for owner, (n, e) in sorted(leases.items())],
                running_types=running_types,
                running_executors=running_executors,
                limits=q.limits,
                rate_tats=dict(q.rate_tats),
                queue_paused=q.paused,
                at=t,
                running_queues=running_queues,
            )

        return self._run(body)

    # ── operate ────────────────────────────────────────────────────────
    async def retry(self, job_ids: Sequence[str]) -> list[str]:
        """Failed, timed-out or cancelled jobs back to pending; the ids moved."""
        moved: list[str] = self._run(lambda q, t: q.retry(t, job_ids))
        if moved:
            self._wake("work")
        return moved

    async def requeue(self, statuses: Sequence[str], type: str | None) -> list[str]:
        """`retry` every job in `statuses` of job type `type`; the ids moved."""
        wanted = {s for s in statuses if s in RETRYABLE}

        def body(q: Queue, t: float) -> list[str]:
            ids = [
                r.job_id
                for r in q.jobs.values()
                if r.status in wanted and (type is None or r.type == type)
            ]
            return q.retry(t, ids)

        moved: list[str] = self._run(body) if wanted else []
        if moved:
            self._wake("work")
        return moved

    async def purge(self, before: float, statuses: Sequence[str]) -> int:
        """Delete terminal jobs in `statuses` finished before `before`; how many."""
        wanted = {s for s in statuses if s in TERMINAL}

        def body(q: Queue, t: float) -> int:
            gone = {
                r.job_id
                for r in q.jobs.values()
                if r.status in wanted and r.finished_at is not None and r.finished_at < before
            }
            _delete(q, gone)
            return len(gone)

        deleted: int = self._run(body) if wanted else 0
        if deleted:
            self._wake("changed")
        return deleted

    async def delete_finished(self, job_ids: Sequence[str]) -> list[str]:
        """Delete the terminal jobs of `job_ids`; the ids deleted, in the order given."""
        ids = list(dict.fromkeys(job_ids))

        def body(q: Queue, t: float) -> list[str]:
            gone = [j for j in ids if (r := q.jobs.get(j)) is not None and r.status in TERMINAL]
            _delete(q, set(gone))
            return gone

        deleted: list[str] = self._run(body) if ids else []
        if deleted:
            self._wake("changed")
        return deleted

    async def request_cancel_many(self, job_ids: Sequence[str]) -> list[str]:
        """`request_cancel` each of `job_ids` at once; the ids cancelled or
        flagged, in the order given."""
        ids = list(dict.fromkeys(job_ids))

        def body(q: Queue, t: float) -> tuple[list[str], list[str]]:
            done = [j for j in ids if (r := q.jobs.get(j)) is not None and r.status not in TERMINAL]
            running = [j for j in done if q.jobs[j].status == "running"]
            for job_id in running:
                q.job(job_id, cancel_requested=True)
            waiting = [j for j in done if q.jobs[j].status != "running"]
            for job_id in waiting:
                q.job(job_id, status="cancelled", last_error="cancelled", finished_at=t)
            if waiting:
                q.settle([(job_id, "cancelled") for job_id in waiting], t)
            return done, running

        done, running = self._run(body) if ids else ([], [])
        for job_id in running:
            self._wake("cancel", job_id=job_id)
        if len(done) > len(running):
            self._wake("work", "finished")
        return done

    async def request_cancel(self, job_id: str) -> bool:
        """Cancel a job from any process; False if unknown or already finished."""

        def body(q: Queue, t: float) -> tuple[bool, bool]:
            row = q.jobs.get(job_id)
            if row is None or row.status in TERMINAL:
                return False, False
            if row.status == "running":
                q.job(job_id, cancel_requested=True)
                return True, True
            q.job(job_id, status="cancelled", last_error="cancelled", finished_at=t)
            q.settle([(job_id, "cancelled")], t)
            return True, False

        done, running = self._run(body)
        if running:
            self._wake("cancel", job_id=job_id)
        elif done:
            self._wake("work", "finished")
        return done

    async def set_queue_paused(self, paused: bool, queue: str | None = None) -> bool:
        """Pause or resume claiming for every store of the queue, from every queue
        (`queue` None) or one; False if it already was."""

        def body(q: Queue, t: float) -> bool:
            if queue is not None:
                changed = (queue in q.paused_queues) != paused
                if paused:
                    q.paused_queues.add(queue)
                else:
                    q.paused_queues.discard(queue)
                return changed
            changed = q.paused != paused
            q.paused = paused
            return changed

        changed: bool = self._run(body)
        if changed and not paused:
            self._wake("work")
        return changed

    async def queue_paused(self, queue: str | None = None) -> bool:
        """Whether claiming is paused, from every queue (`queue` None) or that one."""
        if queue is None:
            return self._run(lambda q, t: q.paused)
        return self._run(lambda q, t: queue in q.paused_queues)

    async def queue_stats(self, since: float) -> list[QueueStatsRow]:
        """Each queue at a glance, by name (`InspectRole.queue_stats`)."""

        def body(q: Queue, t: float) -> list[QueueStatsRow]:
            found: dict[str, dict[str, Any]] = {}
            for r in q.jobs.values():
                finished = r.finished_at is not None and r.finished_at >= since
                if r.status not in ("pending", "retry_wait", "running") and not finished:
                    continue
                rec = found.setdefault(
                    r.queue, {"ready": 0, "oldest": None, "running": 0, "finished": 0}
                )
                if r.status in ("pending", "retry_wait") and r.unmet == 0 and r.run_at <= t:
                    rec["ready"] += 1
                    oldest = rec["oldest"]
                    rec["oldest"] = r.run_at if oldest is None else min(oldest, r.run_at)
                elif r.status == "running":
                    rec["running"] += 1
                elif finished and r.status in TERMINAL:
                    rec["finished"] += 1
            return queue_rows(found, set(q.paused_queues))

        return self._run(body)

    # ── schedules ──────────────────────────────────────────────────────
    async def add_schedule(self, schedule: SharedScheduleRow) -> SharedScheduleRow:
        """Create the schedule unless it exists (then make it active again)."""
        args, options = copy_json(schedule.args, "args"), copy_json(schedule.options, "options")
        trigger = copy_json(schedule.trigger, "trigger")

        def body(q: Queue, t: float) -> SharedScheduleRow:
            found = q.schedules.get(schedule.schedule_id)
            if found is not None:
                stored = attrs.evolve(found, active=True)
            else:
                stored = attrs.evolve(
                    schedule,
                    args=args,
                    options=options,
                    trigger=trigger,
                    active=True,
                    last_job_id=None,
                    fired=0,
                    skipped=0,
                    paused=False,
                )
            q.schedules[schedule.schedule_id] = stored
            return stored

        return self._run(body)

    async def get_schedule(self, schedule_id: str) -> SharedScheduleRow:
        """The schedule as stored now; `StoreError` if unknown."""

        def body(q: Queue, t: float) -> SharedScheduleRow:
            found = q.schedules.get(schedule_id)
            if found is None:
                raise StoreError(f"{self.url}: unknown schedule {schedule_id!r}")
            return found

        return self._run(body)

    async def fire_schedule(
        self, schedule_id: str, expected_next: float, new_next: float, job: NewJob
    ) -> bool:
        """Fire the period due at `expected_next` exactly once (a compare-and-set)."""

        def body(q: Queue, t: float) -> bool:
            s = q.schedules.get(schedule_id)
            if s is None or s.next_run != expected_next or not s.active or s.paused:
                return False
            s = q.schedules[schedule_id] = attrs.evolve(s, next_run=new_next)
            if not s.allow_overlap and s.last_job_id is not None:
                previous = q.jobs.get(s.last_job_id)
                if previous is not None and previous.status not in TERMINAL:
                    q.schedules[schedule_id] = attrs.evolve(s, skipped=s.skipped + 1)
                    return True
            q.fire(t, s, job)
            return True

        fired: bool = self._run(body)
        if fired:
            self._wake("work")
        return fired

    async def deactivate_schedule(self, schedule_id: str) -> bool:
        """Stop a schedule for every store; False if unknown or already stopped."""

        def body(q: Queue, t: float) -> bool:
            s = q.schedules.get(schedule_id)
            if s is None or not s.active:
                return False
            q.schedules[schedule_id] = attrs.evolve(s, active=False)
            return True

        return self._run(body)

    async def schedule_jobs(self, schedule_id: str, limit: int | None = None) -> list[SharedJobRow]:
        """The jobs a schedule fired, in ``seq`` order (the last `limit`).

        A scan of the queue's jobs: this store lives in one process's memory,
        so a scan costs no round trip (the SQL stores read an index)."""

        def body(q: Queue, t: float) -> list[SharedJobRow]:
            fired = [r for r in q.jobs.values() if r.schedule_id == schedule_id]
            if limit is None:
                return fired
            return fired[-limit:] if limit > 0 else []

        return self._run(body)

    async def schedules(self) -> list[SharedScheduleRow]:
        """Every schedule, by id."""
        return self._run(lambda q, t: [q.schedules[k] for k in sorted(q.schedules)])

    async def set_schedule_paused(
        self, schedule_id: str, paused: bool, next_run: float | None = None
    ) -> bool:
        """Pause or resume a schedule; False if unknown or already so."""

        def body(q: Queue, t: float) -> bool:
            s = q.schedules.get(schedule_id)
            if s is None or s.paused == paused:
                return False
            q.schedules[schedule_id] = attrs.evolve(
                s, paused=paused, next_run=s.next_run if next_run is None else next_run
            )
            return True

        return self._run(body)

    async def trigger_schedule(self, schedule_id: str, job: NewJob) -> bool:
        """Insert `job` for the schedule now, counted as fired; False if unknown."""

        def body(q: Queue, t: float) -> bool:
            s = q.schedules.get(schedule_id)
            if s is None:
                return False
            q.insert(t, [attrs.evolve(job, schedule_id=schedule_id, depends_on=())])
            q.schedules[schedule_id] = attrs.evolve(s, fired=s.fired + 1, last_job_id=job.job_id)
            return True

        done: bool = self._run(body)
        if done:
            self._wake("work")
        return done

    # ── workers ────────────────────────────────────────────────────────
    async def heartbeat(self, worker: WorkerRow, forget_after: float) -> str | None:
        """Write `worker`'s row stamped now (its first ``started_at`` and its
        request kept), forget the rows not seen for `forget_after` seconds;
        returns the row's request."""

        def body(q: Queue, t: float) -> str | None:
            for worker_id, row in list(q.workers.items()):
                if row.last_seen < t - forget_after and worker_id != worker.worker_id:
                    del q.workers[worker_id]
            before = q.workers.get(worker.worker_id)
            started = t if before is None else before.started_at
            command = None if before is None else before.command
            q.workers[worker.worker_id] = attrs.evolve(
                worker,
                queues=dict(worker.queues),
                job_types=list(worker.job_types),
                started_at=started,
                last_seen=t,
                command=command,
            )
            return command

        return self._run(body)

    async def request_worker(self, worker_id: str, command: str) -> bool:
        """Leave `command` on a live worker's row (``stop`` stays over
        ``drain``) and tell it; False if unknown or lost."""
        command = check_worker_command(command)

        def body(q: Queue, t: float) -> bool:
            row = q.workers.get(worker_id)
            if row is None or t - row.last_seen > row.lost_after:
                return False
            if row.command != "stop":
                q.workers[worker_id] = attrs.evolve(row, command=command)
            return True

        done: bool = self._run(body)
        if done:
            self._wake("request", job_id=worker_id)
        return done

    async def workers(self) -> tuple[list[WorkerRow], float]:
        """Every registered worker, by id, and the time read."""
        return self._run(lambda q, t: ([q.workers[k] for k in sorted(q.workers)], t))

    async def forget_worker(self, worker_id: str) -> bool:
        """Delete a worker's row; False if there was none."""
        return self._run(lambda q, t: q.workers.pop(worker_id, None) is not None)

    async def unserved_types(self, known: Sequence[str], scan: int) -> dict[str, int]:
        """Due jobs per job type not in `known`, among the first `scan` due
        ones in claim order."""
        skip = set(known)

        def body(q: Queue, t: float) -> dict[str, int]:
            due = sorted(
                (
                    r
                    for r in q.jobs.values()
                    if r.status in ("pending", "retry_wait") and r.unmet == 0 and r.run_at <= t
                ),
                key=lambda r: (r.sort_key, r.seq),
            )
            counts: dict[str, int] = {}
            for r in due[:scan]:
                if r.type not in skip:
                    counts[r.type] = counts.get(r.type, 0) + 1
            return counts

        return self._run(body)

    # ── history ────────────────────────────────────────────────────────
    async def add_history(self, rows: Sequence[HistoryRow]) -> None:
        """Add a worker's folded rows to every step's; drop the rows kept long enough."""
        check_history_rows(rows)
        self._run(lambda q, t: q.throughput.add(rows, t))

    async def history(
        self, step: float, since: float, type: str | None, queue: str | None
    ) -> HistoryRead:
        """The kept rows of `step` since `since`, per bucket and per job type."""
        return self._run(lambda q, t: q.throughput.read(step, since, type, queue))

    async def backlog(self, queue: str | None) -> tuple[list[BacklogRow], float]:
        """Each job type's ready and running jobs per queue (or of `queue`), and the time read."""

        def body(q: Queue, t: float) -> tuple[list[BacklogRow], float]:
            found: dict[tuple[str, str], list[Any]] = {}
            for r in q.jobs.values():
                if r.status not in ("pending", "retry_wait", "running"):
                    continue
                if (queue is not None and r.queue != queue) or r.unmet:
                    continue  # another queue's, or waiting for its dependencies
                rec = found.setdefault((r.queue, r.type), [0, 0, None])
                if r.status == "running":
                    rec[1] += 1
                    continue
                rec[0] += 1
                if r.run_at <= t:
                    rec[2] = r.run_at if rec[2] is None else min(rec[2], r.run_at)
            rows = [
                BacklogRow(
                    queue=key[0], type=key[1], queued=rec[0], running=rec[1], oldest_due=rec[2]
                )
                for key, rec in sorted(found.items())
            ]
            return rows, t

        return self._run(body)

    # ── limits ─────────────────────────────────────────────────────────
    async def sync_limits(self, data: LimitsData | None) -> LimitsData | None:
        """Agree on the cluster's limits; the limits in force."""

        def body(q: Queue, t: float) -> LimitsData | None:
            if data and q.limits is None:
                q.limits = copy_json(data, "limits")
            if data and q.limits != data:
                raise StoreError(
                    f"{self.url}: this process's limits {json.dumps(data, sort_keys=True)} "
                    f"differ from the limits the cluster runs with "
                    f"{json.dumps(q.limits, sort_keys=True)}; every process must use the same "
                    "limits (or none); change them for all with set_limits"
                )
            return q.limits

        return self._run(body)

    async def set_limits(self, data: LimitsData | None) -> None:
        """Replace the cluster's limits (None or empty: none); wakes the claimers."""
        limits = copy_json(data, "limits") if data else None

        def body(q: Queue, t: float) -> None:
            q.limits = limits

        self._run(body)
        self._wake("work")


def _delete(q: Queue, gone: set[str]) -> None:
    """Forget the jobs `gone` with their history, keys and dependency edges."""
    for job_id in gone:
        row = q.jobs.pop(job_id)
        q.history.pop(job_id, None)
        if row.key is not None and q.keys.get(row.key) == job_id:
            del q.keys[row.key]
        for u in q.upstreams.pop(job_id, ()):
            if u in q.downstreams and u not in gone:
                q.downstreams[u] = [d for d in q.downstreams[u] if d != job_id]
        for d in q.downstreams.pop(job_id, ()):
            if d in q.upstreams and d not in gone:
                q.upstreams[d] = tuple(u for u in q.upstreams[d] if u != job_id)
