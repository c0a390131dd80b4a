"""Rows changed by hand, and stores a newer jobsched migrated (issue 20 items 2
and 12, issue 21 item 10).

Every column a reader decodes, of every table of each store format (the
single-owner SQLite journal, the shared SQLite file, PostgreSQL), is
corrupted in turn, in a copy (SQLite) or in place and then put back
(PostgreSQL): the
CLI readers exit 2 with one line naming the row and the column, the
`Client` raises `BadRowError` saying the same, never a traceback. A worker
fails a tampered job and runs the others; a background task of a worker that
dies is logged and started again; a worker on a store a newer jobsched
migrated stops, naming both versions.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from jobsched import Client, JobScheduler, StoreError, build_job
from jobsched.backends import shared as shared_backend
from jobsched.cli import main
from jobsched.store import BadRowError, SchemaTooNewError
from jobsched.worker import run_worker
from jobsched_plugins.postgres_store.migrations import SCHEMA_VERSION as PG_VERSION
from jobsched_plugins.sqlite_store.migrations import SCHEMA_VERSION as SQLITE_VERSION
from jobsched_plugins.sqlite_store.queries import BASE_JOB_COLUMNS
from kernel_support import captured_logs
from pg_support import base_dsn, with_query

TIMEOUT = 30.0


def sleep_job(name: str) -> Any:
    return build_job("sleep", {"name": name, "seconds": 0})


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    """``jobsched ARGV`` in this process: its exit code and its stderr."""
    code = main(list(argv))
    return code, capsys.readouterr().err


def assert_named(code: int, err: str, *names: str) -> None:
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for name in names:
        assert name in err, err


# ── the shared stores: SQLite in shared mode, PostgreSQL ───────────────
class SharedTarget:
    """A filled shared store, and plain SQL on its tables."""

    def __init__(self, kind: str, url: str, schema: str = "") -> None:
        self.kind = kind
        self.url = url
        self.schema = schema
        self.ids: dict[str, str] = {}

    def table(self, name: str) -> str:
        if self.kind == "sqlite":
            return f"jobsched_shared_{name}"
        return f'"{self.schema}".{name}'

    def sql(self, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        if self.kind == "sqlite":
            path = self.url.removeprefix("sqlite:///")
            with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
                return [tuple(r) for r in conn.execute(statement.replace("%s", "?"), params)]
        with psycopg.connect(base_dsn(), autocommit=True) as conn:
            cur = conn.execute(statement.encode(), params)
            return [tuple(r) for r in cur.fetchall()] if cur.description else []

    async def fill(self) -> None:
        """Job ``a`` completed with a result and an attempt, ``b`` waiting for
        it, a recurring schedule, and the cluster's limits."""
        async with Client(self.url) as client:
            a = await client.submit(sleep_job("a"))
            b = await client.submit(sleep_job("b"), depends_on=[a])
            sched = await client.add_schedule(sleep_job("s"), every=3600, start_in=3600)
        self.ids = {"a": a, "b": b, "sched": sched}
        jobs, attempts, limits = (self.table(n) for n in ("jobs", "attempts", "limits"))
        self.sql(
            f"UPDATE {jobs} SET status = 'completed', result = '{{\"n\": 1}}', attempts = 1, "
            "started_at = 1.0, finished_at = 2.0, progress = '{\"done\": 1}', "
            "result_expires = 9e9 WHERE job_id = %s",
            (a,),
        )
        self.sql(
            f"INSERT INTO {attempts} (job_id, number, status, error, started_at, finished_at, "
            "worker) VALUES (%s, 1, 'completed', NULL, 1.0, 2.0, 'w')",
            (a,),
        )
        self.sql(f"INSERT INTO {limits} (id, data) VALUES (1, '{{}}')")


#: (table, column, bad value on SQLite, bad value on PostgreSQL or None where
#: its column type cannot hold a bad one, the row: "a", "b", "sched", "limits").
SHARED_CASES = [
    ("jobs", "job_id", "x'00ff'", None, "a"),  # PostgreSQL: its foreign keys hold it
    ("jobs", "key", "x'00ff'", None, "a"),
    ("jobs", "type", "x'00ff'", "''", "a"),
    ("jobs", "args", "'nope'", "'[1, 2]'", "a"),
    ("jobs", "options", "'null'", "'\"str\"'", "a"),
    ("jobs", "status", "'zzz'", "'zzz'", "a"),
    ("jobs", "attempts", "'zzz'", "-1", "a"),
    ("jobs", "run_at", "'zzz'", "'NaN'", "a"),
    ("jobs", "submitted_at", "'zzz'", "'Infinity'", "a"),
    ("jobs", "seq", "-1", "-1", "a"),
    ("jobs", "sort_key", "1.5", "'\\x00ff'", "a"),  # PostgreSQL: 2 bytes, no key
    ("jobs", "unmet", "'zzz'", "-1", "b"),
    ("jobs", "lease_owner", "x'00ff'", None, "a"),
    ("jobs", "lease_expires", "'zzz'", "'NaN'", "a"),
    ("jobs", "cancel_requested", "7", None, "a"),
    ("jobs", "result", "'{'", None, "a"),
    ("jobs", "last_error", "x'00ff'", None, "a"),
    ("jobs", "schedule_id", "x'00ff'", None, "a"),
    ("jobs", "submitted_by", "x'00ff'", None, "a"),
    ("jobs", "started_at", "'zzz'", "'NaN'", "a"),
    ("jobs", "finished_at", "'zzz'", "'NaN'", "a"),
    ("jobs", "unique_key", "x'00ff'", None, "a"),
    ("jobs", "progress", "'{'", "'[1]'", "a"),
    ("jobs", "result_expires", "'zzz'", "'NaN'", "a"),
    ("jobs", "trigger_rule", "'zzz'", "'zzz'", "b"),
    ("schedules", "schedule_id", "x'00ff'", "''", "sched"),
    ("schedules", "type", "x'00ff'", "''", "sched"),
    ("schedules", "args", "'nope'", "'[1]'", "sched"),
    ("schedules", "options", "'\"str\"'", "'null'", "sched"),
    ("schedules", "trigger", "'-1'", "'-1'", "sched"),
    ("schedules", "next_run", "'zzz'", "'NaN'", "sched"),
    ("schedules", "allow_overlap", "7", None, "sched"),
    ("schedules", "active", "7", None, "sched"),
    ("schedules", "last_job_id", "x'00ff'", None, "sched"),
    ("schedules", "fired", "'zzz'", "-1", "sched"),
    ("schedules", "skipped", "-1", "-1", "sched"),
    ("schedules", "paused", "7", None, "sched"),
    ("attempts", "number", "'zzz'", "-1", "a"),
    ("attempts", "status", "x'00ff'", "''", "a"),
    ("attempts", "error", "x'00ff'", None, "a"),
    ("attempts", "started_at", "'zzz'", "'NaN'", "a"),
    ("attempts", "finished_at", "'zzz'", "'NaN'", "a"),
    ("attempts", "worker", "x'00ff'", None, "a"),
    ("dependencies", "upstream", "x'00ff'", None, "b"),
    ("limits", "data", "'[1, 2]'", "'[1, 2]'", "limits"),
]


def _where(target: SharedTarget, table: str, row: str) -> tuple[str, tuple[Any, ...]]:
    if table == "limits":
        return "id = 1", ()
    if table == "schedules":
        return "schedule_id = %s", (target.ids["sched"],)
    return "job_id = %s", (target.ids[row],)


def _expected(target: SharedTarget, table: str, column: str, row: str) -> list[str]:
    """What the error must name: the row (unless its id is what was tampered
    with) and the column."""
    if table == "limits":
        return ["limits row 1", column]
    if column in ("job_id", "schedule_id"):
        return [column]
    if table == "dependencies":
        return [f"job {target.ids[row]}", "depends_on"]
    if table == "schedules":
        return [f"recurring schedule {target.ids['sched']}", column]
    return [f"job {target.ids[row]}", column] + (["history"] if table == "attempts" else [])


def _client_reads(
    target: SharedTarget, table: str, column: str, row: str
) -> list[Callable[..., Any]]:
    """The Client calls that read the tampered table."""
    if column == "job_id":
        return [lambda c: c.jobs()]  # by its id, the job is gone
    if table == "jobs":
        return [lambda c: c.jobs(), lambda c: c.get(target.ids[row])]
    if table == "schedules":
        return [lambda c: c.schedules()]
    if table == "limits":
        return [lambda c: c.stats()]
    return [lambda c: c.get(target.ids[row])]


#: The columns ``jobsched status`` reads from a shared SQLite file (it reads
#: files no process has migrated yet: schema version 2's).
_STATUS_COLUMNS = {c.strip() for c in BASE_JOB_COLUMNS.split(",")} | {"trigger_rule"}


def _cli_reads(target: SharedTarget, table: str, column: str) -> list[list[str]]:
    url = target.url
    if table == "jobs" and (target.kind == "postgresql" or column in _STATUS_COLUMNS):
        return [
            ["status", "--store", url],
            ["status", "--store", url, "--json"],
            ["jobs", "requeue", "--store", url],
        ]
    if table == "schedules":
        return [
            ["schedules", "list", "--store", url],
            ["schedules", "list", "--store", url, "--json"],
        ]
    return []


async def _check_readers(
    target: SharedTarget, case: tuple[str, str, str, str | None, str], capsys: Any
) -> None:
    table, column, _, _, row = case
    names = _expected(target, table, column, row)
    for argv in _cli_reads(target, table, column):
        code, err = await asyncio.to_thread(cli, capsys, *argv)
        assert_named(code, err, target.url.split("?")[0], *names)
    async with Client(target.url) as client:
        for read in _client_reads(target, table, column, row):
            with pytest.raises(BadRowError) as raised:
                await read(client)
            for name in names:
                assert name in str(raised.value)
            assert target.url.split("?")[0] in str(raised.value)


@pytest.fixture(scope="module")
def sqlite_source(tmp_path_factory: pytest.TempPathFactory) -> SharedTarget:
    path = tmp_path_factory.mktemp("shared") / "jobs.db"
    target = SharedTarget("sqlite", f"sqlite:///{path}")
    asyncio.run(target.fill())
    return target


@pytest.mark.parametrize("case", SHARED_CASES, ids=lambda c: f"{c[0]}.{c[1]}")
def test_a_tampered_shared_sqlite_row_is_named_by_every_reader(
    case: tuple[str, str, str, str | None, str],
    sqlite_source: SharedTarget,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "jobs.db"
    shutil.copy(sqlite_source.url.removeprefix("sqlite:///"), path)
    target = SharedTarget("sqlite", f"sqlite:///{path}")
    target.ids = sqlite_source.ids
    table, column, value, _, row = case
    where, params = _where(target, table, row)
    target.sql(f"UPDATE {target.table(table)} SET {column} = {value} WHERE {where}", params)
    asyncio.run(_check_readers(target, case, capsys))


@pytest.fixture(scope="module")
def pg_source() -> Iterator[SharedTarget]:
    """One filled schema for every PostgreSQL case (each puts its row back)."""
    dsn = base_dsn()
    schema = f"t_{uuid.uuid4().hex[:12]}"
    target = SharedTarget("postgresql", with_query(dsn, schema=schema), schema)
    try:
        asyncio.run(target.fill())
        yield target
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.mark.parametrize(
    "case", [c for c in SHARED_CASES if c[3] is not None], ids=lambda c: f"{c[0]}.{c[1]}"
)
def test_a_tampered_postgres_row_is_named_by_every_reader(
    case: tuple[str, str, str, str | None, str],
    pg_source: SharedTarget,
    capsys: pytest.CaptureFixture[str],
) -> None:
    table, column, _, value, row = case
    where, params = _where(pg_source, table, row)
    name = pg_source.table(table)
    [(before, kind)] = pg_source.sql(
        f"SELECT {column}::text, pg_typeof({column})::text FROM {name} WHERE {where}", params
    )
    pg_source.sql(f"UPDATE {name} SET {column} = {value} WHERE {where}", params)
    try:
        if column == "schedule_id":
            where, params = "schedule_id = %s", ("",)
        asyncio.run(_check_readers(pg_source, case, capsys))
    finally:
        pg_source.sql(
            f"UPDATE {name} SET {column} = CAST(%s AS {kind}) WHERE {where}", (before, *params)
        )


# ── the single-owner SQLite journal ────────────────────────────────────
@pytest.fixture(scope="module")
def journal_source(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A journal with a completed job ``a``, a job ``b`` waiting for it past
    a delay, and a recurring schedule that fired once."""
    path = tmp_path_factory.mktemp("journal") / "jobs.db"

    async def fill() -> dict[str, str]:
        s = JobScheduler(store=f"sqlite:///{path}")
        await s.start()
        a = s.submit(sleep_job("a"))
        b = s.submit(sleep_job("b"), delay=3600, depends_on=[a])
        sched = s.schedule_recurring(lambda: sleep_job("s"), 3600, start_in=0.0)
        [schedule] = s.recurring()
        await _until(lambda: s.get(a).status.value == "completed" and schedule.fired == 1)
        await s.stop()
        return {"a": a, "b": b, "sched": sched}

    return path, asyncio.run(fill())


#: (table, column, bad value, the row).
JOURNAL_CASES = [
    ("jobs", "job_id", "x'00ff'", "a"),
    ("jobs", "key", "x'00ff'", "a"),
    ("jobs", "type", "x'00ff'", "b"),
    ("jobs", "args", "'nope'", "b"),
    ("jobs", "options", "'null'", "b"),
    ("jobs", "depends_on", "'nope'", "b"),
    ("jobs", "status", "'zzz'", "a"),
    ("jobs", "attempts", "'zzz'", "a"),
    ("jobs", "run_at", "'zzz'", "b"),
    ("jobs", "submitted_at", "'zzz'", "a"),
    ("jobs", "finished_at", "'zzz'", "a"),
    ("jobs", "seq", "-1", "a"),
    ("jobs", "result", "'{'", "a"),
    ("jobs", "last_error", "x'00ff'", "a"),
    ("jobs", "schedule_id", "x'00ff'", "a"),
    ("jobs", "trigger_rule", "'zzz'", "b"),
    ("schedules", "schedule_id", "x'00ff'", "sched"),
    ("schedules", "key", "x'00ff'", "sched"),
    ("schedules", "template", "'\"str\"'", "sched"),
    ("schedules", "trigger", "'-1'", "sched"),
    ("schedules", "next_run", "'zzz'", "sched"),
    ("schedules", "allow_overlap", "7", "sched"),
    ("schedules", "active", "7", "sched"),
    ("schedules", "last_job_id", "x'00ff'", "sched"),
    ("schedules", "fired", "'zzz'", "sched"),
    ("schedules", "skipped", "-1", "sched"),
    ("schedules", "paused", "7", "sched"),
]


@pytest.mark.parametrize("case", JOURNAL_CASES, ids=lambda c: f"{c[0]}.{c[1]}")
def test_a_tampered_journal_row_is_named_by_every_reader(
    case: tuple[str, str, str, str],
    journal_source: tuple[Path, dict[str, str]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    source, ids = journal_source
    path = tmp_path / "jobs.db"
    shutil.copy(source, path)
    table, column, value, row = case
    key = "schedule_id" if table == "schedules" else "job_id"
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute(f"UPDATE jobsched_{table} SET {column} = {value} WHERE {key} = ?", (ids[row],))
    what = "recurring schedule" if table == "schedules" else "job"
    names = [column] if column == key else [f"{what} {ids[row]}", column]
    url = f"sqlite:///{path}"
    for argv in (["status", "--store", url], ["status", "--store", url, "--json"]):
        assert_named(*cli(capsys, *argv), str(path), *names)

    async def restore() -> None:
        await JobScheduler(store=url).start()

    with pytest.raises(StoreError) as raised:
        asyncio.run(restore())
    for name in names:
        assert name in str(raised.value)


# ── a worker and a tampered row ────────────────────────────────────────
@pytest.fixture(params=["sqlite", "postgresql"])
def fresh(request: pytest.FixtureRequest, tmp_path: Path) -> SharedTarget:
    """An empty shared store of each kind."""
    if request.param == "postgresql":
        url, schema = request.getfixturevalue("pg_schema")
        return SharedTarget("postgresql", url, schema)
    return SharedTarget("sqlite", f"sqlite:///{tmp_path / 'jobs.db'}")


async def _until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def worker(url: str) -> AsyncIterator[JobScheduler]:
    s = JobScheduler(store=url, shared=True, num_workers=2)
    await s.start()
    try:
        yield s
    finally:
        await s.stop()


#: Per store kind: the columns of three claimable jobs tampered with before a
#: worker starts. The issue's rows first: arguments that are no mapping
#: (PostgreSQL), or no JSON at all (SQLite, where every claim used to fail,
#: naming nothing).
WORKER_TAMPERING = {
    "postgresql": [("args", "'[1,2]'"), ("options", "'\"str\"'"), ("sort_key", "'\\x00ff'")],
    "sqlite": [("args", "'nope'"), ("options", "'null'"), ("sort_key", "1.5")],
}


async def test_a_worker_fails_a_tampered_job_and_runs_the_others(fresh: SharedTarget) -> None:
    async with Client(fresh.url) as client:
        ids = [await client.submit(sleep_job(f"j{i}")) for i in range(6)]
        tampered = dict(zip(ids[1::2], WORKER_TAMPERING[fresh.kind], strict=True))
        for job_id, (column, value) in tampered.items():
            fresh.sql(
                f"UPDATE {fresh.table('jobs')} SET {column} = {value} WHERE job_id = %s", (job_id,)
            )
        good = [i for i in ids if i not in tampered]
        async with worker(fresh.url):
            done = await client.wait_many(good, timeout=TIMEOUT)
            assert [j.status.value for j in done] == ["completed"] * 3

            def ended() -> dict[str, tuple[str, str]]:
                rows = fresh.sql(f"SELECT job_id, status, last_error FROM {fresh.table('jobs')}")
                return {r[0]: (r[1], r[2]) for r in rows if r[0] in tampered}

            await _until(lambda: all(s == "failed" for s, _ in ended().values()))
            for job_id, (_, error) in ended().items():
                column = tampered[job_id][0]
                assert error.startswith("BadRowError: ") and f"job {job_id}" in error, error
                assert f"its {column}" in error, error
            # The worker claims on: a job submitted now runs.
            later = await client.submit(sleep_job("later"))
            [info] = await client.wait_many([later], timeout=TIMEOUT)
            assert info.status.value == "completed"


async def test_a_background_task_that_dies_is_logged_and_started_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    monkeypatch.setattr(shared_backend, "RESTART_PAUSE", 0.0)
    real = shared_backend.SharedBackend._with_results
    failures = [RuntimeError("feeder bug")]

    async def once_broken(self: Any, rows: Any) -> Any:
        if failures:
            raise failures.pop()
        return await real(self, rows)

    monkeypatch.setattr(shared_backend.SharedBackend, "_with_results", once_broken)
    with captured_logs() as logs:
        async with Client(url) as client, worker(url):
            await _until(lambda: not failures)  # the feeder died
            job = await client.submit(sleep_job("after"))
            [info] = await client.wait_many([job], timeout=TIMEOUT)
    assert info.status.value == "completed"
    [died] = [e for e in logs if e["event"] == "background task died; restarting it"]
    assert died["task"] == "feeder" and died["log_level"] == "error"
    assert died.get("exc_info") is True


# ── a store a newer jobsched migrated ──────────────────────────────────
def _newer(target: SharedTarget) -> int:
    """Mark the store as migrated past this code; the version it says."""
    if target.kind == "sqlite":
        target.sql("UPDATE jobsched_meta SET value = '99' WHERE name = 'schema_version'")
    else:
        target.sql(f"INSERT INTO {target.table('schema_version')} (version) VALUES (99)")
    return 99


def _known(target: SharedTarget) -> int:
    return SQLITE_VERSION if target.kind == "sqlite" else PG_VERSION


def test_a_worker_and_a_client_refuse_a_newer_store_at_start(
    fresh: SharedTarget, capsys: pytest.CaptureFixture[str]
) -> None:
    async def create() -> None:
        await Client(fresh.url).open()

    asyncio.run(create())
    _newer(fresh)
    capsys.readouterr()
    code, err = cli(capsys, "worker", "--store", fresh.url)
    assert_named(code, err, "99", str(_known(fresh)))
    with pytest.raises(SchemaTooNewError) as raised:
        asyncio.run(create())
    assert (raised.value.found, raised.value.known) == (99, _known(fresh))


async def test_a_worker_stops_when_a_newer_jobsched_migrates_the_store_under_it(
    fresh: SharedTarget,
) -> None:
    async with Client(fresh.url) as client:
        await client.pause_queue()  # the job below is claimed only once the schema moved
        stop = asyncio.Event()
        running = asyncio.create_task(run_worker(fresh.url, workers=1, stop=stop))
        try:
            # What a newer jobsched's migration might do: a column the claim
            # reads is gone (SQLite) or one it does not know is there.
            if fresh.kind == "sqlite":
                fresh.sql("ALTER TABLE jobsched_shared_jobs RENAME COLUMN progress TO progress_v9")
            else:
                fresh.sql(f"ALTER TABLE {fresh.table('jobs')} ADD COLUMN newer text")
            _newer(fresh)
            await client.submit(sleep_job("j"))
            await client.resume_queue()
            with pytest.raises(SchemaTooNewError) as raised:
                await asyncio.wait_for(running, TIMEOUT)
        finally:
            stop.set()
            with contextlib.suppress(BaseException):
                await running
    assert (raised.value.found, raised.value.known) == (99, _known(fresh))
    assert "99" in str(raised.value) and str(_known(fresh)) in str(raised.value)
