"""Dispatch throughput with concurrency and rate limits on, against the plain kernel.

Run it standalone: ``python benchmarks/limits.py [--jobs N] [--rounds R]``.

Every round runs the same workload three ways, interleaved so machine noise
hits them alike: no limits (the plain dispatch path); limits on every path a
job takes (an executor limit, a job-type limit and a job-type rate limit) set
so high that no job is ever held back; and, for scale, raw asyncio awaiting
the same coroutines. The workload is N no-op async jobs, submitted before the
scheduler starts, run by 8 workers. It prints jobs/s (best round) and the
cost of limits; the issue's target is at most 25%.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from jobsched import FunctionJob, JobScheduler, Limits, Rate

WORKERS = 8


async def noop() -> None:
    return None


def limits_that_never_hold_back() -> Limits:
    job_type = "noop"  # a function job's type is the function's qualified name
    return Limits(
        executors={"async": 1_000_000},
        job_types={job_type: 1_000_000},
        rates={job_type: Rate(1e12, burst=1_000_000_000)},
    )


async def run_scheduler(n: int, limits: Limits | None) -> float:
    scheduler = JobScheduler("fifo", num_workers=WORKERS, limits=limits)
    jobs = [FunctionJob(noop, timeout=None) for _ in range(n)]
    gc.collect()
    start = time.perf_counter()
    for job in jobs:
        scheduler.submit(job)
    await scheduler.start()
    await scheduler.join()
    elapsed = time.perf_counter() - start
    await scheduler.stop()
    if limits is not None:
        assert scheduler.limiter is not None and scheduler.limiter.parked == 0
    assert scheduler.peak_running <= WORKERS
    return elapsed


async def run_raw(n: int) -> float:
    queue: asyncio.Queue[Callable[[], Any]] = asyncio.Queue()
    for _ in range(n):
        queue.put_nowait(noop)
    gc.collect()
    start = time.perf_counter()

    async def worker() -> None:
        while not queue.empty():
            await queue.get_nowait()()

    await asyncio.gather(*(worker() for _ in range(WORKERS)))
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=50_000, help="jobs per round (default 50000)")
    parser.add_argument("--rounds", type=int, default=7, help="rounds (default 7)")
    args = parser.parse_args(argv)
    n = args.jobs
    limits = limits_that_never_hold_back()
    times: dict[str, list[float]] = {"plain": [], "limits": [], "raw asyncio": []}
    asyncio.run(run_scheduler(1000, None))  # warm up imports and caches
    asyncio.run(run_scheduler(1000, limits))
    for _ in range(args.rounds):
        times["plain"].append(asyncio.run(run_scheduler(n, None)))
        times["limits"].append(asyncio.run(run_scheduler(n, limits)))
        times["raw asyncio"].append(asyncio.run(run_raw(n)))
    python = sys.version.split()[0]
    print(f"{n} no-op async jobs, {WORKERS} workers, {args.rounds} rounds (Python {python})")
    print(f"{'':<14}{'jobs/s (best)':>15}{'jobs/s (median)':>17}{'us/job (best)':>15}")
    for name, values in times.items():
        best, median = min(values), statistics.median(values)
        print(f"{name:<14}{n / best:>15,.0f}{n / median:>17,.0f}{best / n * 1e6:>15.2f}")
    best_cost = 1 - min(times["plain"]) / min(times["limits"])
    median_cost = 1 - statistics.median(times["plain"]) / statistics.median(times["limits"])
    print(
        f"limits cost {best_cost:.1%} of throughput (best rounds), "
        f"{median_cost:.1%} (medians); target: at most 25%"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
