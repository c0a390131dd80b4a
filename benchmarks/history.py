"""What the throughput history costs: a worker's fold and flush, the Overview's reads.

    python benchmarks/history.py [--types 20] [--queues 3] [--rounds 5]
                                 [--postgres postgresql://host/db] [--sqlite-dir DIR]

Fills a fresh shared store with a full week of history, as workers would
have flushed it (a row per 5-minute bucket, queue and job type: ``--types``
x ``--queues`` rows a bucket; the store keeps a day of 5-minute rows and a
week of hourly ones), then times, as the median of ``--rounds`` calls:

- ``fold``: `HistoryFold.add`, what a worker does per ended attempt (µs);
- ``flush``: `add_history` of one renewal's fold (every queue and type of
  one bucket), the one statement a worker sends per renewal;
- ``history 24h`` / ``history 7d``: `Client.history` (the Overview's read,
  the backlog of a store with no unfinished job included).

PostgreSQL runs in a throw-away schema of ``--postgres`` (default:
``$JOBSCHED_TEST_POSTGRES_DSN``), SQLite in a file in ``--sqlite-dir``.
Standalone: it needs only jobsched installed (``pip install -e '.[postgres]'``).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import statistics
import tempfile
import time
import timeit
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from jobsched import Client
from jobsched.store import FOLD_STEP, HistoryFold, HistoryRow


def bucket_rows(start: float, types: int, queues: int) -> list[HistoryRow]:
    """One 5-minute bucket's fold of every queue and type (10 attempts each)."""
    fold = HistoryFold()
    for q in range(queues):
        for t in range(types):
            for i in range(10):
                fold.add(start, f"queue-{q}", f"type-{t:02d}", i != 0, 0.002 * (i + 1))
    return fold.take()


async def fill(client: Client, types: int, queues: int) -> None:
    """A week of history, an hour of buckets per call."""
    now = time.time()
    first = math.floor((now - 7 * 86_400) / FOLD_STEP) * FOLD_STEP
    buckets = int((now - first) // FOLD_STEP) + 1
    for hour in range(0, buckets, 12):
        rows = []
        for b in range(hour, min(hour + 12, buckets)):
            rows += bucket_rows(first + b * FOLD_STEP, types, queues)
        await client.store.add_history(rows)


async def median_ms(call: Callable[[], Awaitable[Any]], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        began = time.perf_counter()
        await call()
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times)


async def measure(url: str, types: int, queues: int, rounds: int) -> dict[str, float]:
    async with Client(url) as client:
        await fill(client, types, queues)
        now_bucket = math.floor(time.time() / FOLD_STEP) * FOLD_STEP
        flush = bucket_rows(now_bucket, types, queues)
        found = {
            "flush": await median_ms(lambda: client.store.add_history(flush), rounds),
            "history 24h": await median_ms(lambda: client.history(window="24h"), rounds),
            "history 7d": await median_ms(lambda: client.history(window="7d"), rounds),
            "history 7d, one type": await median_ms(
                lambda: client.history(window="7d", type="type-00"), rounds
            ),
        }
        week = await client.history(window="7d")
        assert len(week.types) == types and week.completed > 0
        return found


def fold_us() -> float:
    fold = HistoryFold()
    now = time.time()
    n = 200_000
    seconds = min(
        timeit.repeat(
            lambda: fold.add(now, "default", "myapp.tasks.send_email", True, 0.0123),
            number=n,
            repeat=5,
        )
    )
    return seconds / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--types", type=int, default=20)
    parser.add_argument("--queues", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--postgres", default=os.environ.get("JOBSCHED_TEST_POSTGRES_DSN"))
    parser.add_argument("--sqlite-dir", default=None)
    args = parser.parse_args()
    print(f"fold: {fold_us():.2f} µs per ended attempt")
    rows_per_bucket = args.types * args.queues
    print(f"{args.types} job types x {args.queues} queues: {rows_per_bucket} rows a bucket")
    results: dict[str, dict[str, float]] = {}
    if args.postgres:
        sep = "&" if "?" in args.postgres else "?"
        url = f"{args.postgres}{sep}schema=bench_{uuid.uuid4().hex[:8]}"
        try:
            results["PostgreSQL"] = asyncio.run(measure(url, args.types, args.queues, args.rounds))
        finally:
            import psycopg

            schema = url.split("schema=")[1]
            with psycopg.connect(args.postgres, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    with tempfile.TemporaryDirectory(dir=args.sqlite_dir) as folder:
        url = f"sqlite:///{Path(folder) / 'history.db'}"
        results["SQLite (shared)"] = asyncio.run(measure(url, args.types, args.queues, args.rounds))
    names = list(next(iter(results.values())))
    print(f"| ms, median of {args.rounds} | " + " | ".join(results) + " |")
    print("|---|" + "---:|" * len(results))
    for name in names:
        print(f"| {name} | " + " | ".join(f"{r[name]:.1f}" for r in results.values()) + " |")


if __name__ == "__main__":
    main()
