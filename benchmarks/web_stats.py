"""What the dashboard's reads cost on a big store: `Client.stats` and `Client.page`.

    python benchmarks/web_stats.py [--rows 1000000] [--rounds 5]
                                   [--postgres postgresql://host/db] [--sqlite-dir DIR]

Fills a fresh shared store with ``--rows`` jobs (written straight into its
table by SQL, as a long-lived deployment would have them: 96% completed,
the rest failed, pending, running, cancelled), then times, as the median of
``--rounds`` calls: ``stats()`` (what every ``/api/events`` change and
``/api/stats`` read), ``page()`` of the newest 50 (``/jobs``), ``page()``
of the failed ones and ``page(type=...)``. PostgreSQL runs in a throw-away
schema of ``--postgres`` (default: ``$JOBSCHED_TEST_POSTGRES_DSN``), SQLite
in a file in ``--sqlite-dir`` (default: a temporary folder).

Standalone: it needs only jobsched installed (``pip install -e '.[postgres]'``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from jobsched import Client

#: (status, share of the rows): a deployment that has run for a while.
MIX = (("completed", 0.96), ("failed", 0.02), ("cancelled", 0.01), ("pending", 0.009))
RUNNING = 50


def _status_sql(position: str) -> str:
    """A CASE giving each row its status from its position (1..rows) in `MIX`."""
    cases, edge = [], 0.0
    for status, share in MIX[:-1]:
        edge += share
        cases.append(f"WHEN {position} <= {{rows}} * {edge} THEN '{status}'")
    return f"CASE WHEN {position} <= {RUNNING} THEN 'running' {' '.join(cases)} ELSE 'pending' END"


async def fill_postgres(url: str, rows: int) -> None:
    import psycopg

    async with Client(url):  # creates the schema
        pass
    schema = url.split("schema=")[1].split("&")[0]
    now = time.time()
    status = _status_sql("n").format(rows=rows)
    with psycopg.connect(url.split("?")[0], autocommit=True) as conn:
        conn.execute(
            f"""INSERT INTO "{schema}".jobs (job_id, type, args, options, status, attempts,
                run_at, submitted_at, sort_key, started_at, finished_at, lease_owner,
                lease_expires)
            SELECT 'job-' || n, CASE WHEN n % 10 = 0 THEN 'report' ELSE 'email' END,
                '{{"to": "user@example.com"}}', '{{"name": "email", "executor": "async"}}',
                s, 1, {now} - n, {now} - n, "{schema}".sort_key(0, {now} - n),
                CASE WHEN s <> 'pending' THEN {now} - n END,
                CASE WHEN s NOT IN ('pending', 'running') THEN {now} - n + 1 END,
                CASE WHEN s = 'running' THEN 'worker-' || (n % 4) END,
                CASE WHEN s = 'running' THEN {now} + 30 END
            FROM (SELECT n, {status} AS s FROM generate_series(1, {rows}) AS n) AS g"""
        )
        conn.execute(f'ANALYZE "{schema}".jobs')


async def fill_sqlite(url: str, path: Path, rows: int) -> None:
    async with Client(url):  # creates the file
        pass
    now = time.time()
    status = _status_sql("n").format(rows=rows)
    with sqlite3.connect(path) as conn:
        conn.execute(
            f"""WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < {rows})
            INSERT INTO jobsched_shared_jobs (job_id, type, args, options, status, attempts,
                run_at, submitted_at, sort_key, started_at, finished_at, lease_owner,
                lease_expires)
            SELECT 'job-' || n, CASE WHEN n % 10 = 0 THEN 'report' ELSE 'email' END,
                '{{"to": "user@example.com"}}', '{{"name": "email", "executor": "async"}}',
                s, 1, {now} - n, {now} - n, x'00',
                CASE WHEN s <> 'pending' THEN {now} - n END,
                CASE WHEN s NOT IN ('pending', 'running') THEN {now} - n + 1 END,
                CASE WHEN s = 'running' THEN 'worker-' || (n % 4) END,
                CASE WHEN s = 'running' THEN {now} + 30 END
            FROM (SELECT n, {status} AS s FROM g)"""
        )
        # Rows written behind the store's back: counted as migration 7 counts a file.
        conn.execute("DELETE FROM jobsched_shared_counts")
        conn.execute(
            "INSERT INTO jobsched_shared_counts "
            "SELECT status, count(*) FROM jobsched_shared_jobs GROUP BY status"
        )
        conn.execute("ANALYZE")


async def timed(rounds: int, call: Callable[[], Awaitable[Any]]) -> float:
    """The median of `rounds` calls, in milliseconds (after one warm-up call)."""
    await call()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        await call()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


async def measure(url: str, rounds: int) -> dict[str, float]:
    async with Client(url) as client:
        stats = await client.stats()
        total = sum(stats.counts.values())
        print(f"  {total} jobs: {dict(sorted(stats.counts.items()))}")
        return {
            "stats()": await timed(rounds, client.stats),
            "page() newest 50": await timed(rounds, lambda: client.page(limit=50)),
            "page(status=failed)": await timed(rounds, lambda: client.page(status="failed")),
            "page(type=report)": await timed(rounds, lambda: client.page(type="report")),
        }


async def run(args: argparse.Namespace) -> None:
    results: dict[str, dict[str, float]] = {}
    if args.postgres:
        schema = f"bench_{uuid.uuid4().hex[:8]}"
        sep = "&" if "?" in args.postgres else "?"
        url = f"{args.postgres}{sep}schema={schema}"
        print(f"postgresql: filling {args.rows} rows into schema {schema} ...")
        await fill_postgres(url, args.rows)
        try:
            results["postgresql"] = await measure(url, args.rounds)
        finally:
            import psycopg

            with psycopg.connect(args.postgres, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    with tempfile.TemporaryDirectory(dir=args.sqlite_dir) as folder:
        path = Path(folder) / "jobs.db"
        print(f"sqlite (shared mode): filling {args.rows} rows into {path} ...")
        await fill_sqlite(f"sqlite:///{path}", path, args.rows)
        results["sqlite"] = await measure(f"sqlite:///{path}", args.rounds)
    names = list(next(iter(results.values())))
    print()
    print(f"| ms, median of {args.rounds} | " + " | ".join(results) + " |")
    print("|---|" + "---:|" * len(results))
    for name in names:
        cells = " | ".join(f"{results[store][name]:.1f}" for store in results)
        print(f"| {name} | {cells} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--postgres", default=os.environ.get("JOBSCHED_TEST_POSTGRES_DSN"))
    parser.add_argument("--sqlite-dir", default=None)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
