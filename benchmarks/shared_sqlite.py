"""Shared SQLite against its peers: one worker process, no-op jobs, the same method for each.

    pip install huey            # Huey's SqliteStorage, for this comparison only
    python benchmarks/shared_sqlite.py [--jobs 20000] [--rounds 5] [--workers 8]
                                       [--dsn postgresql://postgres@127.0.0.1:5432/test]
                                       [--baseline DIR] [--json] [--no-docs] [--check]

Issue 25's target: shared SQLite (``jobsched worker --store sqlite:////abs.db``,
one worker process, its defaults) runs at least 40,000 no-op jobs a second,
and more than jobsched's PostgreSQL store on the same machine (``--check``
exits 1 when it does not). The systems, each in a fresh database per round:

* **jobsched, shared SQLite**: `benchmarks.durable.shared_round` (the row
  ``sqlite-shared`` of ``benchmarks/durable.py``): the jobs are stored first
  through a `Client`, due in 300 days; one worker process (``--workers``
  workers) is started and connected, not timed; one UPDATE makes every job
  due, and the clock runs until the file says all are completed; with
  SQLite's ``synchronous=full`` (the default: a commit survives a power cut),
  and again with ``?synchronous=normal`` (a commit survives a crash of the
  process, not of the machine: docs/durability.md), which shows what the
  fsync of each commit costs;
* **jobsched, PostgreSQL** (with ``--dsn``, or ``JOBSCHED_TEST_POSTGRES_DSN``):
  the same in a schema of its own (dropped afterwards): the jobs stored through
  a `Client`, one worker process, one UPDATE and a NOTIFY release them, the
  clock stops when the table says all are completed;
* **Huey, SqliteStorage** (when ``huey`` is installed): the tasks are enqueued
  first; one consumer process (``--workers`` worker threads, Huey's defaults
  otherwise: WAL, SQLite's ``synchronous=FULL``) is started and waits for a
  line on stdin before it runs; the clock runs from that line until the
  file holds every task's result (the task returns True, so each stores one).

With ``--baseline DIR`` (a checkout of another jobsched) the shared SQLite
row runs a second time in each round, the jobs stored and run by DIR's code
(a file of its own schema version), counted as for the other: before and
after, side by side.

The rounds interleave the systems (their order turned every round) so that
the rest of a shared machine disturbs them alike; each figure is the median
of the rounds, with the worker process's own CPU time per job beside it
(``/proc``: it moves far less with the machine's load than the wall clock;
PostgreSQL's server processes are not counted). The table is written into
docs/durability.md between two marker lines, unless ``--no-docs``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:  # run as a script: `benchmarks` importable
    sys.path.insert(0, str(HERE.parent))

from benchmarks.durable import load_shared, process_cpu, shared_round  # noqa: E402

TARGET = 40_000.0  # jobs/s, shared SQLite, one worker process
DOCS = "docs/durability.md"
START = "<!-- benchmarks/shared_sqlite.py writes the figures below -->"
END = "<!-- end of benchmarks/shared_sqlite.py's figures -->"
HUEY_NAME = "jobsched-bench"


# ── jobsched on PostgreSQL: the same method as shared SQLite ───────────
def postgres_round(dsn: str, jobs: int, workers: int, batch: int) -> tuple[float, float | None]:
    """Jobs per second one worker process runs from PostgreSQL, and its CPU µs per job."""
    import psycopg

    schema = f"bench_shared_{os.getpid()}_{time.monotonic_ns()}"
    url = f"{dsn}{'&' if '?' in dsn else '?'}schema={schema}"
    asyncio.run(load_shared(url, jobs, batch))
    try:
        proc = subprocess.Popen(
            [sys.executable, str(HERE / "durable.py"), "--worker", url, str(workers)],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if line.strip() != "ready":
                raise SystemExit(f"the PostgreSQL worker process failed to start: {line!r}")
            with psycopg.connect(dsn, autocommit=True) as conn:
                done = f"SELECT count(*) FROM {schema}.jobs WHERE status = 'completed'"
                cpu_before = process_cpu(proc.pid)
                start = time.perf_counter()
                conn.execute(f"UPDATE {schema}.jobs SET run_at = 0")
                conn.execute("SELECT pg_notify(%s, 'w')", [f"jobsched_{schema}"])
                while (conn.execute(done).fetchone() or (0,))[0] < jobs:
                    time.sleep(0.005)
                end = time.perf_counter()
                cpu_after = process_cpu(proc.pid)
        finally:
            stop(proc)
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    return jobs / (end - start), cpu_per_job(cpu_before, cpu_after, jobs)


# ── Huey's SqliteStorage ───────────────────────────────────────────────
def huey_app(path: str, *, loading: bool = False) -> tuple[Any, Any]:
    """Huey on the file `path` with its no-op task (named, so that producer and
    consumer agree). Loading (not timed) skips fsync; the consumer keeps
    Huey's defaults."""
    from huey import SqliteHuey

    huey = SqliteHuey(HUEY_NAME, filename=path, **({"fsync": False} if loading else {}))

    @huey.task(name="noop")  # type: ignore[misc]
    def noop() -> bool:
        return True  # a result, so the file says when the task is done

    return huey, noop


def huey_worker(path: str, workers: int) -> None:
    """The consumer process: connected, then run on a line on stdin."""
    import logging

    logging.basicConfig(level=logging.WARNING)
    huey, _ = huey_app(path)
    consumer = huey.create_consumer(
        workers=workers, worker_type="thread", periodic=False, check_worker_health=False
    )
    print("ready", flush=True)
    sys.stdin.readline()
    consumer.run()  # stops on SIGTERM


def huey_round(folder: Path, jobs: int, workers: int, r: int) -> tuple[float, float | None]:
    """Tasks per second one Huey consumer process runs, and its CPU µs per task."""
    path = str(folder / f"huey-{r}.db")
    huey, noop = huey_app(path, loading=True)
    for _ in range(jobs):
        noop()
    huey.storage.close()
    proc = subprocess.Popen(
        [sys.executable, __file__, "--huey-worker", path, str(workers)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdin is not None and proc.stdout is not None
        line = proc.stdout.readline()
        if line.strip() != "ready":
            raise SystemExit(f"the Huey consumer failed to start: {line!r}")
        conn = sqlite3.connect(path, isolation_level=None, timeout=30)
        try:
            done = "SELECT count(*) FROM kv WHERE queue = ?"
            cpu_before = process_cpu(proc.pid)
            start = time.perf_counter()
            proc.stdin.write("go\n")
            proc.stdin.flush()
            while conn.execute(done, (HUEY_NAME,)).fetchone()[0] < jobs:
                time.sleep(0.005)
            end = time.perf_counter()
            cpu_after = process_cpu(proc.pid)
        finally:
            conn.close()
    finally:
        stop(proc)
    return jobs / (end - start), cpu_per_job(cpu_before, cpu_after, jobs)


# ── the run ────────────────────────────────────────────────────────────
def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def cpu_per_job(before: float | None, after: float | None, jobs: int) -> float | None:
    if before is None or after is None:
        return None
    return (after - before) / jobs * 1e6


def quiet_logs() -> None:
    """WARNING and up only (a PostgreSQL store logs its migrations at INFO)."""
    import logging

    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


def huey_installed() -> bool:
    try:
        import huey  # noqa: F401
    except ImportError:
        return False
    return True


def measure(
    args: argparse.Namespace, systems: list[str]
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Every round's jobs/s and worker CPU µs per job, per system, interleaved."""
    runs: dict[str, list[float]] = {name: [] for name in systems}
    cpu: dict[str, list[float]] = {name: [] for name in systems}
    with tempfile.TemporaryDirectory(prefix="jobsched-peers-") as tmp:
        folder = Path(tmp)
        for r in range(args.rounds):
            turn = r % len(systems)
            for name in systems[turn:] + systems[:turn]:
                if name == "jobsched sqlite":
                    path = folder / f"shared-{r}.db"
                    rate, used = shared_round(path, args.jobs, args.workers, args.batch)
                elif name == "jobsched sqlite (baseline)":
                    path = folder / f"shared-baseline-{r}.db"
                    rate, used = shared_round(
                        path, args.jobs, args.workers, args.batch, code=args.baseline
                    )
                elif name == "jobsched sqlite normal":
                    path = folder / f"shared-normal-{r}.db"
                    rate, used = shared_round(
                        path, args.jobs, args.workers, args.batch, "?synchronous=normal"
                    )
                elif name == "jobsched postgresql":
                    rate, used = postgres_round(args.dsn, args.jobs, args.workers, args.batch)
                else:
                    rate, used = huey_round(folder, args.jobs, args.workers, r)
                runs[name].append(rate)
                if used is not None:
                    cpu[name].append(used)
                print(f"  round {r + 1}: {name:<20} {rate:>9,.0f} jobs/s", file=sys.stderr)
    return runs, cpu


def table(
    args: argparse.Namespace,
    runs: dict[str, list[float]],
    cpu: dict[str, list[float]],
    load: tuple[float, float, float],
) -> tuple[str, list[str]]:
    """The Markdown header line and table of the figures."""
    sqlite = statistics.median(runs["jobsched sqlite"])
    header = (
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores "
        f"({platform.processor() or platform.machine()}), load average "
        f"{load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} at the start; {args.jobs:,} no-op "
        f"jobs, one worker process of {args.workers} workers, median of {args.rounds} rounds "
        "(range in brackets)."
    )
    if args.baseline is not None:
        header += f" Baseline: the checkout in {args.baseline}."
    lines = [
        "| system | jobs/s | worker CPU µs/job | shared SQLite / this |",
        "|---|---:|---:|---:|",
    ]
    for name, rates in runs.items():
        rate = statistics.median(rates)
        used = f"{statistics.median(cpu[name]):.1f}" if cpu[name] else "n/a"
        spread = f"({min(rates):,.0f}-{max(rates):,.0f})"
        ratio = "" if name == "jobsched sqlite" else f"{sqlite / rate:.2f}x"
        lines.append(f"| {label(name)} | {rate:,.0f} {spread} | {used} | {ratio} |")
    return header, lines


def label(name: str) -> str:
    if name == "jobsched sqlite":
        return "jobsched, shared SQLite (`synchronous=full`, the default)"
    if name == "jobsched sqlite (baseline)":
        return "the same, the worker running the baseline's code"
    if name == "jobsched sqlite normal":
        return "jobsched, shared SQLite, `?synchronous=normal`"
    if name == "jobsched postgresql":
        return "jobsched, PostgreSQL (same host)"
    import huey

    return f"Huey {huey.__version__}, `SqliteHuey` (thread workers)"


def write_docs(header: str, lines: list[str]) -> None:
    """Put the latest figures in `DOCS`, between `START` and `END`."""
    path = HERE.parent / DOCS
    text = path.read_text(encoding="utf-8")
    if START not in text or END not in text:
        raise SystemExit(f"{DOCS}: the markers {START!r} and {END!r} are missing")
    before, rest = text.split(START, 1)
    after = rest.split(END, 1)[1]
    path.write_text("\n".join([before + START, "", header, "", *lines, "", END]) + after)
    print(f"wrote the figures into {DOCS}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs run per round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds; the median counts")
    parser.add_argument("--workers", type=int, default=8, help="workers of the worker process")
    parser.add_argument("--batch", type=int, default=1000, help="jobs per Client call (loading)")
    parser.add_argument(
        "--dsn",
        default=os.environ.get("JOBSCHED_TEST_POSTGRES_DSN"),
        help="a PostgreSQL server for the jobsched PostgreSQL row (default: "
        "$JOBSCHED_TEST_POSTGRES_DSN; none: the row is left out)",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="DIR",
        help="a checkout of another jobsched (say `git archive main | tar -x -C /tmp/main`): "
        "a shared SQLite row whose worker process runs its code, beside this one's",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--no-docs", action="store_true", help=f"do not write {DOCS}")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument(
        "--huey-worker", nargs=2, metavar=("PATH", "WORKERS"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.huey_worker:
        huey_worker(args.huey_worker[0], int(args.huey_worker[1]))
        return 0
    if args.jobs < 1 or args.rounds < 1 or args.workers < 1:
        parser.error("--jobs, --rounds and --workers must be at least 1")
    systems = ["jobsched sqlite", "jobsched sqlite normal"]
    if args.baseline is not None:
        args.baseline = args.baseline.resolve()
        if not (args.baseline / "core" / "jobsched" / "__init__.py").is_file():
            parser.error(f"--baseline {args.baseline}: not a jobsched checkout (no core/jobsched)")
        systems.insert(1, "jobsched sqlite (baseline)")
    if args.dsn:
        systems.append("jobsched postgresql")
    if huey_installed():
        systems.append("huey sqlite")
    else:
        print("huey is not installed (pip install huey): its row is left out", file=sys.stderr)
    quiet_logs()
    load = os.getloadavg()
    runs, cpu = measure(args, systems)
    medians = {name: statistics.median(rates) for name, rates in runs.items()}
    sqlite = medians["jobsched sqlite"]
    # The default (synchronous=full) against the target and every other system.
    others = [rate for name, rate in medians.items() if not name.startswith("jobsched sqlite")]
    met = sqlite >= TARGET and all(rate < sqlite for rate in others)
    header, lines = table(args, runs, cpu, load)
    if args.json:
        print(
            json.dumps(
                {
                    "jobs": args.jobs,
                    "rounds": args.rounds,
                    "workers": args.workers,
                    "load_average": load,
                    "jobs_per_second": medians,
                    "runs": runs,
                    "cpu_us_per_job": {n: statistics.median(v) for n, v in cpu.items() if v},
                    "target": TARGET,
                    "met": met,
                }
            )
        )
    else:
        print(header)
        print("\n".join(lines))
        verdict = "meets" if met else "MISSES"
        print(f"shared SQLite {verdict} the target: {TARGET:,.0f} jobs/s and ahead of the others")
    if not args.no_docs:
        write_docs(header, lines)
    return 1 if args.check and not met else 0


if __name__ == "__main__":
    sys.exit(main())
