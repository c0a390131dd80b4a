"""The soak's checks: the ledger (what ran), the store (what it says) and the faults.

`check` is a pure function of three lists, so each rule is tested on
hand-made ledgers (tests/test_chaos.py):

* **not terminal**: every stored job ended (completed, failed, timed out or
  cancelled) once the soak drained.
* **lost**: a job whose submit was acknowledged is missing from the store,
  or a COMPLETED job never ran its body to the end.
* **partial batch**: a producer's batch (announced in the ledger before it
  was sent) is in the store only in part (a batch is one transaction).
* **doubled**: a body ran to completion twice. Allowed only when the
  earlier run's process suffered a fault (killed, paused, its connections
  cut) between that run's start and the later run's start: its result was
  never recorded, or its lease ran out; or when that process itself
  reported losing that job's lease (``lease lost``: it stalled longer than
  the lease after it had started the attempt, a fault the machine injected).
  Runs are ordered by when their worker started them (after checking the
  lease), not by when the body wrote its first record. Any other
  re-execution that is not a retry after a failed attempt is a violation
  too (``rerun``).
* **order**: a job started before one of its dependencies had run to the
  end, or ran although a dependency never completed.
* **schedule**: a schedule period fired twice, or off its grid.
* **unique**: two different jobs with one unique key ran at the same time
  (neither run disturbed by a fault).

The job and deployment faults add:

* **unrun**: a job ended failed or timed out without its body ever starting
  (a worker that could not build it, or could not start it), other than a
  tampered row, or a job its workers kept losing (``lease expired``).
* **poison**: a job that spins its worker's loop (``spin``) did not end
  failed, or ran more often than the workers' lease-expiry bound.
* **tampered**: a row the soak tampered with did not end failed, or ran.
* **blocked**: a worker's event loop went without a heartbeat for longer
  than its watchdog bound (outside a ``stop`` fault of that process).
* **shutdown**: a worker told to stop (SIGTERM) took longer than its grace
  (plus `SHUTDOWN_SLACK`) to exit.
* **fork**: a producer's child, forked after the producer opened its
  client, could not submit through that client.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

TERMINAL = frozenset({"completed", "failed", "timed_out", "cancelled"})
#: Fault kinds that hit every worker process at once (no pid).
ALL_WORKERS = None
#: Seconds a worker may take to exit beyond its grace once told to stop.
SHUTDOWN_SLACK = 10.0
#: Seconds a worker's loop may go without a heartbeat beyond its watchdog bound
#: (a few heartbeats, and the scheduling noise of a loaded machine).
HEARTBEAT_SLACK = 2.0


@attrs.frozen
class Run:
    """One attempt of a job body in one process, from the ledger."""

    job: str
    pid: int
    #: When the worker started the attempt (after checking its lease).
    start: float
    #: "end" (ran to completion), "fail" (failed on purpose) or None (cut short).
    outcome: str | None
    stop: float | None
    #: Which attempt of the job it was (1 for the first).
    attempt: int = 0


@attrs.frozen
class Fault:
    """A fault the soak injected (`pid` None: every worker), or a ``lease lost``
    a worker reported for `job` (a stall the soak did not cause)."""

    kind: str
    pid: int | None
    t0: float
    t1: float
    job: str | None = None


#: The kind of the faults that are a worker's own report of a lost lease.
LEASE_LOST = "lease_lost"


@attrs.frozen
class JobFault:
    """A job fault (a job that misbehaves, a tampered row) or a deployment fault
    (an old worker, a forking producer) the soak injected. Unlike a `Fault` it
    explains nothing: the workers must survive it without a re-run."""

    kind: str
    #: The job it submitted or tampered with (None for a process).
    job: str | None
    #: The process it started (an old worker, a forking producer).
    pid: int | None
    t0: float
    t1: float


@attrs.frozen
class Process:
    """A worker process's life as the soak saw it."""

    pid: int
    start: float
    #: When the soak saw it gone (None: still running at the end).
    end: float | None
    #: ``killed`` (by a fault), ``exited`` (by itself), ``stopped`` (it exited
    #: after SIGTERM) or ``unstoppable`` (still running long after SIGTERM: killed).
    how: str
    #: When the soak told it to stop (SIGTERM), if it did.
    stop_requested: float | None = None


@attrs.define
class Report:
    """What the checks found. `violations` is empty when the soak passed."""

    jobs: int = 0
    statuses: Counter[str] = attrs.field(factory=Counter)
    submitted: int = 0
    runs: int = 0
    retries: int = 0
    reruns_after_faults: int = 0
    doubled_after_faults: int = 0
    #: Of those: explained by a stall the worker reported, not by an injected fault.
    after_stalls: int = 0
    schedule_periods: int = 0
    unique_keys: int = 0
    batches: int = 0
    torn_lines: int = 0
    #: "lease lost" lines the workers logged (each names one job).
    leases_lost: int = 0
    faults: Counter[str] = attrs.field(factory=Counter)
    #: Job and deployment faults injected, by kind.
    job_faults: Counter[str] = attrs.field(factory=Counter)
    #: The longest a worker's loop went without a heartbeat (outside stops), seconds.
    longest_block: float = 0.0
    violations: list[tuple[str, str]] = attrs.field(factory=list)

    def count(self, kind: str) -> int:
        return sum(1 for k, _ in self.violations if k == kind)

    @property
    def ok(self) -> bool:
        return not self.violations


def runs_of(records: Iterable[Mapping[str, Any]]) -> dict[str, list[Run]]:
    """Each job's runs, by start time: a ``start`` record and what followed it in its process."""
    open_runs: dict[tuple[str, int, int], Mapping[str, Any]] = {}
    done: list[Run] = []
    for r in sorted(records, key=lambda r: r["t"]):
        if r.get("role") != "worker" or "job" not in r:
            continue
        key = (r["job"], r["pid"], r.get("attempt", 0))
        if r["e"] == "start":
            if key in open_runs:  # the same attempt started again in one process: cut short
                old = open_runs.pop(key)
                done.append(
                    Run(r["job"], r["pid"], old.get("started", old["t"]), None, None, key[2])
                )
            open_runs[key] = r
        elif r["e"] in ("end", "fail") and key in open_runs:
            start = open_runs.pop(key)
            started = start.get("started", start["t"])
            done.append(Run(r["job"], r["pid"], started, r["e"], r["t"], key[2]))
    done += [
        Run(k[0], k[1], r.get("started", r["t"]), None, None, k[2]) for k, r in open_runs.items()
    ]
    by_job: dict[str, list[Run]] = defaultdict(list)
    for run in sorted(done, key=lambda run: run.start):
        by_job[run.job].append(run)
    return by_job


def faults_in(records: Iterable[Mapping[str, Any]]) -> list[Fault]:
    """The faults the soak wrote to the ledger (``fault`` records)."""
    return [
        Fault(r["kind"], r["victim"], r["t0"], r["t1"], r.get("job"))
        for r in records
        if r["e"] == "fault"
    ]


def job_faults_in(records: Iterable[Mapping[str, Any]]) -> list[JobFault]:
    """The job and deployment faults the soak wrote to the ledger (``jobfault``)."""
    return [
        JobFault(r["kind"], r.get("job"), r.get("victim"), r["t0"], r["t1"])
        for r in records
        if r["e"] == "jobfault"
    ]


def processes_in(records: Iterable[Mapping[str, Any]]) -> list[Process]:
    """The worker processes the soak wrote to the ledger (``process`` records)."""
    return [
        Process(r["victim"], r["start"], r.get("end"), r["how"], r.get("stop_requested"))
        for r in records
        if r["e"] == "process"
    ]


def _faulted(
    faults: list[Fault], pid: int, after: float, before: float, job: str | None = None
) -> bool:
    """Did a fault hit process `pid` between `after` and `before` (`job`'s lease, for
    a reported lease loss)?"""
    return any(
        (f.pid is ALL_WORKERS or f.pid == pid)
        and f.t1 >= after
        and f.t0 <= before
        and (f.job is None or f.job == job)
        for f in faults
    )


def check(
    records: Sequence[Mapping[str, Any]],
    rows: Sequence[Mapping[str, Any]],
    faults: list[Fault],
    *,
    interval: float = 1.0,
    torn: int = 0,
    watchdog: float = 10.0,
    lease_expiry_bound: int = 3,
    grace: float = 10.0,
) -> Report:
    """Check a soak: ledger `records`, the store's final `rows`, the injected `faults`.

    A row is a mapping with ``job_id``, ``status``, ``key``, ``unique_key``,
    ``schedule_id`` and ``scheduled_for`` (None when not fired by a schedule),
    and optionally ``last_error``.
    Ledger records are those `benchmarks.chaos.ledger.read` returns: producers'
    ``intent`` (a batch's keys, before it is sent) and ``submitted`` (the ids
    it got, the dependencies and unique keys) and a forked producer's
    ``fork_child``; workers' ``start``, ``end`` and ``fail`` and their loops'
    ``alive`` heartbeats; the soak's ``jobfault`` and ``process`` records.
    `watchdog` is the longest a worker's loop may be blocked (seconds),
    `lease_expiry_bound` the most runs of a poison job, `grace` the workers'
    ``--grace``.
    """
    report = Report(torn_lines=torn)
    report.faults.update(f.kind for f in faults if f.kind != LEASE_LOST)
    report.leases_lost = sum(1 for f in faults if f.kind == LEASE_LOST)
    violations = report.violations
    stored = {row["job_id"]: row for row in rows}
    report.jobs = len(stored)
    report.statuses.update(row["status"] for row in rows)
    runs = runs_of(records)
    report.runs = sum(len(r) for r in runs.values())

    for job_id, row in stored.items():
        if row["status"] not in TERMINAL:
            violations.append(("not terminal", f"{job_id} is {row['status']}"))
        if row["status"] == "completed" and not any(
            run.outcome == "end" for run in runs.get(job_id, ())
        ):
            violations.append(("lost", f"{job_id} is completed but its body never ran to the end"))

    # What producers were told: every acknowledged id is stored; batches are whole.
    deps: dict[str, set[str]] = defaultdict(set)
    unique: dict[str, set[str]] = defaultdict(set)
    keys = {row["key"] for row in rows if row.get("key")}
    for r in records:
        if r["e"] == "submitted":
            for job_id in r["ids"]:
                report.submitted += 1
                if job_id not in stored:
                    violations.append(("lost", f"{job_id} was acknowledged but is not stored"))
            for down, ups in r.get("deps", {}).items():
                deps[down].update(ups)
            for job_id, key in r.get("unique", {}).items():
                unique[key].add(job_id)
        elif r["e"] == "intent":
            report.batches += 1
            present = [k for k in r["keys"] if k in keys]
            if present and len(present) != len(r["keys"]):
                violations.append(
                    (
                        "partial batch",
                        f"batch {r['batch']}: {len(present)} of {len(r['keys'])} jobs stored",
                    )
                )

    _check_reruns(runs, faults, report)
    _check_order(runs, deps, stored, violations)
    _check_schedules(rows, interval, report)
    _check_unique(runs, unique, faults, report)
    job_faults = job_faults_in(records)
    report.job_faults.update(f.kind for f in job_faults)
    _check_job_faults(runs, stored, job_faults, lease_expiry_bound, violations)
    # A dependent of a job that did not complete is the order check's.
    upstream_failed = {
        down
        for down, ups in deps.items()
        if any(stored.get(up, {}).get("status") != "completed" for up in ups)
    }
    _check_unrun(runs, stored, job_faults, upstream_failed, violations)
    processes = processes_in(records)
    _check_blocked(records, processes, faults, watchdog, report)
    _check_shutdown(processes, grace, violations)
    _check_forked_producers(records, job_faults, violations)
    return report


def _check_forked_producers(
    records: Sequence[Mapping[str, Any]],
    job_faults: list[JobFault],
    violations: list[tuple[str, str]],
) -> None:
    """Each forking producer reports how its child ended; it must have ended well."""
    reports = {r["pid"]: r for r in records if r["e"] == "fork_child"}
    for fault in job_faults:
        if fault.kind != "producer_fork":
            continue
        found = reports.get(fault.pid)
        if found is None:
            violations.append(("fork", f"producer {fault.pid} never reported its child's end"))
        elif not found.get("ok"):
            violations.append(("fork", f"producer {fault.pid}: {found.get('reason')}"))


def _check_reruns(runs: dict[str, list[Run]], faults: list[Fault], report: Report) -> None:
    """A job's runs after its first: retries after a failure, or re-executions a fault
    explains: one the soak injected, or a stall its worker reported (``lease lost``)."""
    injected = [f for f in faults if f.kind != LEASE_LOST]
    stalls = [f for f in faults if f.kind == LEASE_LOST]

    def explained(job_id: str, before: Run, after: Run) -> bool:
        if _faulted(injected, before.pid, before.start, after.start):
            return True
        if _faulted(stalls, before.pid, before.start, after.start, job_id):
            report.after_stalls += 1
            return True
        return False

    for job_id, job_runs in runs.items():
        completed = [run for run in job_runs if run.outcome == "end"]
        for earlier, later in itertools.pairwise(completed):
            if explained(job_id, earlier, later):
                report.doubled_after_faults += 1
            else:
                report.violations.append(
                    (
                        "doubled",
                        f"{job_id} ran to completion in {earlier.pid} at {earlier.start:.3f} "
                        f"and again in {later.pid} at {later.start:.3f}, no fault in between",
                    )
                )
        for before, run in itertools.pairwise(job_runs):
            if before.outcome == "fail" and before.stop is not None and before.stop <= run.start:
                report.retries += 1
            elif explained(job_id, before, run):
                report.reruns_after_faults += 1
            elif not (before.outcome == run.outcome == "end"):  # that is "doubled", above
                report.violations.append(
                    (
                        "rerun",
                        f"{job_id} started again in {run.pid} at {run.start:.3f} while its run "
                        f"in {before.pid} from {before.start:.3f} had no fault",
                    )
                )


def _check_order(
    runs: dict[str, list[Run]],
    deps: dict[str, set[str]],
    stored: Mapping[str, Mapping[str, Any]],
    violations: list[tuple[str, str]],
) -> None:
    for down, ups in deps.items():
        down_runs = runs.get(down, [])
        for up in ups:
            ends = [run.stop for run in runs.get(up, []) if run.outcome == "end"]
            first_end = min((t for t in ends if t is not None), default=None)
            up_row = stored.get(up)
            if up_row is not None and up_row["status"] != "completed":
                if down_runs:
                    violations.append(("order", f"{down} ran although {up} is {up_row['status']}"))
                elif down in stored and stored[down]["status"] != "cancelled":
                    violations.append(
                        (
                            "order",
                            f"{down} is {stored[down]['status']}, not cancelled, "
                            f"although {up} is {up_row['status']}",
                        )
                    )
                continue
            for run in down_runs:
                if first_end is None or run.start < first_end:
                    violations.append(
                        ("order", f"{down} started at {run.start:.3f} before {up} ran to the end")
                    )


def _check_schedules(rows: Sequence[Mapping[str, Any]], interval: float, report: Report) -> None:
    periods: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        if row.get("schedule_id") is not None and row.get("scheduled_for") is not None:
            periods[row["schedule_id"]].append(row["scheduled_for"])
    for schedule_id, fired in periods.items():
        report.schedule_periods += len(fired)
        for period, n in Counter(fired).items():
            if n > 1:
                report.violations.append(
                    ("schedule", f"schedule {schedule_id}: period {period:.3f} fired {n} times")
                )
        first = min(fired)
        for period in set(fired):
            steps = (period - first) / interval
            if abs(steps - round(steps)) > 1e-3:
                report.violations.append(
                    ("schedule", f"schedule {schedule_id}: period {period:.3f} is off its grid")
                )


def _check_unique(
    runs: dict[str, list[Run]], unique: dict[str, set[str]], faults: list[Fault], report: Report
) -> None:
    report.unique_keys = len(unique)
    for key, job_ids in unique.items():
        spans = [
            (run.start, run.stop, job_id)
            for job_id in job_ids
            for run in runs.get(job_id, [])
            if run.stop is not None and not _faulted(faults, run.pid, run.start, run.stop, job_id)
        ]
        spans.sort()
        for i, (_, end, first) in enumerate(spans):
            for start, _, second in spans[i + 1 :]:
                if start >= end:
                    break
                if second != first:
                    report.violations.append(
                        ("unique", f"unique key {key}: {first} and {second} ran at the same time")
                    )


def _check_job_faults(
    runs: dict[str, list[Run]],
    stored: Mapping[str, Mapping[str, Any]],
    job_faults: list[JobFault],
    lease_expiry_bound: int,
    violations: list[tuple[str, str]],
) -> None:
    for fault in job_faults:
        row = stored.get(fault.job) if fault.job is not None else None
        if row is None:
            continue
        job_runs = runs.get(row["job_id"], [])
        if fault.kind == "spin" and (
            row["status"] != "failed" or len(job_runs) > lease_expiry_bound
        ):
            violations.append(
                (
                    "poison",
                    f"{fault.job} (spins its loop) is {row['status']} after {len(job_runs)} "
                    f"runs; it must end failed within {lease_expiry_bound}",
                )
            )
        elif fault.kind == "tampered" and (row["status"] != "failed" or job_runs):
            violations.append(
                (
                    "tampered",
                    f"{fault.job} (a tampered row) is {row['status']} after "
                    f"{len(job_runs)} runs; it must end failed, unrun",
                )
            )


def _check_unrun(
    runs: dict[str, list[Run]],
    stored: Mapping[str, Mapping[str, Any]],
    job_faults: list[JobFault],
    upstream_failed: set[str],
    violations: list[tuple[str, str]],
) -> None:
    """A job that failed or timed out must have run its last attempt (unless
    it is a tampered row, a dependent of a job that did not complete, or a
    job whose claims kept being lost: its workers died holding it). A row
    without ``attempts`` needs any run."""
    excused = upstream_failed | {f.job for f in job_faults if f.kind == "tampered"}
    for job_id, row in stored.items():
        if row["status"] not in ("failed", "timed_out") or job_id in excused:
            continue
        error = row.get("last_error") or ""
        last = row.get("attempts")
        ran = [run for run in runs.get(job_id, ()) if last is None or run.attempt == last]
        if not ran and "lease expired" not in error:
            which = "never ran" if last is None else f"never ran its attempt {last}"
            violations.append(("unrun", f"{job_id} is {row['status']} but {which}: {error}"))


def _check_blocked(
    records: Sequence[Mapping[str, Any]],
    processes: list[Process],
    faults: list[Fault],
    watchdog: float,
    report: Report,
) -> None:
    """Each worker's loop beats every fraction of a second: a gap in its beats
    (or from its last beat until it died, or was told to stop) is time its
    loop was blocked, unless the soak had stopped the process (SIGSTOP)."""
    beats: dict[int, list[float]] = defaultdict(list)
    for r in records:
        if r["e"] == "alive":
            beats[r["pid"]].append(r["t"])
    ends = {p.pid: p.stop_requested or p.end for p in processes}
    stops = [f for f in faults if f.kind == "stop"]
    for pid, times in beats.items():
        times.sort()
        end = ends.get(pid)
        edges = [*times, end] if end is not None and end > times[-1] else times
        for before, after in itertools.pairwise(edges):
            if _faulted(stops, pid, before, after):
                continue
            gap = after - before
            report.longest_block = max(report.longest_block, gap)
            if gap > watchdog + HEARTBEAT_SLACK:
                report.violations.append(
                    (
                        "blocked",
                        f"worker {pid}'s loop was blocked {gap:.1f} s from {before:.3f} "
                        f"(its watchdog bound is {watchdog:g} s)",
                    )
                )


def _check_shutdown(
    processes: list[Process], grace: float, violations: list[tuple[str, str]]
) -> None:
    for p in processes:
        if p.stop_requested is None:
            continue
        took = (p.end or float("inf")) - p.stop_requested
        if p.how == "unstoppable" or took > grace + SHUTDOWN_SLACK:
            violations.append(
                (
                    "shutdown",
                    f"worker {p.pid} did not exit within {grace:g} s (+{SHUTDOWN_SLACK:g}) "
                    f"of SIGTERM"
                    + ("; it was killed" if p.how == "unstoppable" else f": {took:.1f} s"),
                )
            )
