"""Claim latency with job groups (tenant fairness) on a shared store.

Run it standalone: ``python benchmarks/group_claims.py STORE_URL [--jobs N]
[--claims C] [--batch B]``, STORE_URL a ``postgresql://...`` DSN (a
throw-away schema is created and dropped) or ``sqlite:///PATH`` (a new file).

Each case fills a fresh store with N ready jobs, then times C claims of B
jobs each; every claim is released at once, so each one sees the same store.
The cases: no job has a group (the plain one-statement claim); the N jobs in
100 groups; and N - 10 jobs of one group with 10 of a second (the issue's
100,000 + 10). It prints the median and p95 claim latency per case, and for
the last case how many of the second group's jobs the first claim took (with
turns, half the claim; in strategy order alone, none: they sort last).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import Any

from jobsched.store import NewJob, StoreContext


def jobs(n: int, group_of: Callable[[int], str | None]) -> list[NewJob]:
    now = time.time()
    rows = []
    for i in range(n):
        options: dict[str, Any] = {"name": "noop", "executor": "async"}
        group = group_of(i)
        if group is not None:
            options["group"] = group
        rows.append(
            NewJob(
                job_id=f"j{i:07d}",
                key=None,
                type="noop",
                args={},
                options=options,
                run_at=now,
                submitted_at=now,
                sort_key=(0.0, float(i)),
            )
        )
    return rows


async def open_store(url: str) -> tuple[Any, Callable[[], Any]]:
    """A fresh shared store at `url`, and what removes it afterwards."""
    if url.startswith("postgresql"):
        import psycopg

        from jobsched_plugins.postgres_store import PostgresStore

        schema = f"bench_{uuid.uuid4().hex[:12]}"
        sep = "&" if "?" in url else "?"
        store = PostgresStore(f"{url}{sep}schema={schema}")

        def drop() -> None:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

    else:
        from jobsched_plugins.sqlite_store import SQLiteStore

        directory = tempfile.mkdtemp(prefix="group-claims-")
        path = os.path.join(directory, "jobs.db")
        store = SQLiteStore(f"sqlite:///{path}")

        def drop() -> None:
            for suffix in ("", "-wal", "-shm"):
                if os.path.exists(path + suffix):
                    os.remove(path + suffix)
            os.rmdir(directory)

    await store.open(StoreContext(worker_id="bench", shared=True))
    return store, drop


async def measure(
    url: str, n: int, group_of: Callable[[int], str | None], claims: int, batch: int
) -> tuple[list[float], set[str]]:
    store, drop = await open_store(url)
    try:
        rows = jobs(n, group_of)
        for i in range(0, n, 5000):
            await store.insert(rows[i : i + 5000])
        if url.startswith("postgresql"):
            async with store.connection() as conn:
                await conn.execute("ANALYZE")
        first: set[str] = set()
        times = []
        for k in range(claims + 5):  # five to warm up
            start = time.perf_counter()
            taken, _ = await store.claim(batch, "bench")
            elapsed = time.perf_counter() - start
            if k == 0:
                first = {r.job_id for r in taken}
            assert len(taken) == batch, (len(taken), batch)
            await store.release([r.job_id for r in taken], "bench")
            if k >= 5:
                times.append(elapsed)
        return times, first
    finally:
        await store.close()
        drop()


def row(name: str, times: list[float]) -> str:
    times = sorted(times)
    p95 = times[min(len(times) - 1, int(len(times) * 0.95))]
    return f"| {name} | {statistics.median(times) * 1e3:.2f} ms | {p95 * 1e3:.2f} ms |"


async def run(url: str, n: int, claims: int, batch: int) -> None:
    print(f"claims of {batch} jobs from {n:,} ready jobs ({url.split(':')[0]}), {claims} claims")
    print("| case | median | p95 |")
    print("|---|---|---|")
    times, _ = await measure(url, n, lambda i: None, claims, batch)
    print(row("no groups (the plain claim)", times), flush=True)
    times, _ = await measure(url, n, lambda i: f"tenant-{i % 100}", claims, batch)
    print(row("100 groups", times), flush=True)
    small = {f"j{i:07d}" for i in range(n - 10, n)}
    times, first = await measure(url, n, lambda i: "big" if i < n - 10 else "small", claims, batch)
    print(row(f"{n - 10:,} jobs of one group + 10 of another", times), flush=True)
    # The small group's jobs sort last, yet the first claim takes its turns.
    print(f"the first claim took {len(first & small)} of the second group's 10 jobs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="postgresql://... or sqlite:///PATH")
    parser.add_argument("--jobs", type=int, default=100_010, help="ready jobs per case")
    parser.add_argument("--claims", type=int, default=200, help="claims timed per case")
    parser.add_argument("--batch", type=int, default=10, help="jobs per claim")
    args = parser.parse_args()
    if args.jobs < 20 or args.batch < 2 or args.claims < 1:
        sys.exit("group_claims: --jobs must be >= 20, --batch >= 2 and --claims >= 1")
    asyncio.run(run(args.url, args.jobs, args.claims, args.batch))


if __name__ == "__main__":
    main()
