"""benchmarks/limits.py runs standalone and prints its rows (no timing asserts)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_limits_benchmark_runs_standalone() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "limits.py"), "--jobs", "500", "--rounds", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("500 no-op async jobs, 8 workers, 1 rounds")
    for row in ("plain", "limits", "raw asyncio"):
        assert any(line.startswith(row) for line in lines), row
    assert "limits cost" in lines[-1] and "target: at most 25%" in lines[-1]
