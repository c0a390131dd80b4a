"""The soak's orchestrator: the store, the run, drain, checks, report.

    python -m benchmarks.chaos --store URL --workers N --jobs M --duration S [--seed K]
        [--faults LIST] [--watchdog SECONDS] [--lease-expiry-bound N]

`URL` is ``postgresql://...`` (a fresh schema is made for the soak unless the
URL names one, and dropped afterwards when the soak passed) or ``sqlite`` (a
new file in the soak's folder) or ``sqlite:////abs/path.db`` (a file that
must not exist yet). ``lease=2`` is added unless the URL sets a lease.

It starts N ``jobsched worker`` processes, one producer (about M jobs over S
seconds) and one canceller (`benchmarks.chaos.processes`); the orchestrator
serves the recurring schedule too. Faults (`benchmarks.chaos.faults`: every
one of ``--faults``, default all, that applies to the store) come at random
times drawn from the seed, one every ``--fault-every`` seconds on average.

After S seconds the faults stop, paused workers are resumed, the schedule is
cancelled, and the soak waits until every job is terminal; then the
workers stop and `benchmarks.chaos.check` compares the ledger with the
store. Exit status 0 when every check passed, 1 otherwise (the seed is
printed to reproduce it), 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import random
import shutil
import signal
import sqlite3
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from benchmarks.chaos import ledger
from benchmarks.chaos.check import LEASE_LOST, Fault, Report, check, faults_in
from benchmarks.chaos.faults import FAULTS, BadFaults, Faults, applicable, parse_faults
from benchmarks.chaos.processes import GRACE, Processes
from benchmarks.chaos.producer import FORK_WAIT, TICK_EVERY, plugins, tick
from jobsched import Client
from jobsched.store import BadRowError

TERMINAL = {"completed", "failed", "timed_out", "cancelled"}


class BadArgument(Exception):
    """An argument the soak cannot run with (exit status 2)."""


def with_query(url: str, **params: str) -> str:
    """`url` with these query parameters set (its path kept as written:
    ``sqlite:////abs`` must keep its four slashes)."""
    base, _, query = url.partition("?")
    merged = dict(parse_qsl(query))
    merged.update(params)
    return f"{base}?{urlencode(merged)}"


def query_of(url: str) -> dict[str, str]:
    return dict(parse_qsl(url.partition("?")[2]))


def libpq_dsn(url: str) -> str:
    """`url` without jobsched's own query parameters (for a plain psycopg connection)."""
    parts = urlsplit(url)
    query = {
        k: v for k, v in parse_qsl(parts.query) if k not in ("schema", "lease", "application_name")
    }
    return urlunsplit(parts._replace(query=urlencode(query)))


class Store:
    """The store under test: URLs for workers and clients, setup and cleanup."""

    def __init__(self, url: str, folder: Path, lease: float) -> None:
        self.kind = "postgresql" if url.startswith(("postgresql://", "postgres://")) else "sqlite"
        self.made_schema = False
        if self.kind == "postgresql":
            query = query_of(url)
            self.schema = query.get("schema") or f"chaos_{uuid.uuid4().hex[:10]}"
            self.made_schema = "schema" not in query
            url = with_query(url, schema=self.schema)
        elif url == "sqlite":
            url = f"sqlite:///{folder / 'jobs.db'}"
        elif url.startswith("sqlite:////"):
            path = Path(url.partition("?")[0].removeprefix("sqlite:///"))
            if path.exists():
                raise BadArgument(f"--store {url}: {path} exists; the soak needs a new file")
        else:
            raise BadArgument(
                f"--store {url!r}: give postgresql://..., sqlite:////abs/path.db or sqlite "
                "(a new file in the soak's folder)"
            )
        if "lease" not in query_of(url):
            url = with_query(url, lease=f"{lease:g}")
        self.url = url
        self.lease = float(query_of(url)["lease"])
        if self.kind == "postgresql":
            # Their own application names, so a fault can cut the workers' connections only.
            self.worker_url = with_query(url, application_name=f"chaos-w-{self.schema}")
            self.client_url = with_query(url, application_name=f"chaos-c-{self.schema}")
        else:
            self.worker_url = self.client_url = url

    def terminate_workers(self) -> int:
        import psycopg

        with psycopg.connect(libpq_dsn(self.url), autocommit=True) as conn:
            rows = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s AND pid <> pg_backend_pid()",
                [f"chaos-w-{self.schema}"],
            ).fetchall()
        return len(rows)

    def tamper(self, job_id: str, args_text: str) -> bool:
        """Overwrite a pending job's stored ``args`` with `args_text`, behind
        jobsched's back; False if the job was not pending any more."""
        if self.kind == "postgresql":
            import psycopg

            with psycopg.connect(libpq_dsn(self.url), autocommit=True) as conn:
                cur = conn.execute(
                    f'UPDATE "{self.schema}".jobs SET args = %s::jsonb '
                    "WHERE job_id = %s AND status = 'pending'",
                    [args_text, job_id],
                )
                return cur.rowcount == 1
        path = self.url.partition("?")[0].removeprefix("sqlite:///")
        with contextlib.closing(sqlite3.connect(path, timeout=30, isolation_level=None)) as db:
            changed = db.execute(
                "UPDATE jobsched_shared_jobs SET args = ? WHERE job_id = ? AND status = 'pending'",
                (args_text, job_id),
            )
            return changed.rowcount == 1

    def rows(self) -> list[dict[str, Any]]:
        """Every stored job as `check` reads it, straight from the
        tables: a row jobsched cannot read (a tampered one) is read here too."""
        columns = "job_id, status, last_error, attempts, key, unique_key, schedule_id"
        if self.kind == "postgresql":
            import psycopg

            with psycopg.connect(libpq_dsn(self.url), autocommit=True) as conn:
                found = conn.execute(
                    f"SELECT {columns}, (options->>'scheduled_for')::float8 "
                    f'FROM "{self.schema}".jobs ORDER BY seq'
                ).fetchall()
        else:
            path = self.url.partition("?")[0].removeprefix("sqlite:///")
            with contextlib.closing(sqlite3.connect(path, timeout=30)) as db:
                found = db.execute(
                    f"SELECT {columns}, json_extract(options, '$.scheduled_for') "
                    "FROM jobsched_shared_jobs ORDER BY seq"
                ).fetchall()
        names = [*columns.split(", "), "scheduled_for"]
        return [dict(zip(names, values, strict=True)) for values in found]

    def drop(self) -> None:
        if self.kind == "postgresql" and self.made_schema:
            import psycopg

            with psycopg.connect(libpq_dsn(self.url), autocommit=True) as conn:
                conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE application_name LIKE %s AND pid <> pg_backend_pid()",
                    [f"chaos-%-{self.schema}"],
                )
                conn.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')


async def drain(store: Store, timeout: float) -> None:
    """Wait until every stored job is terminal (or `timeout` seconds passed)."""
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        rows = await asyncio.to_thread(store.rows)
        if all(r["status"] in TERMINAL for r in rows):
            return
        await asyncio.sleep(0.5)


async def unreadable(client: Client, tampered: set[str]) -> str | None:
    """Why jobsched cannot list the store's jobs, or None if it can, or if it
    names a row the soak tampered with (`BadRowError`: a row changed by hand
    is named to its operator, docs/durability.md); any other error is one."""
    try:
        await client.jobs()
    except BadRowError as exc:
        if str(exc.row_id) in tampered:
            return None
        return f"{type(exc).__name__}: {exc}"
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def leases_lost(logs: Path) -> list[Fault]:
    """The ``lease lost`` lines of the workers' JSON logs, as faults naming their job."""
    found = []
    for path in sorted(logs.glob("worker-*.log")):
        for line in path.read_text(errors="replace").splitlines():
            if '"lease lost"' not in line:
                continue
            try:
                entry = json.loads(line)
                pid = int(entry["process"].rsplit(":", 1)[1].split("/")[0])
                when = dt.datetime.fromisoformat(entry["timestamp"].replace("Z", "+00:00"))
            except (ValueError, KeyError, IndexError):
                continue
            if entry.get("event") == "lease lost":
                found.append(Fault(LEASE_LOST, pid, 0.0, when.timestamp(), entry["job_id"]))
    return found


async def soak(args: argparse.Namespace, folder: Path) -> tuple[Report, Store, float]:
    started = time.monotonic()
    (folder / "ledger").mkdir()
    store = Store(args.store, folder, args.lease)
    procs = Processes(args, store, folder)
    client = Client(store.client_url, plugins=plugins())
    await client.open()  # creates the schema or the file before the workers start
    faults = Faults(args, store, procs, client, args.faults)
    watcher = None
    try:
        until = time.time() + args.duration
        faults.until = until
        for _ in range(args.workers):
            procs.start_worker()
        watcher = asyncio.create_task(faults.watch_workers())
        procs.start_producer(until)
        procs.start_canceller()
        schedule = await client.add_schedule(tick(procs.ledger), every=TICK_EVERY)
        await faults.run(until)
        await faults.finish()
        await client.cancel_schedule(schedule)
        if procs.producer is not None:
            procs.producer.send_signal(signal.SIGTERM)
        if procs.canceller is not None:
            procs.canceller.send_signal(signal.SIGTERM)
        # Forking producers end by themselves (their last batch comes after
        # their child's), then whatever they submitted drains too.
        await asyncio.to_thread(procs.wait_forkers, FORK_WAIT + 30)
        await drain(store, args.drain)
        watcher.cancel()
        procs.stop_all()
        rows = await asyncio.to_thread(store.rows)
        tampered = {f.job for f in faults.job_faults if f.kind == "tampered" and f.job}
        reader_error = await unreadable(client, tampered)
    finally:
        if watcher is not None:
            watcher.cancel()
        procs.stop_all()
        await client.close()
    # The ledger keeps the faults beside what ran: those injected, and each
    # "lease lost" a worker logged (a stall longer than the lease; the machine's doing);
    # the job and deployment faults; and every worker's life.
    for fault in [*faults.done, *leases_lost(procs.logs)]:
        ledger.append(
            procs.ledger,
            "soak",
            {
                "e": "fault",
                "kind": fault.kind,
                "victim": fault.pid,
                "t0": fault.t0,
                "t1": fault.t1,
                "job": fault.job,
            },
        )
    for job_fault in faults.job_faults:
        record = {"e": "jobfault", "kind": job_fault.kind, "job": job_fault.job}
        ledger.append(
            procs.ledger,
            "soak",
            {**record, "victim": job_fault.pid, "t0": job_fault.t0, "t1": job_fault.t1},
        )
    for life in procs.records():
        ledger.append(procs.ledger, "soak", life)
    records, torn = ledger.read(folder / "ledger")
    report = check(
        records,
        rows,
        faults_in(records),
        interval=TICK_EVERY,
        torn=torn,
        watchdog=args.watchdog,
        lease_expiry_bound=args.lease_expiry_bound,
        grace=GRACE,
    )
    if reader_error is not None:
        report.violations.append(("unreadable", f"Client.jobs() fails: {reader_error}"))
    return report, store, time.monotonic() - started


def print_report(report: Report, args: argparse.Namespace, store: Store, wall: float) -> None:
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(report.statuses.items()))
    faults = ", ".join(f"{k} {v}" for k, v in sorted(report.faults.items())) or "none"
    kinds = Counter(k for k, _ in report.violations)
    print(f"chaos soak: {store.kind} ({store.url}), seed {args.seed}")
    print(f"  workers {args.workers} x {args.slots} slots, lease {store.lease:g} s")
    print(f"  duration {args.duration:g} s, wall time {wall:.1f} s")
    print(f"  jobs stored {report.jobs} ({statuses}); submitted by producers {report.submitted}")
    print(f"  batches {report.batches}, schedule periods fired {report.schedule_periods}")
    print(
        f"  body runs {report.runs}: retries {report.retries}, re-runs after faults "
        f"{report.reruns_after_faults}, completed twice after faults {report.doubled_after_faults}"
    )
    enabled = applicable(args.faults, store.kind)
    print(f"  faults enabled: {', '.join(enabled) or 'none'}")
    print(f"  faults injected: {faults}")
    job_faults = ", ".join(f"{k} {v}" for k, v in sorted(report.job_faults.items())) or "none"
    print(f"  job and deployment faults injected: {job_faults}")
    print(
        f"  leases lost, as the workers logged them: {report.leases_lost}; re-runs explained "
        f"only by such a loss (a worker stalled past its lease, not injected): "
        f"{report.after_stalls}"
    )
    print(f"  not terminal: {kinds['not terminal']}")
    print(f"  lost: {kinds['lost']}")
    print(f"  partial batches: {kinds['partial batch']}")
    print(f"  completed twice without a fault: {kinds['doubled']}")
    print(f"  re-runs without a fault: {kinds['rerun']}")
    print(f"  dependency order violated: {kinds['order']}")
    print(f"  schedule periods fired twice or off grid: {kinds['schedule']}")
    print(f"  unique keys doubled: {kinds['unique']}")
    print(f"  failed or timed out without running: {kinds['unrun']}")
    print(f"  poison jobs not failed within the lease-expiry bound: {kinds['poison']}")
    print(f"  tampered rows not failed: {kinds['tampered']}")
    print(
        f"  workers blocked past the watchdog bound ({args.watchdog:g} s): {kinds['blocked']} "
        f"(longest block {report.longest_block:.1f} s)"
    )
    print(f"  workers not stopped within their grace: {kinds['shutdown']}")
    print(f"  forked producers' children that could not submit: {kinds['fork']}")
    print(f"  store unreadable by jobsched: {kinds['unreadable']}")
    if report.torn_lines:
        print(f"  ledger lines cut short by kills (skipped): {report.torn_lines}")
    shown: Counter[str] = Counter()
    for kind, detail in report.violations:
        shown[kind] += 1
        if shown[kind] <= 10:  # a few of each kind
            print(f"  VIOLATION {kind}: {detail}")
    if report.ok:
        print("OK")
    else:
        print(f"FAILED: {len(report.violations)} violations; reproduce with --seed {args.seed}")


def build_parser() -> argparse.ArgumentParser:
    """The soak's command line."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.chaos",
        description="Run jobs on a shared store while injecting faults; check the ledger.",
    )
    parser.add_argument(
        "--store", required=True, help="postgresql://..., sqlite:////path.db, sqlite"
    )
    parser.add_argument("--workers", type=int, default=3, help="worker processes (default 3)")
    parser.add_argument("--slots", type=int, default=4, help="jobs each worker runs at once")
    parser.add_argument("--jobs", type=int, default=1000, help="jobs to submit, about")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of faults")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: random)")
    parser.add_argument("--lease", type=float, default=2.0, help="lease seconds (default 2)")
    parser.add_argument(
        "--fault-every", type=float, default=4.0, help="mean seconds between faults"
    )
    parser.add_argument("--drain", type=float, default=180.0, help="seconds to wait for the end")
    parser.add_argument(
        "--faults",
        default="all",
        help="the faults to inject, comma-separated: their names, 'infra' (the "
        "infrastructure faults) or 'all' (default); those that do not apply to the "
        f"store are left out. Faults: {', '.join(FAULTS)}",
    )
    parser.add_argument(
        "--watchdog",
        type=float,
        default=10.0,
        help="seconds a worker's event loop may be blocked (its watchdog bound; default 10)",
    )
    parser.add_argument(
        "--lease-expiry-bound",
        type=int,
        default=3,
        help="most runs of a job whose attempts end by lease expiry before it must "
        "end failed (the workers' bound; default 3)",
    )
    parser.add_argument(
        "--dir", default=None, help="folder for the ledger and logs (default: temp)"
    )
    return parser


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    for name in ("workers", "slots", "jobs"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    for name in ("duration", "lease", "fault_every", "drain", "watchdog"):
        if not getattr(args, name) > 0:
            parser.error(f"--{name.replace('_', '-')} must be > 0, got {getattr(args, name)}")
    if args.lease_expiry_bound < 1:
        parser.error(f"--lease-expiry-bound must be at least 1, got {args.lease_expiry_bound}")
    try:
        args.faults = parse_faults(args.faults)
    except BadFaults as exc:
        parser.error(str(exc))
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1_000_000)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    folder = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="jobsched-chaos-"))
    folder.mkdir(parents=True, exist_ok=True)
    if any(folder.iterdir()):
        print(f"chaos: --dir {folder} is not empty", file=sys.stderr)
        return 2
    try:
        report, store, wall = asyncio.run(soak(args, folder))
    except BadArgument as exc:
        print(f"chaos: {exc}", file=sys.stderr)
        return 2
    print_report(report, args, store, wall)
    if not report.ok or args.dir:
        print(f"  ledger and logs: {folder}")
    if report.ok:
        with contextlib.suppress(Exception):
            store.drop()
        if args.dir is None:
            shutil.rmtree(folder, ignore_errors=True)
        return 0
    return 1
