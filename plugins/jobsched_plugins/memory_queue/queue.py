"""The state one ``memory://NAME`` queue keeps, and the transactions that change it.

The rules are the SQLite shared store's (``sqlite_store/claims.py``,
``submit.py``, ``operations.py``), written over dictionaries.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from jobsched.store import (
    AttemptRow,
    HistoryTable,
    LimitsData,
    NewJob,
    Outcome,
    SharedJobRow,
    SharedScheduleRow,
    StoreError,
    WorkerRow,
    encode_json,
    lease_expired_error,
    settle_at_insert,
    settle_dependent,
)

TERMINAL = frozenset(("completed", "failed", "timed_out", "cancelled"))
RETRYABLE = ("failed", "timed_out", "cancelled")
UNFINISHED = frozenset(("pending", "running", "retry_wait"))
_DUE = frozenset(("pending", "retry_wait"))


def copy_json(value: Any, what: str) -> Any:
    """A JSON value as a store keeps it: a copy, and refused if it is not JSON."""
    if not value and type(value) is dict:
        return {}
    try:
        return json.loads(encode_json(value))
    except (TypeError, ValueError) as exc:
        raise StoreError(f"{what} is not JSON, so it cannot be stored: {exc}") from None


class Queue:
    """What the stores of one name share: the jobs, schedules, limits and flags.

    Its methods are the stores' transactions: the caller holds `lock`.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        #: Every job by id, in insertion (``seq``) order; rows leave out
        #: ``history`` and ``depends_on``, kept below.
        self.jobs: dict[str, SharedJobRow] = {}
        self.seq = 0
        self.upstreams: dict[str, tuple[str, ...]] = {}
        self.downstreams: dict[str, list[str]] = {}
        self.history: dict[str, list[AttemptRow]] = {}
        self.keys: dict[str, str] = {}
        #: A unique key -> the job that took it last (it holds it while unfinished).
        self.unique: dict[str, str] = {}
        self.schedules: dict[str, SharedScheduleRow] = {}
        self.limits: LimitsData | None = None
        self.rate_tats: dict[str, float] = {}
        self.paused = False
        #: The worker registry: each worker's heartbeat row by its id.
        self.workers: dict[str, WorkerRow] = {}
        #: Queues paused on their own (`SharedStore.set_queue_paused` with a name).
        self.paused_queues: set[str] = set()
        #: The throughput history (`HistoryRole`), every step's rows.
        self.throughput = HistoryTable()
        #: The stores open on it (each is told of changes on its own loop).
        self.stores: set[Any] = set()

    def job(self, job_id: str, **changes: Any) -> SharedJobRow:
        """Change columns of `job_id`'s row (rows are frozen: a new one); the new row."""
        row = self.jobs[job_id] = attrs.evolve(self.jobs[job_id], **changes)
        return row

    def holder(self, unique_key: str | None) -> str | None:
        """The unfinished job holding `unique_key`, if any."""
        if unique_key is None:
            return None
        job_id = self.unique.get(unique_key)
        if job_id is None or job_id not in self.jobs:
            return None
        return job_id if self.jobs[job_id].status in UNFINISHED else None

    def insert(self, t: float, jobs: Sequence[NewJob]) -> tuple[list[str], bool]:
        """Insert jobs and their dependencies (`SubmitRole.insert`); ``(their ids,
        whether one is due now)``."""
        batch = {job.job_id for job in jobs}
        upstreams = {d for job in jobs for d in job.depends_on} - batch
        missing = sorted(d for d in upstreams if d not in self.jobs)
        if missing:
            raise StoreError(f"unknown dependencies: {missing}")
        statuses = {d: self.jobs[d].status for d in upstreams}
        rows = [
            (job, copy_json(job.args, "args"), copy_json(job.options, "options")) for job in jobs
        ]
        ids: list[str] = []
        alias: dict[str, str] = {}
        ready = False
        for job, args, options in rows:
            existing = (self.keys.get(job.key) if job.key is not None else None) or self.holder(
                job.unique_key
            )
            if existing is None and job.job_id in self.jobs:
                existing = job.job_id
            if existing is not None:
                ids.append(existing)
                alias[job.job_id] = existing
                statuses[existing] = self.jobs[existing].status
                continue
            depends_on = tuple(dict.fromkeys(alias.get(d, d) for d in job.depends_on))
            _, unmet, error = settle_at_insert(job.trigger_rule, depends_on, statuses)
            status = "pending" if error is None else "cancelled"
            self.seq += 1
            self.jobs[job.job_id] = SharedJobRow(
                job_id=job.job_id,
                key=job.key,
                type=job.type,
                args=args,
                options=options,
                status=status,
                attempts=0,
                run_at=job.run_at,
                submitted_at=job.submitted_at,
                seq=self.seq,
                sort_key=tuple(job.sort_key),
                unmet=unmet,
                lease_owner=None,
                lease_expires=None,
                cancel_requested=False,
                result=None,
                last_error=error,
                schedule_id=job.schedule_id,
                submitted_by=job.submitted_by,
                started_at=None,
                finished_at=None if error is None else t,
                unique_key=job.unique_key,
                trigger_rule=job.trigger_rule,
                queue=job.queue,
                job_group=options.get("group"),
            )
            if job.key is not None:
                self.keys[job.key] = job.job_id
            if job.unique_key is not None:
                self.unique[job.unique_key] = job.job_id
            if depends_on:
                self.upstreams[job.job_id] = tuple(sorted(depends_on))
                for d in depends_on:
                    self.downstreams.setdefault(d, []).append(job.job_id)
            ids.append(job.job_id)
            statuses[job.job_id] = status
            ready = ready or (status == "pending" and not unmet)
        return ids, ready

    def claim(
        self,
        t: float,
        n: int,
        owner: str,
        lease_seconds: float,
        queues: Mapping[str, int] | None = None,
        kinds: frozenset[str] | None = None,
        refuser: str | None = None,
    ) -> tuple[list[SharedJobRow], float | None]:
        """Take up to `n` due jobs in strategy order under the cluster's limits,
        from `queues` (each with the most jobs to take; None: every queue), of
        `kinds` (job types; None: any) that `refuser` did not refuse, groups in
        turn (as the databases: docs/limits.md); ``(the rows, when the next
        waiting job is due)`` (`QueueRole.claim`)."""
        if self.paused:
            return [], None
        rooms = None if queues is None else dict(queues)
        due = sorted(
            (
                r
                for r in self.jobs.values()
                if r.status in _DUE
                and r.unmet == 0
                and (kinds is None or r.type in kinds)
                and refuser not in r.refused_by
                and r.queue not in self.paused_queues
                and (rooms is None or r.queue in rooms)
            ),
            key=lambda r: (r.sort_key, r.seq),
        )
        limits = self.limits or {}
        types: dict[str, int] = dict(limits.get("job_types") or {})
        executors: dict[str, int] = dict(limits.get("executors") or {})
        rates: dict[str, dict[str, float]] = dict(limits.get("rates") or {})
        queue_caps: dict[str, int] = dict(limits.get("queues") or {})
        group_limit: int | None = limits.get("group")
        running_t = dict.fromkeys(types, 0)
        running_e = dict.fromkeys(executors, 0)
        running_q = dict.fromkeys(queue_caps, 0)
        running_g: dict[str, int] = {}
        for r in self.jobs.values():
            if r.status == "running":
                if r.type in running_t:
                    running_t[r.type] += 1
                if r.options.get("executor") in running_e:
                    running_e[r.options["executor"]] += 1
                if r.queue in running_q:
                    running_q[r.queue] += 1
                if r.job_group is not None:
                    running_g[r.job_group] = running_g.get(r.job_group, 0) + 1

        def token_at(kind: str) -> float:
            # GCRA, as the other stores: the next token is free at tat - tolerance.
            rate = rates[kind]
            interval = 1.0 / rate["per_second"]
            return max(self.rate_tats.get(kind, t), t) - (rate["burst"] - 1) * interval

        def held(r: SharedJobRow) -> bool:
            executor = r.options.get("executor")
            return (
                (r.type in types and running_t[r.type] >= types[r.type])
                or (executor in executors and running_e[executor] >= executors[executor])
                or (r.type in rates and token_at(r.type) > t + 1e-9)
                or (r.queue in queue_caps and running_q[r.queue] >= queue_caps[r.queue])
                or (
                    group_limit is not None
                    and r.job_group is not None
                    and running_g.get(r.job_group, 0) >= group_limit
                )
            )

        waiting_rows = due
        if any(r.job_group is not None for r in due):
            # Turns: each group's first claimable job, then each one's second, ...
            turn: dict[str | None, int] = {}
            order: dict[str, int] = {}
            for r in due:
                if r.run_at <= t and not held(r):
                    order[r.job_id] = turn[r.job_group] = turn.get(r.job_group, -1) + 1
            due = sorted(
                (r for r in due if r.job_id in order),
                key=lambda r: (order[r.job_id], r.sort_key, r.seq),
            )
        taken: list[SharedJobRow] = []
        for r in due:
            if len(taken) == n:
                break
            if r.run_at > t or held(r) or (rooms is not None and rooms[r.queue] <= 0):
                continue
            if rooms is not None:
                rooms[r.queue] -= 1
            if r.queue in queue_caps:
                running_q[r.queue] += 1
            if r.type in rates:
                tat = max(self.rate_tats.get(r.type, t), t)
                self.rate_tats[r.type] = tat + 1.0 / rates[r.type]["per_second"]
            if r.type in types:
                running_t[r.type] += 1
            executor = r.options.get("executor")
            if executor in executors:
                running_e[executor] += 1
            if r.job_group is not None:
                running_g[r.job_group] = running_g.get(r.job_group, 0) + 1
            taken.append(
                self.job(
                    r.job_id,
                    status="running",
                    attempts=r.attempts + 1,
                    lease_owner=owner,
                    lease_expires=t + lease_seconds,
                    started_at=t,
                    progress=None,
                )
            )
        next_due = None
        if len(taken) < n:
            # Jobs held by a concurrency limit wake on a finish; by a rate, at its next token.
            taken_ids = {r.job_id for r in taken}
            waiting = [r.run_at for r in waiting_rows if r.job_id not in taken_ids and not held(r)]
            waiting += [token_at(k) for k in rates if token_at(k) > t + 1e-9]
            next_due = min(waiting) if waiting else None
        return taken, next_due

    def refuse(
        self, refusals: Sequence[tuple[str, str]], owner: str, refuser: str, bound: int
    ) -> tuple[list[str], bool]:
        """Count refusals of jobs `owner` holds and cannot build, and hand them
        back below `bound` (`QueueRole.refuse`); ``(the ids at the bound,
        whether one is pending again)``."""
        at_bound: list[str] = []
        released = False
        for job_id, error in refusals:
            if not self.holds(job_id, owner):
                continue
            row = self.job(
                job_id,
                build_refusals=self.jobs[job_id].build_refusals + 1,
                last_refusal=error,
                refused_by=(*self.jobs[job_id].refused_by, refuser),
            )
            if row.build_refusals >= bound:
                at_bound.append(job_id)
                continue
            self.job(
                job_id,
                status="pending",
                lease_owner=None,
                lease_expires=None,
                attempts=row.attempts - 1,
            )
            released = True
        return at_bound, released

    def holds(self, job_id: str, owner: str) -> bool:
        """Whether `owner` holds `job_id`'s lease (it runs it)."""
        row = self.jobs.get(job_id)
        return row is not None and row.status == "running" and row.lease_owner == owner

    def reap(self, t: float, bound: int) -> tuple[int, int]:
        """Queue again, or fail at `bound`, the jobs whose lease expired;
        ``(reaped, failed)`` (`QueueRole.reap_expired`)."""
        expired = [
            r
            for r in self.jobs.values()
            if r.status == "running" and r.lease_expires is not None and r.lease_expires < t
        ]
        failed: list[tuple[str, str]] = []
        for r in expired:
            count = r.lease_expiries + 1
            gone = count >= bound
            error = lease_expired_error(count, bound) if gone else None
            self.history.setdefault(r.job_id, []).append(
                AttemptRow(
                    number=r.attempts,
                    status="lease_expired",
                    error=error or "lease expired: its worker stopped renewing it",
                    started_at=r.started_at,
                    finished_at=t,
                    worker=r.lease_owner,
                )
            )
            if gone:
                self.job(
                    r.job_id,
                    status="failed",
                    lease_owner=None,
                    lease_expires=None,
                    lease_expiries=count,
                    finished_at=t,
                    last_error=error,
                )
                failed.append((r.job_id, "failed"))
            else:
                self.job(
                    r.job_id,
                    status="pending",
                    lease_owner=None,
                    lease_expires=None,
                    lease_expiries=count,
                )
        if failed:
            self.settle(failed, t)
        return len(expired), len(failed)

    def finish(
        self, t: float, outcomes: Sequence[Outcome], results: list[Any], owner: str
    ) -> tuple[list[str], bool, bool]:
        """Write the attempts `owner` still holds (`QueueRole.finish`); ``(the ids
        written, whether work became due, whether limits are stored)``."""
        written: list[tuple[str, str]] = []
        for o, result in zip(outcomes, results, strict=True):
            if not self.holds(o.job_id, owner):
                continue  # another process holds it now, or it was written already
            row = self.jobs[o.job_id]
            completed = o.status == "completed"
            self.history.setdefault(o.job_id, []).append(
                AttemptRow(
                    number=row.attempts,
                    status=o.attempt or o.status,
                    error=o.error,
                    started_at=row.started_at,
                    finished_at=t,
                    worker=owner,
                    traceback=o.traceback,
                )
            )
            self.job(
                o.job_id,
                status=o.status,
                result=result,
                last_error=None
                if completed
                else (o.error if o.error is not None else row.last_error),
                last_traceback=o.traceback,
                run_at=o.run_at if o.run_at is not None else row.run_at,
                finished_at=None if o.status == "retry_wait" else t,
                result_expires=t + o.result_ttl if o.result_ttl is not None and completed else None,
                lease_owner=None,
                lease_expires=None,
                cancel_requested=False,
            )
            written.append((o.job_id, o.status))
        ended = [(job_id, status) for job_id, status in written if status in TERMINAL]
        wake = any(status == "retry_wait" for _, status in written)
        if ended:
            wake = self.settle(ended, t) or wake
        return [job_id for job_id, _ in written], wake, bool(self.limits)

    def settle(self, ended: list[tuple[str, str]], t: float) -> bool:
        """Settle the waiting dependents of jobs that just ended, level by level
        (`settle_dependent`); True if one was released."""
        released = False
        while ended:
            order = {u: i for i, (u, _) in enumerate(ended)}
            status_of = dict(ended)
            waiting: dict[str, list[str]] = {}
            for upstream, _ in ended:
                for job_id in self.downstreams.get(upstream, ()):
                    row = self.jobs.get(job_id)
                    if row is not None and row.status == "pending" and row.unmet > 0:
                        waiting.setdefault(job_id, []).append(upstream)
            ended = []
            for job_id in sorted(waiting):
                row = self.jobs[job_id]
                ups = sorted(waiting[job_id], key=order.__getitem__)
                run, left, reason = settle_dependent(
                    row.trigger_rule, row.unmet, [(u, status_of[u]) for u in ups]
                )
                if run is False:
                    self.job(job_id, status="cancelled", finished_at=t, last_error=reason)
                    ended.append((job_id, "cancelled"))
                else:
                    self.job(job_id, unmet=left)
                    released = released or run is True
        return released

    def counts(self) -> dict[str, int]:
        """How many jobs are in each status."""
        counts: dict[str, int] = {}
        for r in self.jobs.values():
            counts[r.status] = counts.get(r.status, 0) + 1
        return counts

    def retry(self, t: float, job_ids: Iterable[str]) -> list[str]:
        """Failed, timed-out or cancelled jobs back to pending (`OperateRole.retry`)."""
        ids = set(job_ids)
        candidates = sorted(
            (self.jobs[i] for i in ids if i in self.jobs and self.jobs[i].status in RETRYABLE),
            key=lambda r: r.seq,
        )
        moved: list[str] = []
        for r in candidates:
            # One unfinished job per unique key: the first wins.
            if self.holder(r.unique_key) is not None:
                continue
            unmet = 0
            for u in self.upstreams.get(r.job_id, ()):
                up = self.jobs.get(u)
                # Upstreams not completed count again; other rules wait only for unfinished ones.
                if (
                    up is not None
                    and up.status != "completed"
                    and (r.trigger_rule == "all_success" or up.status not in RETRYABLE)
                ):
                    unmet += 1
            self.job(
                r.job_id,
                status="pending",
                attempts=0,
                run_at=t,
                lease_owner=None,
                lease_expires=None,
                cancel_requested=False,
                started_at=None,
                finished_at=None,
                result=None,
                result_expires=None,
                progress=None,
                last_error=None,
                last_traceback=None,
                lease_expiries=0,
                build_refusals=0,
                last_refusal=None,
                refused_by=(),
                unmet=unmet,
            )
            if r.unique_key is not None:
                self.unique[r.unique_key] = r.job_id
            moved.append(r.job_id)
        return moved

    def fire(self, t: float, s: SharedScheduleRow, job: NewJob) -> None:
        """Insert the job a schedule fires and count it; a schedule with ``times`` ends."""
        self.insert(t, [attrs.evolve(job, schedule_id=s.schedule_id, depends_on=())])
        fired = s.fired + 1
        times = s.trigger.get("times")
        ended = times is not None and fired >= times
        self.schedules[s.schedule_id] = attrs.evolve(
            s, fired=fired, last_job_id=job.job_id, next_run=math.inf if ended else s.next_run
        )
