"""benchmarks/durable.py runs standalone and reports every store (no timing asserts)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_durable_benchmark_runs_standalone() -> None:
    script = str(ROOT / "benchmarks" / "durable.py")
    proc = subprocess.run(
        [sys.executable, script, "--jobs", "300", "--rounds", "1", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["jobs"] == 300
    assert set(result["jobs_per_second"]) == {"memory", "sqlite", "sqlite-normal"}
    assert all(rate > 0 for rate in result["jobs_per_second"].values())
    assert result["sqlite_ratio"] == pytest.approx(
        result["jobs_per_second"]["sqlite"] / result["jobs_per_second"]["memory"]
    )
    table = subprocess.run(
        [sys.executable, script, "--jobs", "200", "--rounds", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    lines = table.stdout.splitlines()
    assert lines[0] == "200 no-op async jobs, 8 workers, best of 1:"
    assert [line.split()[0] for line in lines[1:4]] == ["memory", "sqlite", "sqlite-normal"]
    assert "the target of 25% of memory" in lines[-1]
