"""Durable throughput: the SQLite store against the memory store, in the same run.

    python benchmarks/durable.py [--jobs 10000] [--rounds 3] [--workers 8]
                                 [--enqueue-jobs 20000] [--batch 1000] [--json] [--check]

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
async def one_round(store: str | None, jobs: int, workers: int) -> float:
    """Jobs per second for one round on `store` (None: the memory store)."""
    scheduler = JobScheduler("fifo", num_workers=workers, plugins=bench_plugins(), store=store)
    await scheduler.start()
    batch = [Noop() for _ in range(jobs)]
    start = time.perf_counter()
    for job in batch:
        scheduler.submit(job)
    await scheduler.join()
    await scheduler.flush()  # durable: every state change committed
    elapsed = time.perf_counter() - start
    await scheduler.stop()
    return jobs / elapsed


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


def shared_round(path: Path, jobs: int, workers: int, batch: int) -> float:
    """Jobs per second one worker process runs from a shared file."""
    url = f"sqlite:///{path}"
    asyncio.run(load_shared(url, jobs, batch))
    proc = subprocess.Popen(
        [sys.executable, __file__, "--worker", url, str(workers)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if line.strip() != "ready":
            raise SystemExit(f"the worker process failed to start: {line!r}")
        conn = sqlite3.connect(path, isolation_level=None, timeout=30)
        try:
            start = time.perf_counter()
            conn.execute("UPDATE jobsched_shared_jobs SET run_at = 0")
            while not all_completed(conn, jobs):
                time.sleep(0.005)
            end = time.perf_counter()
        finally:
            conn.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return jobs / (end - start)


# ── enqueue through Client ─────────────────────────────────────────────
async def enqueue_round(path: Path, jobs: int, batch: int, how: str) -> float:
    async with Client(f"sqlite:///{path}", plugins=bench_plugins(), strategy="fifo") as client:
        held = [Noop() for _ in range(jobs)]
        start = time.perf_counter()
        if how == "submit_many":
            for i in range(0, jobs, batch):
                await client.submit_many(held[i : i + batch])
        else:
            for i in range(0, jobs, batch):
                await asyncio.gather(*(client.submit(job) for job in held[i : i + batch]))
        end = time.perf_counter()
    return jobs / (end - start)


def measure(args: argparse.Namespace) -> dict[str, list[float]]:
    """Every round's figure of every row, rounds interleaved so drift hits all alike."""
    runs: dict[str, list[float]] = {name: [] for name in (*STORES, *ENQUEUES)}
    urls = {"sqlite": "sqlite:///{path}", "sqlite-normal": "sqlite:///{path}?synchronous=normal"}
    with tempfile.TemporaryDirectory(prefix="jobsched-bench-") as folder:
        for r in range(args.rounds):
            runs["memory"].append(asyncio.run(one_round(None, args.jobs, args.workers)))
            for name, url in urls.items():
                url = url.format(path=Path(folder) / f"{name}-{r}.db")
                runs[name].append(asyncio.run(one_round(url, args.jobs, args.workers)))
            path = Path(folder) / f"shared-{r}.db"
            runs["sqlite-shared"].append(shared_round(path, args.jobs, args.workers, args.batch))
            for how in ENQUEUES:
                path = Path(folder) / f"enqueue-{how.replace(' ', '-')}-{r}.db"
                rate = asyncio.run(enqueue_round(path, args.enqueue_jobs, args.batch, how))
                runs[how].append(rate)
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs run per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; the median counts")
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--enqueue-jobs", type=int, default=20_000, help="jobs enqueued per round")
    parser.add_argument("--batch", type=int, default=1000, help="jobs per Client call or gather")
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--worker", nargs=2, metavar=("URL", "WORKERS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker_main(args.worker[0], int(args.worker[1]))
        return 0
    load = os.getloadavg()
    runs = measure(args)
    median = {name: statistics.median(values) for name, values in runs.items()}
    rates = {name: median[name] for name in STORES}
    enqueue = {name: median[name] for name in ENQUEUES}
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
            share = rate / rates["memory"]
            print(f"  {name:<17} {rate:>10,.0f} jobs/s  {share:6.1%} of memory")
        print(f"enqueue {args.enqueue_jobs:,} jobs through Client, batches of {args.batch:,}:")
        for name, rate in enqueue.items():
            print(f"  {name:<17} {rate:>10,.0f} jobs/s")
        verdict = "meets" if met else "MISSES"
        print(
            f"sqlite {verdict} the targets: {TARGET:.0%} of memory in each mode, "
            f"{ENQUEUE_TARGET:,.0f} jobs/s enqueued"
        )
    return 1 if args.check and not met else 0


if __name__ == "__main__":
    sys.exit(main())
