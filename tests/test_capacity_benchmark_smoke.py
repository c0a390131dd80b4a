"""benchmarks/capacity.py runs end to end on PostgreSQL and prints a row per
table size, process count and queue count (no timing asserts)."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest

from pg_support import base_dsn

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow  # a few worker processes started and stopped, about 15 s


def test_the_capacity_benchmark_prints_a_row_per_case() -> None:
    dsn = base_dsn()
    database = f"capacity_{uuid.uuid4().hex[:10]}"
    try:
        done = subprocess.run(
            [
                sys.executable,
                "benchmarks/capacity.py",
                "--dsn",
                dsn,
                "--database",
                database,
                "--sizes",
                "100,400",
                "--processes",
                "1,2",
                "--queues",
                "3",
                "--jobs",
                "120",
                "--no-docs",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    table = lines[next(i for i, line in enumerate(lines) if line.startswith("| jobs table")) :]
    rows = [line.split(" | ") for line in table[2:] if line.startswith("| ")]
    cases = {(r[0].strip("| "), r[1], r[2]) for r in rows}
    assert len(rows) == len(cases) == 6, done.stdout
    assert cases == {
        (size, procs, queues)
        for size in ("100", "400")
        for procs, queues in (("1", "1"), ("2", "1"), ("2", "3"))
    }, done.stdout
    # Every figure is a number: the server's CPU, WAL and jobs/s were read.
    for row in rows:
        for cell in row[3:9]:
            float(cell.strip("| ").replace(",", ""))
    assert "- 400 finished jobs: the jobs and attempts tables" in done.stdout
