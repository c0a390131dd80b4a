"""jobsched's postgres store against procrastinate, PgQueuer and Oban: running and enqueueing.

    pip install -e '.[postgres]' procrastinate pgqueuer asyncpg   # for this benchmark only
    python3.12 -m venv .oban && .oban/bin/pip install oban       # Oban needs Python 3.12+
    python benchmarks/postgres.py [--dsn postgresql://postgres@127.0.0.1:5432/test]
                                  [--jobs 5000] [--concurrency 8] [--runs 3]
                                  [--enqueue-jobs 20000] [--batch 1000] [--no-docs]
                                  [--database jobsched_bench]
                                  [--oban-python .oban/bin/python]

It prints the table and writes it into docs/postgres.md (between two marker
lines), with the date and the machine's load average.

All of them run on the same server, in one fresh database (``jobsched_bench``, or
``--database``, dropped and re-created), in the same run, each measurement repeated
``--runs`` times (the median is reported, the range beside it). Oban for
Python runs under its own interpreter (``--oban-python``, or the
``JOBSCHED_BENCH_OBAN_PYTHON`` variable; without either it is left out):
benchmarks/oban_peer.py is its side, which imports nothing of jobsched's.

**Running** no-op jobs, with 1 and 4 worker processes: N jobs are queued
first, the worker processes are started and connected (not timed), then the jobs
are released at once and the clock runs until the database says all N are
done (polling a count every 5 ms). jobsched's jobs wait due in ten years and
one UPDATE makes them due; procrastinate's and PgQueuer's workers are
connected and wait for a line on stdin to start their loops (moving
PgQueuer's ``execute_after`` instead leaves it scanning dead rows, 3x
slower); Oban's start with their queue paused and resume it. Each worker
process runs ``--concurrency`` jobs at a time (jobsched ``--workers``,
procrastinate ``concurrency``, PgQueuer batches of that many, at most twice
that picked, as jobsched claims one job ahead per worker; Oban's queue limit).
PgQueuer uses its asyncpg driver (``pip install asyncpg``).

**Enqueueing** from one client connected before the clock starts, into an
emptied queue: jobsched through the public ``Client.submit_many`` in batches
of ``--batch``, through ``Client.submit`` awaited one at a time, and through
``Client.submit`` called concurrently (``asyncio.gather`` of ``--batch``
submits at a time, which the client coalesces); procrastinate's
``batch_defer_async``, PgQueuer's ``Queries.enqueue`` with lists and Oban's
``enqueue_many``, in batches of ``--batch``. **Concurrent single submits**,
what a web app's requests do: ``--submitters`` coroutines (8), each awaiting
one job's enqueue after another, ``--enqueue-jobs`` in all: jobsched's
``Client.submit`` (one client, which stores the calls waiting at a moment
together), procrastinate's ``defer_async``, PgQueuer's ``Queries.enqueue``
of one job on a pool of as many asyncpg connections as coroutines
(``AsyncpgPoolDriver``), Oban's ``enqueue`` on such a psycopg pool.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import attrs
import psycopg

from jobsched import AsyncJob, Client, Job, PluginManager, hookimpl
from jobsched.hookspecs import Register

BENCH_DB = "jobsched_bench"
FAR = 10 * 365 * 86400.0  # due in ten years: held back until the clock starts


# ── the job, for every system ──────────────────────────────────────────
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


def bench_plugins() -> PluginManager:
    return PluginManager([sys.modules[__name__]], autoload=False)


def procrastinate_app(dsn: str) -> Any:
    import procrastinate

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=dsn))

    @app.task(name="noop")
    async def noop() -> None:
        return None

    return app


async def pgqueuer_queries(dsn: str) -> Any:
    # asyncpg, PgQueuer's own driver (its psycopg driver shares one
    # connection between LISTEN and queries and runs several times slower here).
    import asyncpg
    from pgqueuer import AsyncpgDriver, Queries

    return Queries(AsyncpgDriver(await asyncpg.connect(dsn)))


# ── worker processes ───────────────────────────────────────────────────
def quiet_logs() -> None:
    # WARNING for every system: logging every transition at INFO would
    # measure the logger, not the queue.
    import logging

    import structlog

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    structlog.configure(
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
    )


def jobsched_worker(url: str, concurrency: int, *queues: str) -> None:
    from jobsched.worker import run_worker

    asyncio.run(
        run_worker(
            url,
            workers=concurrency,
            queues=list(queues) or None,
            plugins=bench_plugins(),
            on_started=lambda s: print("ready", flush=True),
        )
    )


def procrastinate_worker(dsn: str, concurrency: int, *queues: str) -> None:
    async def main() -> None:
        app = procrastinate_app(dsn)
        async with app.open_async():
            print("ready", flush=True)
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
            await app.run_worker_async(
                concurrency=concurrency, wait=False, install_signal_handlers=False
            )

    asyncio.run(main())


def pgqueuer_worker(dsn: str, concurrency: int, *queues: str) -> None:
    from pgqueuer import QueueManager

    async def main() -> None:
        qm = QueueManager(await pgqueuer_queries(dsn))

        @qm.entrypoint("noop")
        async def noop(job: Any) -> None:
            return None

        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, qm.shutdown.set)
        print("ready", flush=True)
        await loop.run_in_executor(None, sys.stdin.readline)
        await qm.run(
            # Batches of `concurrency`, at most twice that picked: as a jobsched
            # worker, which claims one job ahead per worker (with batches of half
            # and a cap of `concurrency` PgQueuer runs about 3x slower here).
            batch_size=concurrency,
            max_concurrent_tasks=2 * concurrency,
            dequeue_timeout=timedelta(seconds=5),
        )

    asyncio.run(main())


WORKERS: dict[str, Callable[..., None]] = {
    "jobsched": jobsched_worker,
    "procrastinate": procrastinate_worker,
    "pgqueuer": pgqueuer_worker,
}


def spawn(
    kind: str,
    target: str,
    concurrency: int,
    n: int,
    queues: list[str] | None = None,
    command: list[str] | None = None,
) -> list[subprocess.Popen[str]]:
    """`n` worker processes, once each says it is ready; `command` runs
    another program's worker (Oban's) instead of this script's."""
    argv = command or [
        sys.executable,
        __file__,
        "--worker",
        kind,
        target,
        str(concurrency),
        *(queues or ()),
    ]
    procs = [
        subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
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
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_count(conn: psycopg.Connection[Any], query: str, n: int) -> float:
    """The moment the database says `query` (a count of finished jobs) reached `n`."""
    while True:
        row = conn.execute(query).fetchone()
        if row is not None and row[0] >= n:
            return time.perf_counter()
        time.sleep(0.005)


# ── running: one measurement each ──────────────────────────────────────
def run_jobsched(
    dsn: str, jobs: int, procs: int, concurrency: int, run: int, queues: int = 0, groups: int = 0
) -> float:
    """jobs/s; with `queues`, the jobs are spread over that many queues and
    every worker serves them all; with `groups`, over that many job groups."""
    from jobsched.store import NewJob
    from jobsched_plugins.postgres_store import PostgresStore

    schema = f"bench_{procs}_{run}_{queues}_{groups}"
    url = f"{dsn}?schema={schema}"
    names = [f"q{i}" for i in range(queues)]

    def options(i: int) -> dict[str, Any]:
        spelled: dict[str, Any] = {"retry": {"policy": "none"}}
        if queues:
            spelled["queue"] = names[i % queues]
        if groups:
            spelled["group"] = f"tenant-{i % groups}"
        return spelled

    async def load() -> None:
        store = PostgresStore(url)
        await store.open()
        far = time.time() + FAR
        rows = [
            NewJob(
                job_id=f"n{i}",
                type="noop",
                args={},
                options=options(i),
                run_at=far,
                submitted_at=time.time(),
                sort_key=(-1.0, 0.0),
                queue=names[i % queues] if queues else "default",
            )
            for i in range(jobs)
        ]
        for i in range(0, jobs, 1000):
            await store.insert(rows[i : i + 1000])
        await store.close()

    asyncio.run(load())
    workers = spawn("jobsched", url, concurrency, procs, names)
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


def run_procrastinate(dsn: str, jobs: int, procs: int, concurrency: int, run: int) -> float:
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


def run_pgqueuer(dsn: str, jobs: int, procs: int, concurrency: int, run: int) -> float:
    async def load() -> None:
        queries = await pgqueuer_queries(dsn)
        await queries.clear_queue()
        for i in range(0, jobs, 1000):
            n = min(1000, jobs - i)
            await queries.enqueue(["noop"] * n, [None] * n, [0] * n)

    asyncio.run(load())
    workers = spawn("pgqueuer", dsn, concurrency, procs)
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            start = time.perf_counter()
            for proc in workers:  # as for procrastinate: start the connected workers
                assert proc.stdin is not None
                proc.stdin.write("go\n")
                proc.stdin.flush()
            # A finished job leaves the queue table.
            end = wait_count(conn, f"SELECT {jobs} - count(*) FROM pgqueuer", jobs)
    finally:
        stop(workers)
    return jobs / (end - start)


#: Oban's side (benchmarks/oban_peer.py) and the interpreter that runs it,
#: set by `main` (None: Oban is left out).
OBAN_PEER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "oban_peer.py")
oban_python: str | None = None


def oban(*arguments: object) -> str:
    """Run one command of benchmarks/oban_peer.py; its printed line."""
    assert oban_python is not None
    done = subprocess.run(
        [oban_python, OBAN_PEER, *map(str, arguments)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        raise SystemExit(f"oban_peer.py {arguments[0]} failed:\n{done.stderr}")
    return done.stdout.strip()


def run_oban(dsn: str, jobs: int, procs: int, concurrency: int, run: int) -> float:
    assert oban_python is not None
    oban("load", dsn, jobs)
    workers = spawn(
        "oban",
        dsn,
        concurrency,
        procs,
        command=[oban_python, OBAN_PEER, "worker", dsn, str(concurrency)],
    )
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            start = time.perf_counter()
            for proc in workers:  # each resumes its paused queue
                assert proc.stdin is not None
                proc.stdin.write("go\n")
                proc.stdin.flush()
            end = wait_count(conn, "SELECT count(*) FROM oban_jobs WHERE state = 'completed'", jobs)
    finally:
        stop(workers)
    return jobs / (end - start)


# ── enqueueing: one measurement each ───────────────────────────────────
async def enqueue_jobsched(dsn: str, jobs: int, batch: int, how: str) -> float:
    from jobsched import Submission

    url = f"{dsn}?schema=bench_enqueue"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS bench_enqueue CASCADE")
    async with Client(url, plugins=bench_plugins()) as client:
        # No worker runs during these measurements: the jobs are due at once.
        held = [Submission(NoOp()) for _ in range(jobs)]
        start = time.perf_counter()
        if how == "submit_many":
            for i in range(0, jobs, batch):
                await client.submit_many(held[i : i + batch])
        elif how == "submit loop":
            for item in held:
                await client.submit(item.job)
        elif how == "submitters":  # `batch` coroutines, each awaiting its submits

            async def submitter(mine: list[Submission]) -> None:
                for item in mine:
                    await client.submit(item.job)

            await asyncio.gather(*(submitter(held[k::batch]) for k in range(batch)))
        else:  # concurrent submits
            for i in range(0, jobs, batch):
                await asyncio.gather(*(client.submit(item.job) for item in held[i : i + batch]))
        end = time.perf_counter()
    return jobs / (end - start)


async def enqueue_procrastinate(dsn: str, jobs: int, batch: int) -> float:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DELETE FROM procrastinate_jobs")
    app = procrastinate_app(dsn)
    async with app.open_async():
        noop = app.tasks["noop"]
        start = time.perf_counter()
        for i in range(0, jobs, batch):
            await noop.batch_defer_async(*[{} for _ in range(min(batch, jobs - i))])
        end = time.perf_counter()
    return jobs / (end - start)


async def enqueue_pgqueuer(dsn: str, jobs: int, batch: int) -> float:
    queries = await pgqueuer_queries(dsn)
    await queries.clear_queue()
    start = time.perf_counter()
    for i in range(0, jobs, batch):
        n = min(batch, jobs - i)
        await queries.enqueue(["noop"] * n, [None] * n, [0] * n)
    end = time.perf_counter()
    return jobs / (end - start)


async def enqueue_procrastinate_concurrent(dsn: str, jobs: int, submitters: int) -> float:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DELETE FROM procrastinate_jobs")
    app = procrastinate_app(dsn)
    async with app.open_async():
        noop = app.tasks["noop"]

        async def submitter(count: int) -> None:
            for _ in range(count):
                await noop.defer_async()

        start = time.perf_counter()
        await asyncio.gather(*(submitter(n) for n in shares(jobs, submitters)))
        end = time.perf_counter()
    return jobs / (end - start)


async def enqueue_pgqueuer_concurrent(dsn: str, jobs: int, submitters: int) -> float:
    import asyncpg
    from pgqueuer import AsyncpgPoolDriver, Queries

    await (await pgqueuer_queries(dsn)).clear_queue()
    # A connection per coroutine (its single-connection driver runs one
    # query at a time), as a web app's pool.
    pool = await asyncpg.create_pool(dsn, min_size=submitters, max_size=submitters)
    queries = Queries(AsyncpgPoolDriver(pool))

    async def submitter(count: int) -> None:
        for _ in range(count):
            await queries.enqueue("noop", None, 0)

    try:
        start = time.perf_counter()
        await asyncio.gather(*(submitter(n) for n in shares(jobs, submitters)))
        end = time.perf_counter()
    finally:
        await pool.close()
    return jobs / (end - start)


async def oban_enqueue(command: str, *arguments: object) -> float:
    """jobs/s of one of benchmarks/oban_peer.py's enqueue measurements."""
    return float(oban(command, *arguments))


def shares(jobs: int, submitters: int) -> list[int]:
    """`jobs` split between `submitters` as evenly as can be."""
    return [jobs // submitters + (i < jobs % submitters) for i in range(submitters)]


# ── the whole run ──────────────────────────────────────────────────────
def fresh_database(dsn: str, name: str = BENCH_DB) -> str:
    """The DSN of database `name` on `dsn`'s server, dropped and created anew."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path=f"/{name}", query=""))


def install_others(dsn: str) -> None:
    app = procrastinate_app(dsn)

    async def install() -> None:
        async with app.open_async():
            await app.schema_manager.apply_schema_async()
        await (await pgqueuer_queries(dsn)).install()

    asyncio.run(install())
    if oban_python is not None:
        oban("install", dsn)


def median(values: list[float]) -> str:
    """The median, and the range of the runs."""
    return f"{statistics.median(values):,.0f} ({min(values):,.0f}-{max(values):,.0f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dsn",
        default=os.environ.get(
            "JOBSCHED_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test"
        ),
    )
    parser.add_argument(
        "--database",
        default=BENCH_DB,
        help=f"the database to drop and create anew on that server (default {BENCH_DB})",
    )
    parser.add_argument("--jobs", type=int, default=5000, help="jobs per run measurement")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--enqueue-jobs", type=int, default=20000)
    parser.add_argument(
        "--loop-jobs", type=int, default=2000, help="jobs for the awaited submit loop"
    )
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument(
        "--submitters", type=int, default=8, help="coroutines submitting one job at a time"
    )
    parser.add_argument(
        "--concurrent-jobs", type=int, default=2000, help="jobs for the concurrent submitters"
    )
    parser.add_argument(
        "--oban-python",
        default=os.environ.get("JOBSCHED_BENCH_OBAN_PYTHON"),
        help="a Python 3.12+ interpreter with `oban` installed (default: "
        "$JOBSCHED_BENCH_OBAN_PYTHON; without it Oban is left out)",
    )
    parser.add_argument("--skip-run", action="store_true", help="measure enqueueing only")
    parser.add_argument(
        "--no-docs",
        action="store_true",
        help=f"only print the figures (by default they also replace the table in {DOCS})",
    )
    parser.add_argument("--worker", nargs="+", metavar="KIND TARGET CONCURRENCY [QUEUE]")
    args = parser.parse_args()
    if args.worker:
        kind, target, concurrency, *queues = args.worker
        quiet_logs()
        WORKERS[kind](target, int(concurrency), *queues)
        return
    try:
        import asyncpg  # noqa: F401  (PgQueuer's driver)
        import pgqueuer
        import procrastinate
    except ImportError:
        raise SystemExit(
            "this benchmark compares with procrastinate and PgQueuer: "
            "pip install procrastinate pgqueuer asyncpg"
        ) from None
    quiet_logs()
    global oban_python
    oban_python = args.oban_python
    dsn = fresh_database(args.dsn, args.database)
    install_others(dsn)
    oban_version = (
        oban_python
        and subprocess.run(
            [oban_python, "-c", "import oban; print(oban.__version__)"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load_before = os.getloadavg()[0]
    print(
        f"{started}, {os.cpu_count()} cores ({platform.machine()}), "
        f"load average {load_before:.2f}; PostgreSQL at {urlsplit(dsn).hostname}; "
        f"procrastinate {procrastinate.__version__}, PgQueuer {pgqueuer.__version__}, "
        f"{f'Oban {oban_version}' if oban_python else 'no Oban (--oban-python)'}; "
        f"median of {args.runs} runs (range)"
    )
    results: dict[tuple[str, str], list[float]] = {}
    runners = {"jobsched": run_jobsched, "procrastinate": run_procrastinate}
    runners["pgqueuer"] = run_pgqueuer
    if oban_python:
        runners["oban"] = run_oban
    n, batch = args.enqueue_jobs, args.batch
    k, m = args.submitters, args.concurrent_jobs
    for run in range(args.runs):
        if not args.skip_run:
            for procs in (1, 4):
                for system, runner in runners.items():
                    results.setdefault((system, f"run, {procs} proc"), []).append(
                        runner(dsn, args.jobs, procs, args.concurrency, run)
                    )
                # The same jobs over 4 named queues and 100 tenants' groups,
                # which every worker serves: the claims that take queues and
                # groups in turn.
                results.setdefault(("jobsched", f"run, {procs} proc, queues"), []).append(
                    run_jobsched(dsn, args.jobs, procs, args.concurrency, run, 4, 100)
                )
        enqueues: dict[tuple[str, str], Callable[[], Any]] = {
            ("jobsched", "enqueue, batches"): lambda: enqueue_jobsched(
                dsn, n, batch, "submit_many"
            ),
            ("jobsched", "enqueue, concurrent submit"): lambda: enqueue_jobsched(
                dsn, n, batch, "concurrent"
            ),
            ("jobsched", "enqueue, submit loop"): lambda: enqueue_jobsched(
                dsn, args.loop_jobs, batch, "submit loop"
            ),
            ("procrastinate", "enqueue, batches"): lambda: enqueue_procrastinate(dsn, n, batch),
            ("pgqueuer", "enqueue, batches"): lambda: enqueue_pgqueuer(dsn, n, batch),
            ("jobsched", "enqueue, submitters"): lambda: enqueue_jobsched(dsn, m, k, "submitters"),
            ("procrastinate", "enqueue, submitters"): lambda: enqueue_procrastinate_concurrent(
                dsn, m, k
            ),
            ("pgqueuer", "enqueue, submitters"): lambda: enqueue_pgqueuer_concurrent(dsn, m, k),
        }
        if oban_python:
            enqueues[("oban", "enqueue, batches")] = lambda: oban_enqueue("enqueue", dsn, n, batch)
            enqueues[("oban", "enqueue, submitters")] = lambda: oban_enqueue(
                "concurrent", dsn, m, k
            )
        for key, measure in enqueues.items():
            results.setdefault(key, []).append(asyncio.run(measure()))
    table = report(results, args)
    if not args.no_docs:
        versions = f"procrastinate {procrastinate.__version__}, PgQueuer {pgqueuer.__version__}"
        if oban_python:
            versions += f", Oban {oban_version} (Python 3.12)"
        write_docs(
            f"Generated by `python benchmarks/postgres.py` on {started}: "
            f"{os.cpu_count()} cores, PostgreSQL on the same machine, load average "
            f"{load_before:.2f} at the start and {os.getloadavg()[0]:.2f} at the end; "
            f"{versions}; median of {args.runs} runs, range in brackets (the ratio: "
            "the median of each run's pair, measured one after the other).",
            table,
        )


#: What each row measures, as the table says it.
LABELS = {
    "run, 1 proc": "run, 1 process",
    "run, 4 proc": "run, 4 processes",
    "run, 1 proc, queues": "run, 1 process, 4 queues and 100 groups",
    "run, 4 proc, queues": "run, 4 processes, 4 queues and 100 groups",
    "enqueue, batches": "enqueue, batches (jobsched: `Client.submit_many`)",
    "enqueue, concurrent submit": "enqueue, concurrent `Client.submit` (gathered)",
    "enqueue, submit loop": "enqueue, `Client.submit` awaited one by one",
    "enqueue, submitters": "enqueue, concurrent single submits (8 coroutines)",
}

#: The page whose table the script rewrites, between these two lines.
DOCS = "docs/postgres.md"
START = "<!-- benchmarks/postgres.py writes the figures below -->"
END = "<!-- end of benchmarks/postgres.py's figures -->"


def write_docs(header: str, table: list[str]) -> None:
    """Put the latest figures in `DOCS`, between `START` and `END`."""
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), DOCS)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if START not in text or END not in text:
        raise SystemExit(f"{DOCS}: the markers {START!r} and {END!r} are missing")
    before, rest = text.split(START, 1)
    after = rest.split(END, 1)[1]
    block = "\n".join([START, "", header, "", *table, "", END])
    with open(path, "w", encoding="utf-8") as f:
        f.write(before + block + after)
    print(f"wrote the figures into {DOCS}")


def report(results: dict[tuple[str, str], list[float]], args: argparse.Namespace) -> list[str]:
    """Print the table of figures; returns its lines (Markdown)."""
    systems = tuple(
        s
        for s in ("jobsched", "procrastinate", "pgqueuer", "oban")
        if any(s == r[0] for r in results)
    )
    rows = list(dict.fromkeys(what for _, what in results))
    table = [
        f"| jobs/s | {' | '.join(systems)} | jobsched / PgQueuer, per run |",
        f"|---|{'---|' * len(systems)}---|",
    ]
    for what in rows:
        cells = [median(results[s, what]) if (s, what) in results else "" for s in systems]
        # A run is compared with PgQueuer's run of as many processes (one
        # queue), the concurrent submits with its concurrent enqueues, the
        # other ways to enqueue with its batches.
        base = what.removesuffix(", queues")
        if what.startswith("enqueue") and what != "enqueue, submitters":
            base = "enqueue, batches"
        ratio = ""
        if ("jobsched", what) in results and ("pgqueuer", base) in results:
            # Each run's pair, measured one after the other: the machine's
            # load moves both alike, which the ratio of two medians ignores.
            pairs = [
                ours / theirs
                for ours, theirs in zip(
                    results["jobsched", what], results["pgqueuer", base], strict=True
                )
            ]
            ratio = f"{statistics.median(pairs):.2f}x ({min(pairs):.2f}-{max(pairs):.2f})"
        table.append(f"| {LABELS.get(what, what)} | {' | '.join(cells)} | {ratio} |")
    print()
    print("\n".join(table))
    print(
        f"\nrun: {args.jobs} no-op jobs, {args.concurrency} at a time per process; "
        f"enqueue: {args.enqueue_jobs} jobs in batches of {args.batch} "
        f"({args.loop_jobs} for the awaited submit loop), {args.concurrent_jobs} by "
        f"{args.submitters} concurrent submitters; jobsched's concurrent submits are "
        "compared with PgQueuer's concurrent enqueues, its other enqueue rows with "
        "PgQueuer's batch enqueue; the ratio is the median of each run's pair (range)."
    )
    return table


if __name__ == "__main__":
    main()
