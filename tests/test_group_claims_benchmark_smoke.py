"""benchmarks/group_claims.py runs end to end on both databases (no timing asserts)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from shared_support import Target

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow  # two benchmark processes, about 15 s each


@pytest.fixture
def target(db_target: Target) -> Target:
    return db_target


def test_the_group_claims_benchmark_prints_every_case(target: Target) -> None:
    url = target.url if target.kind == "postgresql" else "sqlite:///unused.db"
    if target.kind == "postgresql":
        url = url.split("?")[0]  # the benchmark makes (and drops) a schema of its own
    done = subprocess.run(
        [sys.executable, "benchmarks/group_claims.py", url, "--jobs", "300", "--claims", "3"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for case in ("no groups (the plain claim)", "100 groups", "290 jobs of one group + 10"):
        assert any(line.startswith(f"| {case}") for line in lines), done.stdout
    # Claims in turns: the second group's jobs come in the first claim, though they sort last.
    assert "the first claim took 5 of the second group's 10 jobs" in lines
