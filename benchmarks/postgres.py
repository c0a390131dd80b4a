"""No-op jobs per second through PostgreSQL: jobsched's postgres store vs procrastinate.

    pip install -e '.[postgres]' procrastinate   # procrastinate: for this benchmark only
    python benchmarks/postgres.py [--dsn postgresql://postgres@127.0.0.1:5432/test]
                                  [--jobs 5000] [--concurrency 8]

Both run on the same server, in one fresh database (``jobsched_bench``,
dropped and re-created), in the same run. For each system and for 1 and 4
worker processes: N no-op jobs are queued first (not timed), the worker
processes are started and connected (not timed), then the jobs are released
at once and the clock runs until the database says all N succeeded (both
measured the same way: polling a count every 5 ms). Each worker process runs
`--concurrency` jobs at a time (jobsched ``--workers``, procrastinate
``concurrency``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import attrs
import psycopg

from jobsched import AsyncJob, Job, PluginManager, hookimpl
from jobsched.hookspecs import Register

BENCH_DB = "jobsched_bench"


# ── the job, for both systems ──────────────────────────────────────────
@attrs.define(eq=False)
class NoOp(AsyncJob):
    """Does nothing: what is measured is the queue."""

    def __attrs_post_init__(self) -> None:
        Job.__init__(self, "noop")

    async def run(self) -> None:
        return None


@hookimpl
def jobsched_register_job_types(register: Register) -> None:
    register("noop", NoOp)


def procrastinate_app(dsn: str) -> Any:
    import procrastinate

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=dsn))

    @app.task(name="noop")
    async def noop() -> None:
        return None

    return app


# ── worker processes ───────────────────────────────────────────────────
def jobsched_worker(url: str, concurrency: int) -> None:
    import logging

    import structlog

    from jobsched.worker import run_worker

    # WARNING, as for procrastinate's workers: logging every transition at
    # INFO would measure the logger, not the queue.
    structlog.configure(
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
    )
    asyncio.run(
        run_worker(
            url,
            workers=concurrency,
            plugins=PluginManager([sys.modules[__name__]], autoload=False),
            on_started=lambda s: print("ready", flush=True),
        )
    )


def procrastinate_worker(dsn: str, concurrency: int) -> None:
    import logging

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)

    async def main() -> None:
        app = procrastinate_app(dsn)
        async with app.open_async():
            print("ready", flush=True)
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
            await app.run_worker_async(
                concurrency=concurrency, wait=False, install_signal_handlers=False
            )

    asyncio.run(main())


def spawn(kind: str, target: str, concurrency: int, n: int) -> list[subprocess.Popen[str]]:
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--worker", kind, target, str(concurrency)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(n)
    ]
    for proc in procs:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if line.strip() != "ready":
            raise SystemExit(f"{kind} worker failed to start: {line!r}")
    return procs


def stop(procs: list[subprocess.Popen[str]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        proc.wait(timeout=60)


def wait_count(conn: psycopg.Connection[Any], query: str, n: int) -> float:
    while True:
        row = conn.execute(query).fetchone()
        if row is not None and row[0] >= n:
            return time.perf_counter()
        time.sleep(0.005)


# ── one measurement each ───────────────────────────────────────────────
def bench_jobsched(dsn: str, jobs: int, procs: int, concurrency: int) -> float:
    from jobsched import NewJob
    from jobsched_plugins.postgres_store import PostgresStore

    schema = f"bench_{procs}"
    url = f"{dsn}?schema={schema}"

    async def load() -> None:
        store = PostgresStore(url)
        await store.open()
        far = time.time() + 10 * 365 * 86400  # held back until the clock starts
        rows = [
            NewJob(
                job_id=f"n{i}",
                type="noop",
                args={},
                options={"retry": {"policy": "none"}},
                run_at=far,
                submitted_at=time.time(),
                sort_key=(-1.0, 0.0),
            )
            for i in range(jobs)
        ]
        for i in range(0, jobs, 1000):
            await store.insert(rows[i : i + 1000])
        await store.close()

    asyncio.run(load())
    workers = spawn("jobsched", url, concurrency, procs)
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            start = time.perf_counter()
            conn.execute(f"UPDATE {schema}.jobs SET run_at = 0")
            conn.execute("SELECT pg_notify(%s, 'w')", [f"jobsched_{schema}"])
            end = wait_count(
                conn, f"SELECT count(*) FROM {schema}.jobs WHERE status = 'completed'", jobs
            )
    finally:
        stop(workers)
    return jobs / (end - start)


def bench_procrastinate(dsn: str, jobs: int, procs: int, concurrency: int) -> float:
    async def load() -> None:
        app = procrastinate_app(dsn)
        async with app.open_async():
            noop = app.tasks["noop"]
            for i in range(0, jobs, 1000):
                await noop.batch_defer_async(*[{} for _ in range(min(1000, jobs - i))])

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DELETE FROM procrastinate_jobs")
    asyncio.run(load())
    workers = spawn("procrastinate", dsn, concurrency, procs)
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            start = time.perf_counter()
            for proc in workers:
                assert proc.stdin is not None
                proc.stdin.write("go\n")
                proc.stdin.flush()
            end = wait_count(
                conn,
                "SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'",
                jobs,
            )
    finally:
        stop(workers)
    return jobs / (end - start)


def fresh_database(dsn: str) -> str:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {BENCH_DB}")
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path=f"/{BENCH_DB}", query=""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dsn",
        default=os.environ.get(
            "JOBSCHED_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test"
        ),
    )
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--worker", nargs=3, metavar=("KIND", "TARGET", "CONCURRENCY"))
    args = parser.parse_args()
    if args.worker:
        kind, target, concurrency = args.worker
        {"jobsched": jobsched_worker, "procrastinate": procrastinate_worker}[kind](
            target, int(concurrency)
        )
        return
    try:
        import procrastinate
    except ImportError:
        raise SystemExit(
            "this benchmark compares with procrastinate: pip install procrastinate"
        ) from None
    dsn = fresh_database(args.dsn)
    app = procrastinate_app(dsn)

    async def schema() -> None:
        async with app.open_async():
            await app.schema_manager.apply_schema_async()

    asyncio.run(schema())
    print(
        f"{args.jobs} no-op jobs, {args.concurrency} concurrent per process, "
        f"PostgreSQL at {urlsplit(dsn).hostname}, procrastinate {procrastinate.__version__}"
    )
    results: dict[tuple[str, int], float] = {}
    for procs in (1, 4):
        results["jobsched", procs] = bench_jobsched(dsn, args.jobs, procs, args.concurrency)
        results["procrastinate", procs] = bench_procrastinate(
            dsn, args.jobs, procs, args.concurrency
        )
    print(f"{'system':<14} {'1 process':>12} {'4 processes':>12} {'scaling':>8}")
    for system in ("jobsched", "procrastinate"):
        one, four = results[system, 1], results[system, 4]
        print(f"{system:<14} {one:>10.0f}/s {four:>10.0f}/s {four / one:>7.2f}x")
    for procs in (1, 4):
        ratio = results["jobsched", procs] / results["procrastinate", procs]
        print(f"jobsched / procrastinate with {procs} process(es): {ratio:.1f}x")


if __name__ == "__main__":
    main()
