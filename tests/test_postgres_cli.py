"""``jobsched worker``, ``jobsched run FILE --store`` and ``jobsched status`` on PostgreSQL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from worker_support import wait_started

pytestmark = pytest.mark.slow

JOBFILE = """
[scheduler]
workers = 2

[[job]]
id = "first"
type = "email"
args = { to = "a@example.com", subject = "one" }

[[job]]
id = "second"
type = "email"
args = { to = "b@example.com", subject = "two" }
depends_on = ["first"]

[[job]]
id = "nap"
type = "sleep"
args = { name = "nap", seconds = 0.01 }
"""


def jobsched(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jobsched", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def start_worker(url: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jobsched",
            "worker",
            "--store",
            url,
            "--workers",
            "2",
            "--grace",
            "0",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )


def test_run_a_job_file_on_workers_and_resume_it(
    pg_schema: tuple[str, str], tmp_path: Path
) -> None:
    url = pg_schema[0]
    path = tmp_path / "jobs.toml"
    path.write_text(JOBFILE)
    worker = start_worker(url)
    try:
        identity = wait_started(worker)
        assert identity == f"{os.uname().nodename}:{worker.pid}"
        done = jobsched("run", str(path), "--store", url, "--json")
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert [(j["id"], j["status"]) for j in report["jobs"]] == [
            ("first", "completed"),
            ("second", "completed"),
            ("nap", "completed"),
        ]
        # The same file again resumes: same job ids, nothing runs twice.
        again = json.loads(jobsched("run", str(path), "--store", url, "--json").stdout)
        assert [j["job_id"] for j in again["jobs"]] == [j["job_id"] for j in report["jobs"]]
        status = json.loads(jobsched("status", "--store", url, "--json").stdout)["jobs"]
        assert len(status) == 3 and {r["status"] for r in status} == {"completed"}
        assert all(r["attempts"] == 1 for r in status)
    finally:
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=60) == 0


def test_a_shared_run_summary_claims_no_peak_it_cannot_know(
    pg_schema: tuple[str, str], tmp_path: Path
) -> None:
    # Worker processes ran the jobs: "peak 0 running (2 workers, ...)" was untrue.
    url = pg_schema[0]
    path = tmp_path / "jobs.toml"
    path.write_text(JOBFILE)
    worker = start_worker(url)
    try:
        wait_started(worker)
        table = jobsched("run", str(path), "--store", url)
        assert table.returncode == 0, table.stderr
        totals = table.stdout.splitlines()[-1]
        assert totals.startswith("3 jobs in ") and "3 completed" in totals
        assert "peak" not in totals and "workers," not in totals
        assert totals.endswith("run by `jobsched worker` processes")
        doc = json.loads(jobsched("run", str(path), "--store", url, "--json").stdout)
        assert doc["peak_running"] is None
        order = {j["id"]: j["start_order"] for j in doc["jobs"]}
        assert order["first"] < order["second"], "second depends on first"
    finally:
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=60) == 0


def test_status_shows_which_process_holds_a_running_job(
    pg_schema: tuple[str, str], tmp_path: Path
) -> None:
    url = pg_schema[0]
    path = tmp_path / "long.toml"
    path.write_text(
        '[[job]]\nid = "long"\ntype = "sleep"\nargs = { name = "long", seconds = 3600 }\n'
        "timeout = false\ncancel_after = 30\n"
    )
    worker = start_worker(url)
    runner = None
    try:
        identity = wait_started(worker)
        runner = subprocess.Popen(
            [sys.executable, "-m", "jobsched", "run", str(path), "--store", url, "--json"],
            stdout=subprocess.PIPE,
            text=True,
        )
        give_up = time.monotonic() + 60
        while True:
            rows = json.loads(jobsched("status", "--store", url, "--json").stdout)["jobs"]
            if rows and rows[0]["status"] == "running":
                break
            assert time.monotonic() < give_up, rows
            time.sleep(0.05)
        assert rows[0]["held_by"] == identity
        assert 0 < rows[0]["lease_expires_in"] <= 30
        table = jobsched("status", "--store", url).stdout
        assert identity in table and "running" in table
        runner.send_signal(signal.SIGINT)  # the follower stops; the job stays with the worker
        assert runner.wait(timeout=60) == 130
        worker.send_signal(signal.SIGTERM)  # --grace 0: interrupted and handed back
        assert worker.wait(timeout=60) == 0
        rows = json.loads(jobsched("status", "--store", url, "--json").stdout)["jobs"]
        assert (rows[0]["status"], rows[0]["held_by"], rows[0]["attempts"]) == (
            "retry_wait",
            None,
            1,
        )
        assert rows[0]["error"] == "scheduler shut down"
    finally:
        for proc in (runner, worker):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()


def test_bad_store_urls_are_bad_input(pg_schema: tuple[str, str], tmp_path: Path) -> None:
    # SQLite files can be shared (on one host); the memory store cannot.
    result = jobsched("worker", "--store", "memory://")
    assert result.returncode == 2
    assert "is not a store several processes can share" in result.stderr
    result = jobsched("status", "--store", "nosuch://x")
    assert result.returncode == 2 and "nosuch" in result.stderr
    result = jobsched("worker", "--store", pg_schema[0], "--workers", "0")
    assert result.returncode == 2 and "--workers must be at least 1" in result.stderr


RECURRING = """
[scheduler]
workers = 2

[[job]]
id = "once"
type = "sleep"
args = { name = "once", seconds = 0 }

[[recurring]]
id = "tick"
type = "sleep"
args = { name = "tick", seconds = 0 }
every = "20ms"
times = 3

[[recurring]]
id = "window"
type = "sleep"
args = { name = "window", seconds = 0 }
trigger = { interval = 0.05 }
until = "200ms"
allow_overlap = true
"""


def test_run_a_job_file_with_recurring_entries_on_workers(
    pg_schema: tuple[str, str], tmp_path: Path
) -> None:
    url = pg_schema[0]
    path = tmp_path / "recurring.toml"
    path.write_text(RECURRING)
    worker = start_worker(url)
    try:
        wait_started(worker)
        done = jobsched("run", str(path), "--store", url, "--json")
        assert done.returncode == 0, done.stderr
        jobs = json.loads(done.stdout)["jobs"]
        assert [(j["id"], j["status"]) for j in jobs if j["recurring"] is None] == [
            ("once", "completed")
        ]
        ticks = [j for j in jobs if j["recurring"] == "tick"]
        assert [(j["id"], j["status"]) for j in ticks] == [
            ("tick#1", "completed"),
            ("tick#2", "completed"),
            ("tick#3", "completed"),
        ]
        window = [j for j in jobs if j["recurring"] == "window"]
        # However many periods fit before `until`, each ran once and finished.
        assert [j["id"] for j in window] == [f"window#{n}" for n in range(1, len(window) + 1)]
        assert {j["status"] for j in window} <= {"completed"}
        status = json.loads(jobsched("status", "--store", url, "--json").stdout)["jobs"]
        assert len(status) == 1 + 3 + len(window)
        assert {r["status"] for r in status} == {"completed"}
        # The same file again resumes: `times` counts across runs (tick fires no
        # more); `until` counts from each run's start (window may fire again).
        again = json.loads(jobsched("run", str(path), "--store", url, "--json").stdout)["jobs"]
        assert [j["job_id"] for j in again if j["recurring"] != "window"] == [
            j["job_id"] for j in jobs if j["recurring"] != "window"
        ]
        assert [j["job_id"] for j in again if j["recurring"] == "window"][: len(window)] == [
            j["job_id"] for j in window
        ]
    finally:
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=60) == 0


def test_recurring_options_a_shared_store_cannot_honour_are_bad_input(
    pg_schema: tuple[str, str], tmp_path: Path
) -> None:
    path = tmp_path / "jitter.toml"
    path.write_text(
        '[[recurring]]\nid = "j"\ntype = "sleep"\nargs = { name = "j", seconds = 0 }\n'
        'every = "1s"\ntimes = 2\njitter = "1s"\ncoalesce = "all"\n'
    )
    result = jobsched("run", str(path), "--store", pg_schema[0])
    assert result.returncode == 2
    assert "jitter" in result.stderr and "coalesce" in result.stderr
    assert "not supported with a shared store" in result.stderr


def test_status_of_a_schema_that_does_not_exist_creates_nothing(
    pg_schema: tuple[str, str],
) -> None:
    import psycopg

    from pg_support import base_dsn, with_query

    typo = pg_schema[1] + "_typo"
    url = with_query(base_dsn(), schema=typo)
    result = jobsched("status", "--store", url)
    assert result.returncode == 2
    assert f"schema {typo!r} does not exist" in result.stderr
    with psycopg.connect(base_dsn()) as conn:
        found = conn.execute(
            "SELECT count(*) FROM information_schema.schemata WHERE schema_name = %s", [typo]
        ).fetchone()
    assert found == (0,)


def test_a_job_files_limits_become_the_clusters(pg_schema: tuple[str, str], tmp_path: Path) -> None:
    import asyncio

    from jobsched_plugins.postgres_store import PostgresStore

    url = pg_schema[0]
    job = '[[job]]\nid = "a"\ntype = "sleep"\nargs = { name = "a", seconds = 0 }\n'
    first = tmp_path / "first.toml"
    first.write_text('[limits]\njob_types = { sleep = 1 }\nrates = { sleep = "5/s" }\n' + job)
    other = tmp_path / "other.toml"
    other.write_text("[limits]\njob_types = { sleep = 2 }\n" + job)
    worker = start_worker(url)
    try:
        wait_started(worker)
        done = jobsched("run", str(first), "--store", url, "--json")
        assert done.returncode == 0, done.stderr

        async def stored() -> object:
            store = PostgresStore(url)
            await store.open()
            try:
                return await store.sync_limits(None)
            finally:
                await store.close()

        assert asyncio.run(stored()) == {
            "executors": {},
            "job_types": {"sleep": 1},
            "rates": {"sleep": {"per_second": 5.0, "burst": 1}},
        }
        refused = jobsched("run", str(other), "--store", url)
        assert refused.returncode == 2
        assert "differ from the limits the cluster runs with" in refused.stderr
    finally:
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=60) == 0
