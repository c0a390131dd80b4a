"""The benchmarks run end to end in quick mode and produce every row (no timing asserts)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

ROW_PREFIXES = [
    "2,000 no-op async jobs, 8 workers: dispatch + run (pre-submitted)",
    "(raw asyncio popping the same 2,000-entry priority heap instead of a deque)",
    "2,000 no-op async jobs, 8 workers: submit + dispatch + run",
    "2,000 no-op async jobs, 8 workers: job construction + submit + dispatch + run",
    "300 no-op thread jobs, 8 workers, pool of 8",
    "100 tiny process jobs, 8 workers, pool of ",
    "submit 20,000 jobs, not running",
    "job construction + submit, 20,000 jobs, not running",
    "job construction + submit, 20,000 reference-style jobs, not running",
    "memory per pending job (20,000 pending; job object included)",
    "lateness of 100 jobs delayed 50 ms, p50",
    "lateness of 100 jobs delayed 50 ms, p99",
    "drift of a 10 ms fixed-rate schedule at fire 20",
    *(
        f"2,000 no-op async jobs, dispatch + run (pre-submitted; loop-thread CPU time), {what}"
        for what in (
            "`prometheus` switched on",
            "`otel` with OpenTelemetry's API imported, no SDK",
            "`otel` with an SDK tracer provider",
        )
    ),
    "`prometheus`: folding 2,000 attempts' records into the counts (at a scrape)",
]


@pytest.mark.slow
def test_quick_benchmarks_print_and_write_every_row(tmp_path: Path) -> None:
    output = tmp_path / "benchmarks.md"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--output", str(output)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    report = output.read_text(encoding="utf-8")
    assert proc.stdout.strip() == report.strip()
    header = "| benchmark "
    assert header in report
    table_rows = [line for line in report.splitlines() if line.startswith("| ")]
    for prefix in ROW_PREFIXES:
        matching = [row for row in table_rows if row.startswith(f"| {prefix}")]
        assert len(matching) == 1, f"missing row {prefix!r} in:\n{report}"
        cells = [cell.strip() for cell in matching[0].strip("|").split("|")]
        assert len(cells) == 6
        assert cells[2], f"row {prefix!r} has no baseline"
        if "switched on" in prefix or "`otel`" in prefix:  # against the same case, plugins off
            assert cells[2].endswith("µs/job (plugins off)") and "(rounds: " in cells[3], cells
    assert len(table_rows) == len(ROW_PREFIXES) + 1  # + the header row
    for line in ("- date: ", "- machine: ", "- python: CPython ", "quick"):
        assert line in report


def test_a_new_report_keeps_the_hand_written_history(tmp_path: Path) -> None:
    from benchmarks.suite import kept_history

    report = tmp_path / "benchmarks.md"
    assert kept_history(report) == ""
    report.write_text("# Benchmarks\n\nold table\n\n## History\n\nbefore/after\n")
    assert kept_history(report) == "\n## History\n\nbefore/after\n"
    report.write_text("# Benchmarks\n\nno history\n")
    assert kept_history(report) == ""
