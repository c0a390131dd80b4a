"""Durable throughput: the SQLite store against the memory store, in the same run.

    python benchmarks/durable.py [--jobs 10000] [--rounds 3] [--workers 8]
                                 [--enqueue-jobs 20000] [--batch 1000] [--json] [--check]
                                 [--baseline DIR]

Every figure is the median of ``--rounds`` rounds, the stores interleaved
within each round so that the rest of a shared machine disturbs them alike.
Each store gets a fresh database file per round. What is measured (issue 13,
target 3: SQLite keeps at least 40% of the memory store's throughput in both
modes, and a `Client` enqueues at least 50,000 jobs/s):

* **single-owner** (``JobScheduler(store="sqlite:///x.db")``, the journal):
  ``--jobs`` no-op async jobs submitted to a started scheduler, timed until
  every job is finished *and* every state change is committed
  (``await scheduler.flush()``); rows ``memory``, ``sqlite``
  (``synchronous=full``, the default) and ``sqlite-normal``;
* **shared** (``jobsched worker --store sqlite:////abs.db``): ``--jobs`` jobs
  are stored first through a `Client`, due in 300 days; one worker process
  (``--workers`` workers, the `run_worker` of ``jobsched worker``) is started
  and connected (not timed); then one UPDATE makes every job due, and the
  clock runs until the file says all of them are completed (a count polled
  every 5 ms); row ``sqlite-shared``, against the ``memory`` row;
* **enqueue** through the public `Client` into a fresh shared file, no worker
  running: ``Client.submit_many`` in batches of ``--batch``, and
  ``Client.submit`` called concurrently (``asyncio.gather`` of ``--batch``
  submits at a time, which the client stores together); ``--enqueue-jobs``
  jobs each, job construction not timed.

* **before/after** (``--baseline DIR``, DIR a checkout of another jobsched,
  say ``git archive main | tar -x -C /tmp/main``): the single-owner rows
  ``sqlite`` and ``sqlite-normal`` run once with this checkout's code and
  once with DIR's in each round, each in a child process of its own that
  imports that code first (the same measuring code for both, this file's),
  the two interleaved and their order swapped every round; rows
  ``sqlite (this)`` and ``sqlite (baseline)``, side by side.

Beside each figure: the CPU time its jobs cost (median, microseconds per job:
this process for the in-process rows, the worker process's own for the
shared row, read from ``/proc``), which a busy machine changes far less than
the wall clock.

Standalone on purpose: it needs only jobsched installed (``pip install -e .``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import attrs

from jobsched import AsyncJob, Client, JobScheduler, PluginManager, Submission, hookimpl

TARGET = 0.40  # of the memory store's throughput, each mode
ENQUEUE_TARGET = 50_000.0  # jobs/s through Client
FAR = 300 * 86400.0  # due in 300 days: held back until the clock starts
STORES = ("memory", "sqlite", "sqlite-normal", "sqlite-shared")
ENQUEUES = ("submit_many", "submit concurrent")
SINGLE_OWNER_URLS = {
    "sqlite": "sqlite:///{path}",
    "sqlite-normal": "sqlite:///{path}?synchronous=normal",
}
#: The source roots of a checkout (pyproject.toml's packages).
ROOTS = ("core", "plugins", "contrib_jobs")
HERE = Path(__file__).resolve().parent.parent


@attrs.define
class Noop(AsyncJob):
    """Does nothing: what is measured is the scheduler and the store."""

    async def run(self) -> None:
        return None


class benchmark_jobs:
    @staticmethod
    @hookimpl
    def jobsched_register_job_types(register: Any) -> None:
        register("bench-noop", Noop)


def bench_plugins() -> PluginManager:
    # The benchmark's job type and the built-ins, nothing else installed.
    return PluginManager([benchmark_jobs], autoload=False)


# ── single-owner: in this process ──────────────────────────────────────
async def one_round(store: str | None, jobs: int, workers: int) -> tuple[float, float]:
    """Jobs per second for one round on `store` (None: the memory store), and
    CPU microseconds per job (this process, the store's thread included)."""
    scheduler = JobScheduler("fifo", num_workers=workers, plugins=bench_plugins(), store=store)
    await scheduler.start()
    batch = [Noop() for _ in range(jobs)]
    start, cpu = time.perf_counter(), time.process_time()
    for job in batch:
        scheduler.submit(job)
    await scheduler.join()
    await scheduler.flush()  # durable: every state change committed
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    await scheduler.stop()
    return jobs / elapsed, cpu / jobs * 1e6


def code_env(code: Path) -> dict[str, str]:
    """The environment of a child process that imports the jobsched of
    checkout `code` (its source roots first on the path)."""
    path = [str(code / root) for root in ROOTS]
    return {**os.environ, "PYTHONPATH": os.pathsep.join([*path, os.environ.get("PYTHONPATH", "")])}


def code_round(code: Path, url: str, jobs: int, workers: int) -> tuple[float, float]:
    """`one_round` on `url` in a child process that imports the jobsched of
    checkout `code`."""
    args = [sys.executable, __file__, "--one-round", url, str(jobs), str(workers)]
    done = subprocess.run(args, env=code_env(code), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the round with the code of {code} failed:\n{done.stderr}")
    rate, cpu = json.loads(done.stdout)
    return float(rate), float(cpu)


def child_round(url: str, jobs: int, workers: int) -> None:
    """`code_round`'s child: one round, its figures as JSON, and which code ran."""
    import jobsched

    figures = asyncio.run(one_round(url, jobs, workers))
    print(json.dumps(figures))
    print(f"jobsched from {Path(jobsched.__file__).parent}", file=sys.stderr)


# ── shared: one worker process ─────────────────────────────────────────
def worker_main(url: str, workers: int) -> None:
    """The worker process: `jobsched worker --store URL --workers N`, with the benchmark's job."""
    import logging

    import structlog

    from jobsched.worker import run_worker

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    asyncio.run(
        run_worker(
            url,
            workers=workers,
            strategy="fifo",
            plugins=bench_plugins(),
            on_started=lambda s: print("ready", flush=True),
        )
    )


async def load_shared(url: str, jobs: int, batch: int) -> None:
    async with Client(url, plugins=bench_plugins(), strategy="fifo") as client:
        held = [Submission(Noop(), delay=FAR) for _ in range(jobs)]
        for i in range(0, jobs, batch):
            await client.submit_many(held[i : i + batch])


def all_completed(conn: sqlite3.Connection, jobs: int) -> bool:
    """Whether the file says all `jobs` are completed.

    Polled every 5 ms, so cheap first: the jobs still queued or running are
    counted through the store's two partial indexes (which shrink as the
    jobs finish), not by scanning every row of a 2-core machine's file.
    """
    left = conn.execute(
        "SELECT (SELECT count(*) FROM jobsched_shared_jobs WHERE status IN "
        "('pending', 'retry_wait') AND unmet = 0) + (SELECT count(*) FROM "
        "jobsched_shared_jobs WHERE status = 'running')"
    ).fetchone()[0]
    if left:
        return False
    done = "SELECT count(*) FROM jobsched_shared_jobs WHERE status = 'completed'"
    return bool(conn.execute(done).fetchone()[0] >= jobs)


def process_cpu(pid: int) -> float | None:
    """CPU seconds process `pid` has used (Linux ``/proc``; None elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def shared_round(
    path: Path, jobs: int, workers: int, batch: int, options: str = "", code: Path | None = None
) -> tuple[float, float | None]:
    """Jobs per second one worker process runs from a shared file (its URL's
    query string `options`, say ``?synchronous=normal``), and the worker's CPU
    microseconds per job (None where it cannot be read). With `code` (a
    checkout of another jobsched) the worker process imports that code, and
    the jobs are stored by it."""
    url = f"sqlite:///{path}{options}"
    if code is None:
        asyncio.run(load_shared(url, jobs, batch))
    else:  # the file as that code writes it (its schema version may be older)
        load = [sys.executable, __file__, "--load", url, str(jobs), str(batch)]
        subprocess.run(load, env=code_env(code), check=True)
    proc = subprocess.Popen(
        [sys.executable, __file__, "--worker", url, str(workers)],
        stdout=subprocess.PIPE,
        text=True,
        env=None if code is None else code_env(code),
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if line.strip() != "ready":
            raise SystemExit(f"the worker process failed to start: {line!r}")
        conn = sqlite3.connect(path, isolation_level=None, timeout=30)
        try:
            cpu_before = process_cpu(proc.pid)
            start = time.perf_counter()
            conn.execute("UPDATE jobsched_shared_jobs SET run_at = 0")
            while not all_completed(conn, jobs):
                time.sleep(0.005)
            end = time.perf_counter()
            cpu_after = process_cpu(proc.pid)
        finally:
            conn.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    cpu = None
    if cpu_before is not None and cpu_after is not None:
        cpu = (cpu_after - cpu_before) / jobs * 1e6
    return jobs / (end - start), cpu


# ── enqueue through Client ─────────────────────────────────────────────
async def enqueue_round(path: Path, jobs: int, batch: int, how: str) -> tuple[float, float]:
    """Jobs per second enqueued, and CPU microseconds per job (this process)."""
    async with Client(f"sqlite:///{path}", plugins=bench_plugins(), strategy="fifo") as client:
        held = [Noop() for _ in range(jobs)]
        start, cpu = time.perf_counter(), time.process_time()
        if how == "submit_many":
            for i in range(0, jobs, batch):
                await client.submit_many(held[i : i + batch])
        else:
            for i in range(0, jobs, batch):
                await asyncio.gather(*(client.submit(job) for job in held[i : i + batch]))
        end, cpu = time.perf_counter(), time.process_time() - cpu
    return jobs / (end - start), cpu / jobs * 1e6


def measure(args: argparse.Namespace) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Every round's jobs/s and CPU µs per job of every row, rounds interleaved
    so that drift hits all alike."""
    names = (*STORES, *ENQUEUES, *compared_rows(args))
    runs: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}

    def record(name: str, figures: tuple[float, float | None]) -> None:
        runs[name].append(figures[0])
        if figures[1] is not None:
            cpu[name].append(figures[1])

    with tempfile.TemporaryDirectory(prefix="jobsched-bench-") as folder:
        for r in range(args.rounds):
            record("memory", asyncio.run(one_round(None, args.jobs, args.workers)))
            for name, url in SINGLE_OWNER_URLS.items():
                url = url.format(path=Path(folder) / f"{name}-{r}.db")
                record(name, asyncio.run(one_round(url, args.jobs, args.workers)))
            if args.baseline is not None:
                codes = [("this", HERE), ("baseline", args.baseline)]
                for name, url in SINGLE_OWNER_URLS.items():
                    for label, code in codes if r % 2 == 0 else codes[::-1]:
                        url = url.format(path=Path(folder) / f"{name}-{label}-{r}.db")
                        record(f"{name} ({label})", code_round(code, url, args.jobs, args.workers))
            path = Path(folder) / f"shared-{r}.db"
            record("sqlite-shared", shared_round(path, args.jobs, args.workers, args.batch))
            for how in ENQUEUES:
                path = Path(folder) / f"enqueue-{how.replace(' ', '-')}-{r}.db"
                record(how, asyncio.run(enqueue_round(path, args.enqueue_jobs, args.batch, how)))
    return runs, cpu


def compared_rows(args: argparse.Namespace) -> list[str]:
    """The before/after rows `--baseline` adds."""
    if args.baseline is None:
        return []
    return [f"{name} ({label})" for name in SINGLE_OWNER_URLS for label in ("this", "baseline")]


def cpu_note(cpu: dict[str, float], name: str) -> str:
    """The CPU a row's jobs cost, which other work on the machine changes less
    than the wall clock."""
    return f"  ({cpu[name]:.1f} µs CPU/job)" if name in cpu else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs run per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; the median counts")
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--enqueue-jobs", type=int, default=20_000, help="jobs enqueued per round")
    parser.add_argument("--batch", type=int, default=1000, help="jobs per Client call or gather")
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="DIR",
        help="a checkout of another jobsched: its single-owner rows run beside this one's",
    )
    parser.add_argument("--worker", nargs=2, metavar=("URL", "WORKERS"), help=argparse.SUPPRESS)
    parser.add_argument("--load", nargs=3, metavar=("URL", "JOBS", "BATCH"), help=argparse.SUPPRESS)
    parser.add_argument(
        "--one-round", nargs=3, metavar=("URL", "JOBS", "WORKERS"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.worker:
        worker_main(args.worker[0], int(args.worker[1]))
        return 0
    if args.load:
        asyncio.run(load_shared(args.load[0], int(args.load[1]), int(args.load[2])))
        return 0
    if args.one_round:
        child_round(args.one_round[0], int(args.one_round[1]), int(args.one_round[2]))
        return 0
    if args.baseline is not None:
        args.baseline = args.baseline.resolve()
        if not (args.baseline / "core" / "jobsched" / "__init__.py").is_file():
            parser.error(f"--baseline {args.baseline}: not a jobsched checkout (no core/jobsched)")
    load = os.getloadavg()
    runs, cpu_runs = measure(args)
    median = {name: statistics.median(values) for name, values in runs.items()}
    cpu = {name: statistics.median(values) for name, values in cpu_runs.items() if values}
    rates = {name: median[name] for name in STORES}
    enqueue = {name: median[name] for name in ENQUEUES}
    compared = {name: median[name] for name in compared_rows(args)}
    ratio = rates["sqlite"] / rates["memory"]
    shared_ratio = rates["sqlite-shared"] / rates["memory"]
    met = (
        ratio >= TARGET
        and shared_ratio >= TARGET
        and all(rate >= ENQUEUE_TARGET for rate in enqueue.values())
    )
    if args.json:
        print(
            json.dumps(
                {
                    "jobs": args.jobs,
                    "enqueue_jobs": args.enqueue_jobs,
                    "rounds": args.rounds,
                    "load_average": load,
                    "jobs_per_second": rates,
                    "enqueue_per_second": enqueue,
                    "sqlite_ratio": ratio,
                    "shared_ratio": shared_ratio,
                    "runs": runs,
                    "cpu_us_per_job": cpu,
                    "baseline": None if args.baseline is None else str(args.baseline),
                    "compared_jobs_per_second": compared,
                    "met": met,
                }
            )
        )
    else:
        print(
            f"{args.jobs:,} no-op async jobs, {args.workers} workers, median of {args.rounds} "
            f"(load average {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}):"
        )
        for name, rate in rates.items():
            share = f"{rate / rates['memory']:6.1%} of memory"
            print(f"  {name:<17} {rate:>10,.0f} jobs/s  {share}{cpu_note(cpu, name)}")
        print(f"enqueue {args.enqueue_jobs:,} jobs through Client, batches of {args.batch:,}:")
        for name, rate in enqueue.items():
            print(f"  {name:<17} {rate:>10,.0f} jobs/s{cpu_note(cpu, name)}")
        if compared:
            print(f"single-owner, this code and the baseline {args.baseline} (child processes):")
            for name in SINGLE_OWNER_URLS:
                this, base = compared[f"{name} (this)"], compared[f"{name} (baseline)"]
                print(
                    f"  {name:<17} this {this:>10,.0f} jobs/s{cpu_note(cpu, f'{name} (this)')}"
                    f"   baseline {base:>10,.0f} jobs/s{cpu_note(cpu, f'{name} (baseline)')}"
                    f"   {this / base - 1:+.1%}"
                )
        verdict = "meets" if met else "MISSES"
        print(
            f"sqlite {verdict} the targets: {TARGET:.0%} of memory in each mode, "
            f"{ENQUEUE_TARGET:,.0f} jobs/s enqueued"
        )
    return 1 if args.check and not met else 0


if __name__ == "__main__":
    sys.exit(main())
