"""How far one PostgreSQL carries jobsched: the figures of docs/capacity.md.

    pip install -e '.[postgres,bench]'
    python benchmarks/capacity.py [--dsn postgresql://postgres@127.0.0.1:5432/test]
                                  [--database jobsched_capacity]
                                  [--sizes 10000,1000000,10000000]
                                  [--processes 1,2,4,8] [--queues 100]
                                  [--jobs 20000] [--concurrency 8] [--no-docs]

What it measures is the server's work per job, not the machine's wall clock:
PostgreSQL's CPU time (the sum over the backends serving the benchmark's
database, from ``/proc/PID/schedstat``, in nanoseconds; the server's shared
processes serve every database and are left out), the WAL it writes
(``pg_current_wal_lsn``: the whole server's) and the size of the tables.
A core's worth of server CPU divided by the CPU one job costs is how many
jobs per second one server core carries; the client's and workers' CPU run elsewhere in a real
deployment and are left out (they are this machine's business here, which
is why the wall-clock jobs/s is printed beside it but not the model).

In one fresh database (``--database``, dropped and created anew), the jobs
table is filled with finished jobs (and their attempt rows) up to each
``--sizes`` in turn, by ``INSERT ... SELECT`` from one finished job: the
rows the table carries when retention is off. At each size:

* **enqueue**: ``--jobs`` no-op jobs through ``Client.submit_many`` in
  batches of 1,000, with claiming paused (``Client.pause_queue``);
* **run**: those jobs, once ``Client.resume_queue`` lets the worker
  processes (``--processes``, each ``--concurrency`` workers, started and
  connected first) claim them, until the database says all are done; on
  one queue, and spread over ``--queues`` queues that every worker serves
  (with the larger of the first two ``--processes``);
* **vacuum**: ``VACUUM`` of the jobs and attempts tables after each run
  (autovacuum is off for them, so that its work is counted here and not
  lost in a process that exits), per job of the run;
* **retention**: the run's finished jobs deleted by the store's own purge
  (what ``jobsched worker --retention`` does; the filler rows are stamped
  as finished later, so that the purge finds only the run's jobs), per job.

It prints the table and writes it into docs/capacity.md between two marker
lines (``--no-docs``: only prints it). No figure here is asserted by a test.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import attrs
import psycopg

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:  # run as a script: `benchmarks` importable
    sys.path.insert(0, str(HERE.parent))

from benchmarks.postgres import (  # noqa: E402
    NoOp,
    bench_plugins,
    fresh_database,
    quiet_logs,
    spawn,
    stop,
)
from jobsched import Client, Submission  # noqa: E402

DOCS = "docs/capacity.md"
START = "<!-- benchmarks/capacity.py writes the figures below -->"
END = "<!-- end of benchmarks/capacity.py's figures -->"
SCHEMA = "capacity"
#: The filler rows are stamped as finished this far in the future, so that a
#: purge up to now finds the measured run's jobs and none of them.
FILLER_FINISHED = 4_000_000_000.0
FILL_CHUNK = 500_000


# ── what the server did ────────────────────────────────────────────────
def server_pids(conn: psycopg.Connection[Any]) -> list[int]:
    """The server processes that serve this database: its backends (the
    server's shared processes, the WAL writer and the checkpointer, serve
    every database on the machine and are left out)."""
    rows = conn.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
    ).fetchall()
    return [int(r[0]) for r in rows]


def cpu_ns(pids: list[int]) -> dict[int, int]:
    """CPU time each process in `pids` has used, in nanoseconds."""
    used = {}
    for pid in pids:
        with suppress(OSError, IndexError, ValueError):
            used[pid] = int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])
    return used


@attrs.define
class Cost:
    """What the server spent on `jobs` jobs, and how long it took."""

    jobs: int
    server_cpu: float  # seconds
    wal: int  # bytes
    wall: float  # seconds

    def cpu_us(self) -> float:
        return self.server_cpu / self.jobs * 1e6

    def wal_bytes(self) -> float:
        return self.wal / self.jobs

    def per_second(self) -> float:
        return self.jobs / self.wall


class Meter:
    """Measures the server's work during a `measure` block, read through `conn`."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    def lsn(self) -> str:
        row = self._conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
        assert row is not None
        return str(row[0])

    @contextmanager
    def measure(self, jobs: int, into: list[Cost]) -> Iterator[None]:
        lsn, cpu, wall = self.lsn(), cpu_ns(server_pids(self._conn)), time.perf_counter()
        yield
        wall = time.perf_counter() - wall
        # A backend that started meanwhile counts from nothing; one that
        # ended meanwhile is lost (the workers' and clients' connections
        # outlive every measurement).
        ended = cpu_ns(server_pids(self._conn))
        used = sum(ns - cpu.get(pid, 0) for pid, ns in ended.items())
        row = self._conn.execute(
            "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s::pg_lsn)::bigint", [lsn]
        ).fetchone()
        assert row is not None
        into.append(Cost(jobs, used / 1e9, int(row[0]), wall))


# ── the jobs table at a size ───────────────────────────────────────────
def finished_rows(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute(
        f"SELECT coalesce(sum(n), 0) FROM {SCHEMA}.job_counts WHERE status = 'completed'"
    ).fetchone()
    assert row is not None
    return int(row[0])


def columns(conn: psycopg.Connection[Any], table: str, leave: set[str]) -> list[str]:
    rows = conn.execute(
        "SELECT column_name FROM information_schema.columns "
        "WHERE table_schema = %s AND table_name = %s "
        "AND coalesce(column_default, '') NOT LIKE 'nextval(%%' ORDER BY ordinal_position",
        [SCHEMA, table],
    ).fetchall()
    return [r[0] for r in rows if r[0] not in leave]


def fill(conn: psycopg.Connection[Any], size: int) -> None:
    """Add finished jobs (each with its attempt row), copies of one finished
    job but for their ids and finish times, until the table holds `size`."""
    row = conn.execute(
        f"SELECT count(*), min(job_id) FROM {SCHEMA}.jobs WHERE finished_at >= %s",
        [FILLER_FINISHED],
    ).fetchone()
    assert row is not None and row[1] is not None, "a finished job to copy"
    done, template = int(row[0]), row[1]
    job_columns = columns(conn, "jobs", {"job_id", "finished_at", "key", "unique_key"})
    attempt_columns = columns(conn, "attempts", {"job_id", "finished_at"})
    while done < size:
        upto = min(size, done + FILL_CHUNK)
        listed = ", ".join(job_columns)
        conn.execute(
            f"INSERT INTO {SCHEMA}.jobs (job_id, finished_at, {listed}) "
            f"SELECT 'filler-' || g, %s + g, {listed} FROM {SCHEMA}.jobs, "
            f"generate_series(%s::bigint, %s::bigint) g WHERE job_id = %s",
            [FILLER_FINISHED, done + 1, upto, template],
        )
        listed = ", ".join(attempt_columns)
        conn.execute(
            f"INSERT INTO {SCHEMA}.attempts (job_id, finished_at, {listed}) "
            f"SELECT 'filler-' || g, %s + g, {listed} FROM "
            f"(SELECT * FROM {SCHEMA}.attempts WHERE job_id = %s LIMIT 1) a, "
            f"generate_series(%s::bigint, %s::bigint) g",
            [FILLER_FINISHED, template, done + 1, upto],
        )
        done = upto
        print(f"  filled {done:,} rows", file=sys.stderr, flush=True)
    conn.execute(f"VACUUM (ANALYZE) {SCHEMA}.jobs, {SCHEMA}.attempts")


def table_bytes(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute(
        "SELECT pg_total_relation_size(%s) + pg_total_relation_size(%s)",
        [f"{SCHEMA}.jobs", f"{SCHEMA}.attempts"],
    ).fetchone()
    assert row is not None
    return int(row[0])


# ── one measured round: enqueue, run, vacuum, purge ────────────────────
@attrs.define
class Round:
    size: int
    processes: int
    queues: int
    enqueue: list[Cost] = attrs.Factory(list)
    run: list[Cost] = attrs.Factory(list)
    vacuum: list[Cost] = attrs.Factory(list)
    purge: list[Cost] = attrs.Factory(list)


async def submit(url: str, jobs: int, queues: list[str], meter: Meter, into: list[Cost]) -> None:
    async with Client(url, plugins=bench_plugins()) as client:
        await client.pause_queue()
        held = [
            Submission(NoOp(), queue=queues[i % len(queues)] if queues else None)
            for i in range(jobs)
        ]
        with meter.measure(jobs, into):
            for i in range(0, jobs, 1000):
                await client.submit_many(held[i : i + 1000])


async def release(
    url: str,
    conn: psycopg.Connection[Any],
    finished: int,
    meter: Meter,
    jobs: int,
    into: list[Cost],
) -> None:
    """Let the workers claim, and wait until `finished` jobs are completed.
    The count is read every 20 ms: each read is server work too."""
    async with Client(url, plugins=bench_plugins()) as client:
        with meter.measure(jobs, into):
            await client.resume_queue()
            while finished_rows(conn) < finished:
                await asyncio.sleep(0.02)


async def purge(url: str, meter: Meter, jobs: int, into: list[Cost]) -> None:
    from jobsched_plugins.postgres_store import PostgresStore

    store = PostgresStore(url)
    await store.open()
    try:
        with meter.measure(jobs, into):
            purged = await store.purge(time.time() + 1, ("completed",))
    finally:
        await store.close()
    if purged != jobs:
        raise SystemExit(f"the purge deleted {purged} jobs, not the run's {jobs}")


def measure_round(
    conn: psycopg.Connection[Any], url: str, rnd: Round, jobs: int, concurrency: int
) -> None:
    meter = Meter(conn)
    queues = [f"q{i}" for i in range(rnd.queues)] if rnd.queues > 1 else []
    before = finished_rows(conn)
    asyncio.run(submit(url, jobs, queues, meter, rnd.enqueue))
    workers = spawn("jobsched", url, concurrency, rnd.processes, queues)
    try:
        asyncio.run(release(url, conn, before + jobs, meter, jobs, rnd.run))
        with meter.measure(jobs, rnd.vacuum):
            conn.execute(f"VACUUM {SCHEMA}.jobs, {SCHEMA}.attempts")
    finally:
        stop(workers)
    asyncio.run(purge(url, meter, jobs, rnd.purge))
    conn.execute(f"VACUUM {SCHEMA}.jobs, {SCHEMA}.attempts")


def prepare(conn: psycopg.Connection[Any], url: str, concurrency: int) -> None:
    """The schema, with one finished job (and its attempt) to copy."""
    asyncio.run(submit(url, 1, [], Meter(conn), []))
    workers = spawn("jobsched", url, concurrency, 1)
    try:
        asyncio.run(release(url, conn, 1, Meter(conn), 1, []))
    finally:
        stop(workers)
    # It is the first filler row: finished later than any measured job.
    for table in ("jobs", "attempts"):
        conn.execute(f"UPDATE {SCHEMA}.{table} SET finished_at = %s", [FILLER_FINISHED])
    for table in ("jobs", "attempts"):
        conn.execute(f"ALTER TABLE {SCHEMA}.{table} SET (autovacuum_enabled = false)")


# ── the report ─────────────────────────────────────────────────────────
def figures(rounds: list[Round]) -> list[str]:
    def med(costs: list[Cost], what: str) -> float:
        values = sorted(float(getattr(c, what)()) for c in costs)
        return values[len(values) // 2]

    table = [
        "| jobs table | processes | queues | enqueue: server µs/job | run: server µs/job "
        "| vacuum µs/job | purge µs/job | WAL bytes/job (enqueue + run) "
        "| run jobs/s here | server jobs/s per core, retention off / on |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rounds:
        enqueue, run = med(r.enqueue, "cpu_us"), med(r.run, "cpu_us")
        vacuum, purged = med(r.vacuum, "cpu_us"), med(r.purge, "cpu_us")
        wal = med(r.enqueue, "wal_bytes") + med(r.run, "wal_bytes")
        off = enqueue + run + vacuum
        on = off + purged
        table.append(
            f"| {r.size:,} | {r.processes} | {r.queues} | {enqueue:.1f} | {run:.1f} "
            f"| {vacuum:.1f} | {purged:.1f} | {wal:,.0f} | {med(r.run, 'per_second'):,.0f} "
            f"| {1e6 / off:,.0f} / {1e6 / on:,.0f} |"
        )
    return table


def write_docs(header: str, table: list[str], sizes: list[str]) -> None:
    path = HERE.parent / DOCS
    text = path.read_text(encoding="utf-8")
    if START not in text or END not in text:
        raise SystemExit(f"{DOCS}: the markers {START!r} and {END!r} are missing")
    before, rest = text.split(START, 1)
    after = rest.split(END, 1)[1]
    block = "\n".join([START, "", header, "", *table, "", *sizes, "", END])
    path.write_text(before + block + after, encoding="utf-8")
    print(f"wrote the figures into {DOCS}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dsn",
        default=os.environ.get(
            "JOBSCHED_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test"
        ),
    )
    parser.add_argument("--database", default="jobsched_capacity")
    parser.add_argument("--sizes", default="10000,1000000,10000000")
    parser.add_argument("--processes", default="1,2,4,8")
    parser.add_argument("--queues", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=20000, help="jobs per measurement")
    parser.add_argument("--concurrency", type=int, default=8, help="workers per process")
    parser.add_argument("--no-docs", action="store_true")
    args = parser.parse_args()
    quiet_logs()
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    processes = [int(p) for p in args.processes.split(",")]
    dsn = fresh_database(args.dsn, args.database)
    url = f"{dsn}?schema={SCHEMA}"
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load = os.getloadavg()[0]
    rounds: list[Round] = []
    table_sizes: list[str] = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        settings = ", ".join(
            f"{name} {conn.execute(f'SHOW {name}').fetchone()[0]}"  # type: ignore[index]
            for name in ("shared_buffers", "synchronous_commit", "autovacuum")
        )
        version = conn.execute("SHOW server_version").fetchone()
        prepare(conn, url, args.concurrency)
        for size in sizes:
            fill(conn, size)
            table_sizes.append(
                f"- {size:,} finished jobs: the jobs and attempts tables with their "
                f"indexes take {table_bytes(conn) / 2**20:,.0f} MiB."
            )
            print(table_sizes[-1], flush=True)
            for procs in processes:
                rnd = Round(size, procs, 1)
                measure_round(conn, url, rnd, args.jobs, args.concurrency)
                rounds.append(rnd)
                print(figures([rnd])[-1], flush=True)
            rnd = Round(size, max(processes[:2]), args.queues)
            measure_round(conn, url, rnd, args.jobs, args.concurrency)
            rounds.append(rnd)
            print(figures([rnd])[-1], flush=True)
    table = figures(rounds)
    header = (
        f"Generated by `python benchmarks/capacity.py` on {started}: {os.cpu_count()} cores "
        f"({platform.machine()}), PostgreSQL {version[0] if version else '?'} on the same "
        f"machine ({settings}), load average {load:.2f} at the start and "
        f"{os.getloadavg()[0]:.2f} at the end; {args.jobs:,} no-op jobs per measurement, "
        f"{args.concurrency} workers per process. Server µs: the CPU time per job of the "
        "PostgreSQL backends serving the database; WAL: the whole server's."
    )
    print()
    print("\n".join(table))
    if not args.no_docs:
        write_docs(header, table, table_sizes)


if __name__ == "__main__":
    main()
