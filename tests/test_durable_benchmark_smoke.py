"""benchmarks/durable.py runs standalone and reports every row of issue 13's
SQLite target (no timing asserts)."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
STORES = {"memory", "sqlite", "sqlite-normal", "sqlite-shared"}
ENQUEUES = {"submit_many", "submit concurrent"}


@pytest.mark.slow
def test_durable_benchmark_runs_standalone() -> None:
    script = str(ROOT / "benchmarks" / "durable.py")
    small = ["--jobs", "300", "--enqueue-jobs", "400", "--batch", "100"]
    proc = subprocess.run(
        [sys.executable, script, *small, "--rounds", "1", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["jobs"] == 300
    assert result["enqueue_jobs"] == 400
    assert set(result["jobs_per_second"]) == STORES
    assert set(result["enqueue_per_second"]) == ENQUEUES
    assert all(rate > 0 for rate in result["jobs_per_second"].values())
    assert all(rate > 0 for rate in result["enqueue_per_second"].values())
    rates = result["jobs_per_second"]
    assert result["sqlite_ratio"] == pytest.approx(rates["sqlite"] / rates["memory"])
    assert result["shared_ratio"] == pytest.approx(rates["sqlite-shared"] / rates["memory"])
    assert len(result["load_average"]) == 3
    # CPU per job: always for the rows measured in the benchmark's own process.
    cpu = result["cpu_us_per_job"]
    assert set(cpu) >= {"memory", "sqlite", "sqlite-normal", *ENQUEUES}
    assert set(cpu) <= STORES | ENQUEUES
    assert all(value >= 0 for value in cpu.values())
    # Each figure is the median of its rounds.
    for name, runs in result["runs"].items():
        assert len(runs) == 1
        both = {**result["jobs_per_second"], **result["enqueue_per_second"]}
        assert both[name] == pytest.approx(statistics.median(runs))

    table = subprocess.run(
        [sys.executable, script, *small, "--rounds", "2"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    lines = table.stdout.splitlines()
    assert lines[0].startswith("300 no-op async jobs, 8 workers, median of 2 (load average ")
    assert [line.split()[0] for line in lines[1:5]] == [
        "memory",
        "sqlite",
        "sqlite-normal",
        "sqlite-shared",
    ]
    assert lines[5] == "enqueue 400 jobs through Client, batches of 100:"
    assert [line.split()[0] for line in lines[6:8]] == ["submit_many", "submit"]
    assert "40% of memory in each mode, 50,000 jobs/s enqueued" in lines[-1]


@pytest.mark.slow
def test_durable_benchmark_compares_the_single_owner_rows_with_a_baseline(
    tmp_path: Path,
) -> None:
    script = str(ROOT / "benchmarks" / "durable.py")
    small = ["--jobs", "200", "--enqueue-jobs", "200", "--batch", "100", "--rounds", "1"]
    proc = subprocess.run(
        [sys.executable, script, *small, "--json", "--baseline", str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["baseline"] == str(ROOT)
    compared = result["compared_jobs_per_second"]
    assert set(compared) == {
        f"{name} ({code})" for name in ("sqlite", "sqlite-normal") for code in ("this", "baseline")
    }
    assert all(rate > 0 for rate in compared.values())
    assert set(result["cpu_us_per_job"]) >= set(compared)
    refused = subprocess.run(
        [sys.executable, script, "--baseline", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert refused.returncode == 2
    assert "not a jobsched checkout" in refused.stderr
