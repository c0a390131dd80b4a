"""``jobsched run --store`` and ``jobsched status``, through the console script."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from test_cli import EMAIL, assert_bad_input, jobsched, write

pytestmark = pytest.mark.slow


@pytest.fixture
def jobfile(tmp_path: Path) -> Path:
    return write(
        tmp_path / "jobs.toml",
        f"""
        [[job]]
        id = "first"
        {EMAIL}
        [[job]]
        id = "second"
        depends_on = ["first"]
        {EMAIL}
        [[recurring]]
        id = "beat"
        every = "20ms"
        times = 2
        {EMAIL}
        """,
    )


def test_run_with_a_store_then_status(tmp_path: Path, jobfile: Path) -> None:
    url = f"sqlite:///{tmp_path}/jobs.db"
    first = jobsched("run", str(jobfile), "--store", url, "--json")
    assert first.returncode == 0, first.stderr
    ran = json.loads(first.stdout)
    assert [j["id"] for j in ran["jobs"]] == ["first", "second", "beat#1", "beat#2"]

    # The same command again resumes the finished run: nothing runs twice.
    again = jobsched("run", str(jobfile), "--store", url, "--json")
    assert again.returncode == 0, again.stderr
    resumed = json.loads(again.stdout)
    assert [(j["id"], j["job_id"], j["status"]) for j in resumed["jobs"]] == [
        (j["id"], j["job_id"], "completed") for j in ran["jobs"]
    ]
    assert all(j["duration"] is None for j in resumed["jobs"])  # nothing ran this time

    status = jobsched("status", "--store", url, "--json")
    assert status.returncode == 0, status.stderr
    doc = json.loads(status.stdout)
    assert doc["store"] == url
    assert doc["counts"]["completed"] == 4
    # Newest first.
    assert [j["id"] for j in doc["jobs"]] == ["beat#2", "beat#1", "second", "first"]
    second = doc["jobs"][2]
    assert second["result"] == "sent to x@corp" and second["error"] is None
    assert second["args"] == {"to": "x@corp", "subject": "hi", "latency": 0.001}
    [beat] = doc["schedules"]
    assert (beat["name"], beat["fired"], beat["active"], beat["paused"]) == (
        "beat",
        2,
        False,
        False,
    )
    assert beat["trigger"] == {"interval": 0.02}

    table = jobsched("status", "--store", url)
    assert table.returncode == 0, table.stderr
    assert "4 jobs in" in table.stdout and "4 completed" in table.stdout
    assert "beat" in table.stdout and "ended" in table.stdout


def test_status_of_a_store_that_cannot_be_read(tmp_path: Path) -> None:
    missing = tmp_path / "none.db"
    assert_bad_input(
        jobsched("status", "--store", f"sqlite:///{missing}"), "no such file", str(missing)
    )
    assert not missing.exists()
    foreign = tmp_path / "other.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE t (x)")
    assert_bad_input(
        jobsched("status", "--store", f"sqlite:///{foreign}", "--json"),
        "not a jobsched database",
    )
    assert_bad_input(jobsched("status", "--store", "memory://"), "not durable")
    assert_bad_input(jobsched("status", "--store", "nosuch:///x"), "unknown store 'nosuch'")
    usage = jobsched("status")
    assert usage.returncode == 2 and "--store" in usage.stderr


def test_run_with_a_store_that_cannot_be_opened(tmp_path: Path, jobfile: Path) -> None:
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"garbage" * 100)
    assert_bad_input(
        jobsched("run", str(jobfile), "--store", f"sqlite:///{corrupt}"),
        str(corrupt),
        "not a usable SQLite database",
    )
    assert corrupt.read_bytes() == b"garbage" * 100
    assert_bad_input(
        jobsched("run", str(jobfile), "--store", "sqlite:///x.db?speed=max"), "unknown option"
    )


def test_help_mentions_the_store(jobfile: Path) -> None:
    run_help = jobsched("run", "--help")
    assert "--store URL" in run_help.stdout and "resumes" in run_help.stdout
    status_help = jobsched("status", "--help")
    assert status_help.returncode == 0 and "--store URL" in status_help.stdout
