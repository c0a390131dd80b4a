"""The soak's orchestrator: processes, faults, drain, checks, report.

    python -m benchmarks.chaos --store URL --workers N --jobs M --duration S [--seed K]

`URL` is ``postgresql://...`` (a fresh schema is made for the soak unless the
URL names one, and dropped afterwards when the soak passed) or ``sqlite`` (a
new file in the soak's folder) or ``sqlite:////abs/path.db`` (a file that
must not exist yet). ``lease=2`` is added unless the URL sets a lease.

It starts N ``jobsched worker`` processes, one producer (about M jobs over S
seconds) and one canceller; the orchestrator serves the recurring schedule
too. Faults come at random times drawn from the seed, one every
``--fault-every`` seconds on average:

* ``kill9``: SIGKILL a worker, start a replacement;
* ``stop``: SIGSTOP a worker for longer than the lease, then SIGCONT;
* ``pg_terminate`` (PostgreSQL): ``pg_terminate_backend`` every worker connection;
* ``producer_kill`` (SQLite): SIGKILL the producer, which writes batches
  without pause (so most kills land inside a batch's transaction), and
  start a new one;
* ``kill9_writing`` (SQLite): SIGKILL a worker right after the producer
  announced a batch, while writes are at their heaviest; a worker holds the
  file's write lock for each claim, renewal and result, so this kills
  writers with the lock held part of the time (not targeted more exactly:
  nothing outside the process can see who holds the lock).

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
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from benchmarks.chaos import ledger
from benchmarks.chaos.check import ALL_WORKERS, LEASE_LOST, Fault, Report, check, faults_in
from benchmarks.chaos.producer import TICK_EVERY, plugins, tick
from jobsched import Client

ROOT = Path(__file__).resolve().parents[2]
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


class Processes:
    """The worker, producer and canceller subprocesses, and their logs."""

    def __init__(self, args: argparse.Namespace, store: Store, folder: Path) -> None:
        self.args = args
        self.store = store
        self.folder = folder
        self.ledger = str(folder / "ledger")
        self.logs = folder / "logs"
        self.logs.mkdir()
        site = folder / "site"
        info = site / "jobsched_chaos_soak-1.0.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(
            "Metadata-Version: 2.1\nName: jobsched-chaos-soak\nVersion: 1.0\n"
        )
        # The soak's job type, installed for the workers as any plugin is.
        (info / "entry_points.txt").write_text("[jobsched]\nchaos = benchmarks.chaos.jobs\n")
        self.env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(site), str(ROOT), os.environ.get("PYTHONPATH", "")]),
        }
        self.workers: list[subprocess.Popen[bytes]] = []
        self.stopped: set[int] = set()
        self.producer: subprocess.Popen[bytes] | None = None
        self.canceller: subprocess.Popen[bytes] | None = None
        self.generation = 0

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        log = (self.logs / f"{name}.log").open("ab")
        proc = subprocess.Popen(argv, env=self.env, stdout=log, stderr=log, cwd=ROOT)
        log.close()
        return proc

    def start_worker(self) -> subprocess.Popen[bytes]:
        proc = self._spawn(
            f"worker-{len(self.workers)}",
            [
                sys.executable,
                "-m",
                "jobsched",
                "worker",
                "--store",
                self.store.worker_url,
                "--workers",
                str(self.args.slots),
                "--log-format",
                "json",
                "--grace",
                "10",
            ],
        )
        self.workers.append(proc)
        return proc

    def live_workers(self) -> list[subprocess.Popen[bytes]]:
        return [w for w in self.workers if w.poll() is None]

    def start_producer(self, until: float) -> None:
        self.generation += 1
        rate = self.args.jobs / self.args.duration
        self.producer = self._spawn(
            f"producer-{self.generation}",
            [
                sys.executable,
                "-m",
                "benchmarks.chaos.producer",
                "producer",
                "--store",
                self.store.client_url,
                "--ledger",
                self.ledger,
                "--seed",
                str(self.args.seed),
                "--generation",
                str(self.generation),
                "--rate",
                f"{rate:g}",
                "--until",
                f"{until:.3f}",
            ],
        )

    def start_canceller(self) -> None:
        self.canceller = self._spawn(
            "canceller",
            [
                sys.executable,
                "-m",
                "benchmarks.chaos.producer",
                "canceller",
                "--store",
                self.store.client_url,
                "--ledger",
                self.ledger,
                "--seed",
                str(self.args.seed),
            ],
        )

    def resume_all(self) -> None:
        for proc in self.workers:
            if proc.pid in self.stopped and proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
        self.stopped.clear()

    def stop_all(self, timeout: float = 60.0) -> None:
        procs = [p for p in (*self.workers, self.producer, self.canceller) if p is not None]
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


class Faults:
    """Faults at random times drawn from the seed."""

    def __init__(self, args: argparse.Namespace, store: Store, procs: Processes) -> None:
        self.rng = random.Random(args.seed)
        self.every = args.fault_every
        self.store = store
        self.procs = procs
        self.kinds = ["kill9", "stop"]
        self.kinds += ["pg_terminate"] if store.kind == "postgresql" else []
        self.kinds += ["producer_kill", "kill9_writing"] if store.kind == "sqlite" else []
        self.done: list[Fault] = []
        self._resumes: set[asyncio.Task[None]] = set()
        #: When the producer stops producing (wall time): a new producer's too.
        self.until = 0.0

    async def run(self, until: float) -> None:
        while True:
            await asyncio.sleep(self.rng.uniform(0.5 * self.every, 1.5 * self.every))
            if time.time() >= until:
                return
            kind = self.rng.choice(self.kinds)
            await getattr(self, kind)()

    async def finish(self) -> None:
        for task in self._resumes:
            task.cancel()
        await asyncio.gather(*self._resumes, return_exceptions=True)
        now = time.time()
        self.done = [
            Fault(f.kind, f.pid, f.t0, now) if f.kind == "stop" and f.t1 == float("inf") else f
            for f in self.done
        ]
        self.procs.resume_all()

    def _victim(self) -> subprocess.Popen[bytes] | None:
        live = [w for w in self.procs.live_workers() if w.pid not in self.procs.stopped]
        return self.rng.choice(live) if live else None

    async def kill9(self, kind: str = "kill9") -> None:
        victim = self._victim()
        if victim is None:
            return
        victim.kill()
        await asyncio.to_thread(victim.wait)
        now = time.time()
        self.done.append(Fault(kind, victim.pid, now, now))
        self.procs.start_worker()

    async def kill9_writing(self) -> None:
        # Right after the producer announces a batch: its insert, the claims
        # it wakes and their results all want the write lock now.
        path = Path(self.procs.ledger)
        files = sorted(path.glob("producer-*.jsonl"), key=lambda p: p.stat().st_mtime)
        if files:
            start = files[-1].stat().st_size
            give_up = time.monotonic() + 5
            while files[-1].stat().st_size == start and time.monotonic() < give_up:
                await asyncio.sleep(0.005)
        await self.kill9("kill9_writing")

    async def stop(self) -> None:
        victim = self._victim()
        if victim is None:
            return
        pause = self.store.lease + self.rng.uniform(0.5, 2.0)
        victim.send_signal(signal.SIGSTOP)
        self.procs.stopped.add(victim.pid)
        fault = Fault("stop", victim.pid, time.time(), float("inf"))
        self.done.append(fault)

        async def resume() -> None:
            await asyncio.sleep(pause)
            victim.send_signal(signal.SIGCONT)
            self.procs.stopped.discard(victim.pid)
            self.done[self.done.index(fault)] = Fault("stop", victim.pid, fault.t0, time.time())

        task = asyncio.create_task(resume())
        self._resumes.add(task)
        task.add_done_callback(self._resumes.discard)

    async def pg_terminate(self) -> None:
        t0 = time.time()
        await asyncio.to_thread(self.store.terminate_workers)
        self.done.append(Fault("pg_terminate", ALL_WORKERS, t0, time.time()))

    async def producer_kill(self) -> None:
        producer = self.procs.producer
        if producer is None or producer.poll() is not None:
            return
        producer.kill()
        await asyncio.to_thread(producer.wait)
        now = time.time()
        self.done.append(Fault("producer_kill", producer.pid, now, now))
        self.procs.start_producer(self.until)


async def drain(client: Client, timeout: float) -> None:
    """Wait until every stored job is terminal (or `timeout` seconds passed)."""
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        rows = await client.store.jobs()
        if all(r.status in TERMINAL for r in rows):
            return
        await asyncio.sleep(0.5)


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


def row_of(row: Any) -> dict[str, Any]:
    return {
        "job_id": row.job_id,
        "status": row.status,
        "key": row.key,
        "unique_key": row.unique_key,
        "schedule_id": row.schedule_id,
        "scheduled_for": (row.options or {}).get("scheduled_for"),
    }


async def soak(args: argparse.Namespace, folder: Path) -> tuple[Report, Store, float]:
    started = time.monotonic()
    (folder / "ledger").mkdir()
    store = Store(args.store, folder, args.lease)
    procs = Processes(args, store, folder)
    faults = Faults(args, store, procs)
    client = Client(store.client_url, plugins=plugins())
    await client.open()  # creates the schema or the file before the workers start
    try:
        until = time.time() + args.duration
        faults.until = until
        for _ in range(args.workers):
            procs.start_worker()
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
        await drain(client, args.drain)
        procs.stop_all()
        rows = [row_of(r) for r in await client.store.jobs()]
    finally:
        procs.stop_all()
        await client.close()
    # The ledger keeps the faults beside what ran: those injected, and each
    # "lease lost" a worker logged (a stall longer than the lease; the machine's doing).
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
    records, torn = ledger.read(folder / "ledger")
    report = check(records, rows, faults_in(records), interval=TICK_EVERY, torn=torn)
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
    print(f"  faults injected: {faults}")
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
    if report.torn_lines:
        print(f"  ledger lines cut short by kills (skipped): {report.torn_lines}")
    for kind, detail in report.violations[:50]:
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
        "--dir", default=None, help="folder for the ledger and logs (default: temp)"
    )
    return parser


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    for name in ("workers", "slots", "jobs"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    for name in ("duration", "lease", "fault_every", "drain"):
        if not getattr(args, name) > 0:
            parser.error(f"--{name.replace('_', '-')} must be > 0, got {getattr(args, name)}")
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
