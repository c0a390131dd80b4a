"""``jobsched store sql``: the schema as SQL a DBA applies; a store opened on
what it printed migrates nothing and matches a schema the store made."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from jobsched import Client, JobPriority, JobScheduler, JobStatus
from jobsched.cli import main
from jobsched_plugins.postgres_store import migrations as pg_migrations
from jobsched_plugins.sqlite_store import migrations as sqlite_migrations
from pg_support import base_dsn, with_query
from test_cli import assert_bad_input, jobsched


def sql(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["store", "sql", *args]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    return out


@pytest.fixture
def schema() -> Iterator[str]:
    """A fresh schema name, dropped after the test (the script creates it)."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    try:
        yield name
    finally:
        with psycopg.connect(base_dsn(), autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def pg_shape(conn: psycopg.Connection[Any], schema: str) -> dict[str, list[Any]]:
    """What a schema holds: columns, indexes, triggers, functions, versions
    (named without the schema, to compare two)."""

    def rows(query: str) -> list[Any]:
        found = conn.execute(query, [schema]).fetchall()
        return sorted(tuple(str(v).replace(schema, "S") for v in row) for row in found)

    return {
        "columns": rows(
            "SELECT table_name, column_name, data_type, is_nullable, column_default "
            "FROM information_schema.columns WHERE table_schema = %s"
        ),
        "indexes": rows("SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s"),
        "triggers": rows(
            "SELECT trigger_name, event_manipulation, action_statement "
            "FROM information_schema.triggers WHERE trigger_schema = %s"
        ),
        "functions": rows(
            "SELECT p.proname, p.prosrc FROM pg_proc p JOIN pg_namespace n "
            "ON n.oid = p.pronamespace WHERE n.nspname = %s"
        ),
        "versions": rows("SELECT 1 FROM pg_namespace WHERE nspname = %s"),
    }


def versions(conn: psycopg.Connection[Any], schema: str) -> list[int]:
    return [r[0] for r in conn.execute(f'SELECT version FROM "{schema}".schema_version ORDER BY 1')]


async def test_the_postgres_script_applied_with_psql_is_the_stores_own_schema(
    capsys: pytest.CaptureFixture[str], schema: str, pg_schema: tuple[str, str]
) -> None:
    script = sql(capsys, "--schema", schema)
    assert f'CREATE SCHEMA IF NOT EXISTS "{schema}";' in script
    applied = subprocess.run(
        ["psql", base_dsn(), "-v", "ON_ERROR_STOP=1", "-q"],
        input=script,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert applied.returncode == 0, applied.stderr
    every = list(range(1, pg_migrations.SCHEMA_VERSION + 1))
    async with Client(with_query(base_dsn(), schema=schema)), Client(pg_schema[0]):
        pass  # opened: a schema to migrate would gain rows in schema_version
    with psycopg.connect(base_dsn()) as conn:
        assert versions(conn, schema) == every  # nothing was migrated on open
        assert pg_shape(conn, schema) == pg_shape(conn, pg_schema[1])


def test_from_a_version_prints_only_the_later_steps(
    capsys: pytest.CaptureFixture[str], schema: str, pg_schema: tuple[str, str]
) -> None:
    last = pg_migrations.SCHEMA_VERSION
    before = sql(capsys, "--schema", schema, "--from", str(last - 1))
    assert f"-- version {last}\n" in before and f"-- version {last - 1}\n" not in before
    assert "CREATE SCHEMA" not in before
    assert sql(capsys, "--schema", schema, "--from", str(last)).count(";") == 3  # nothing to do
    full = sql(capsys, "--schema", schema)
    # The whole script up to the version before, then the steps after it.
    upto = full.split(f"-- version {last}\n")[0] + "COMMIT;\n"
    with psycopg.connect(base_dsn(), autocommit=True) as conn:
        conn.execute(upto)
        assert versions(conn, schema)[-1] == last - 1
        conn.execute(before)
        assert versions(conn, schema)[-1] == last


async def test_the_sqlite_script_makes_a_shared_file_the_store_opens_as_it_is(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    script = sql(capsys, "--store", "sqlite")
    by_script = tmp_path / "script.db"
    applied = subprocess.run(
        ["sqlite3", str(by_script)], input=script, capture_output=True, text=True, timeout=60
    )
    assert applied.returncode == 0, applied.stderr
    by_store = tmp_path / "store.db"
    before = sqlite_shape(by_script)
    for path in (by_script, by_store):
        async with Client(f"sqlite:///{path}"):
            pass
    assert sqlite_shape(by_script) == before == sqlite_shape(by_store)
    assert before["meta"] == [
        ("mode", "shared"),
        ("schema_version", str(sqlite_migrations.SCHEMA_VERSION)),
    ]


def sqlite_shape(path: Path) -> dict[str, list[Any]]:
    with sqlite3.connect(path) as conn:
        return {
            "schema": sorted(conn.execute("SELECT type, name, sql FROM sqlite_master")),
            # (opened_by: who opened it last, written at every open)
            "meta": sorted(
                conn.execute("SELECT name, value FROM jobsched_meta WHERE name <> 'opened_by'")
            ),
            "journal": list(conn.execute("PRAGMA journal_mode")),
        }


def test_sqlite_from_a_version(capsys: pytest.CaptureFixture[str]) -> None:
    last = sqlite_migrations.SCHEMA_VERSION
    text = sql(capsys, "--store", "sqlite:///anything.db", "--from", str(last - 1))
    assert f"-- version {last}\n" in text and "CREATE TABLE jobsched_meta" not in text
    assert f"UPDATE jobsched_meta SET value = '{last}'" in text


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--from", "x"], "argument --from: 'x' is not a schema version"),
        (["--from", "99"], "--from 99: a PostgreSQL schema version is 0 (none) to"),
        (["--store", "sqlite", "--from", "1"], "--from 1: a shared SQLite file's schema"),
        (["--schema", "Bad-Name"], "schema 'Bad-Name' must be a lower-case identifier"),
        (["--store", "sqlite", "--schema", "x"], "--schema 'x': only a PostgreSQL store"),
        (["--store", "memory://"], "--store 'memory://': this store has no schema"),
        (["--store", "nosuch://x"], "nosuch"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(
    capsys: pytest.CaptureFixture[str], args: list[str], fragment: str
) -> None:
    try:
        code = main(["store", "sql", *args])
    except SystemExit as usage:  # argparse's own errors exit from the parser
        code = int(usage.code or 0)
    out, err = capsys.readouterr()
    assert_bad_input(subprocess.CompletedProcess(args, code, out, err), fragment)


def test_the_console_script_prints_it() -> None:
    done = jobsched("store", "sql", "--store", "sqlite")
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout.startswith("-- jobsched shared SQLite store: version 0 to")


# ── docs/postgres.md: a job inserted with plain SQL ──────────────────────
def sql_example() -> str:
    text = (Path(__file__).resolve().parent.parent / "docs" / "postgres.md").read_text()
    (body,) = re.findall(r"```sql\n(-- file: enqueue\.sql\n.*?)```", text, flags=re.S)
    return body


async def test_the_documented_plain_sql_insert_is_run_by_a_waiting_worker(
    pg_schema: tuple[str, str],
) -> None:
    url, schema = pg_schema
    script = sql_example().replace("jobsched.jobs", f'"{schema}".jobs')
    script = script.replace("jobsched.sort_key(", f'"{schema}".sort_key(')
    script = script.replace("'jobsched_jobsched'", f"'jobsched_{schema}'")
    async with JobScheduler(store=url, shared=True), Client(url) as client:
        applied = subprocess.run(
            ["psql", base_dsn(), "-v", "ON_ERROR_STOP=1", "-q"],
            input=script,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert applied.returncode == 0, applied.stderr
        (stored,) = await client.jobs()
        done = await client.wait(stored.job_id, timeout=30)
    assert stored.job_id.startswith("sql-")
    assert (done.status, done.result, done.name) == (
        JobStatus.COMPLETED,
        "sent to ada@example.com",
        "welcome mail",
    )
    assert done.priority is JobPriority.MEDIUM
