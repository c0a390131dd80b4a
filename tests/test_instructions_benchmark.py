"""`benchmarks/instructions.py`: instructions per job counted under callgrind.

No figure is held to a threshold: the tests check that the counts come out,
that they are what the method promises (the same work counts the same on a
busy machine), and that a machine without valgrind gets one clear line.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from benchmarks import instructions
from benchmarks.instructions import PerJob

ROOT = Path(__file__).resolve().parent.parent


def _run(args: list[str], *, path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if path is not None:
        env["PATH"] = path
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.mark.parametrize(
    "args",
    [["benchmarks.instructions", "--jobs", "10"], ["benchmarks", "--quick", "--callgrind"]],
)
def test_without_valgrind_the_mode_says_so_in_one_line_and_exits_2(
    args: list[str], tmp_path: Path
) -> None:
    done = _run(args, path=str(tmp_path))  # a PATH where no valgrind is found
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "valgrind is not installed" in lines[0] and "apt-get install valgrind" in lines[0]


def test_bad_sizes_are_refused_with_the_option_named() -> None:
    done = _run(["benchmarks.instructions", "--jobs", "0"])
    assert done.returncode == 2
    assert "--jobs and --process-jobs must be at least 1, got 0" in done.stderr


def test_the_report_rows_put_each_case_beside_its_baseline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    figures = {
        "submit": PerJob("submit", 16_000, 2_000),
        "reference": PerJob("reference", 20_000, 2_000),
        "run": PerJob("run", 30_000, 2_500),
        "raw-submit": PerJob("raw-submit", 8_000, 4_000),
        "raw-run": PerJob("raw-run", 6_000, None),
        "process": PerJob("process", 600_000, 1_000),
        "raw-process": PerJob("raw-process", 700_000, 1_000),
    }
    asked: list[tuple[str, int]] = []

    def per_job(case: str, n: int, code: Path = ROOT) -> PerJob:
        asked.append((case, n))
        return figures[case]

    monkeypatch.setattr(instructions, "per_job", per_job)
    rows = instructions.rows(1_000, 50)
    assert sorted(asked) == sorted(
        (case, 50 if "process" in case else 1_000) for case in instructions.CASES
    )
    by_name = {name.split(" (N = ")[0]: (ours, base, versus) for name, ours, base, versus in rows}
    submit = by_name["instructions per job: job construction + submit (`NoopAsync`), not running"]
    assert submit == (
        "16,000 instr/job (GC 2,000)",
        "8,000 instr/job (GC 4,000) (construction + heappush + dict insert)",
        "2.00x (3.50x without GC)",
    )
    run = by_name["instructions per job: job construction + submit + dispatch + run (`NoopAsync`)"]
    # The dispatch + run share is the run case less the submit case; no GC
    # figure on one side, no "without GC" ratio.
    assert run == (
        "30,000 instr/job (GC 2,500); dispatch + run 14,000",
        "6,000 instr/job (raw asyncio, deque, jobs built)",
        "5.00x",
    )
    process = by_name[
        "instructions per job: tiny process jobs, submit + run, every process counted"
    ]
    assert process[2] == "0.86x (0.86x without GC)"


@pytest.mark.slow
def test_the_same_work_counts_the_same_instructions() -> None:
    """The point of counting: two counts of one case agree to within a fraction
    of a percent (the cyclic collector's share, which steps with N, aside),
    where wall time on this machine moves by tens of percent."""
    missing = instructions.valgrind_missing()
    if missing is not None:
        if os.environ.get("JOBSCHED_REQUIRE_SERVICES"):  # CI installs it (.ci/run)
            pytest.fail(missing)
        pytest.skip(missing)
    first = instructions.per_job("submit", 300)
    second = instructions.per_job("submit", 300)
    assert first.other is not None and second.other is not None  # the interpreter has symbols
    assert first.total > 1_000  # a job's construction and submit, not start-up noise
    assert abs(first.other - second.other) <= 0.01 * first.other, (first, second)
    assert first.gc == second.gc
