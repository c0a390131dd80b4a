"""benchmarks/shared_sqlite.py runs standalone and reports every system it
can run, each figure the median of its rounds (no timing asserts)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = str(ROOT / "benchmarks" / "shared_sqlite.py")


def huey_installed() -> bool:
    try:
        import huey  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.slow
def test_shared_sqlite_benchmark_runs_standalone() -> None:
    args = ["--jobs", "200", "--rounds", "2", "--workers", "2", "--batch", "100"]
    proc = subprocess.run(
        [sys.executable, SCRIPT, *args, "--dsn", "", "--no-docs", "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "JOBSCHED_TEST_POSTGRES_DSN": ""},
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    systems = {"jobsched sqlite", "jobsched sqlite normal"}
    if huey_installed():
        systems.add("huey sqlite")
    assert set(result["jobs_per_second"]) == systems
    assert (result["jobs"], result["rounds"], result["workers"]) == (200, 2, 2)
    for name, runs in result["runs"].items():
        assert len(runs) == 2 and all(rate > 0 for rate in runs)
        assert result["jobs_per_second"][name] == pytest.approx(statistics.median(runs))
    assert set(result["cpu_us_per_job"]) <= systems
    assert result["target"] == 40_000.0
    sqlite = result["jobs_per_second"]["jobsched sqlite"]
    others = [r for n, r in result["jobs_per_second"].items() if not n.startswith("jobsched")]
    assert result["met"] == (sqlite >= 40_000 and all(rate < sqlite for rate in others))


@pytest.mark.slow
def test_the_baseline_must_be_a_checkout_and_the_docs_have_the_markers(tmp_path: Path) -> None:
    refused = subprocess.run(
        [sys.executable, SCRIPT, "--baseline", str(tmp_path), "--no-docs"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert refused.returncode == 2
    assert "not a jobsched checkout" in refused.stderr
    # Where a full run writes its table.
    docs = (ROOT / "docs" / "durability.md").read_text(encoding="utf-8")
    start = "<!-- benchmarks/shared_sqlite.py writes the figures below -->"
    end = "<!-- end of benchmarks/shared_sqlite.py's figures -->"
    assert docs.index(start) < docs.index(end)
