"""docs/grafana-dashboard.json against the documented metrics, and its screenshot tool.

The screenshot itself (``python -m benchmarks.prometheus_screenshot``) needs a
Prometheus server and is not run here; these tests need neither.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from benchmarks import prometheus_screenshot

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "observability.md"
#: The series a histogram adds to its metric's name.
HISTOGRAM_SUFFIXES = ("_bucket", "_count", "_sum")


def documented_metrics() -> set[str]:
    """The metric names in the guide's metric table (its first column)."""
    return set(re.findall(r"^\| `(jobsched_\w+)` \|", GUIDE.read_text(encoding="utf-8"), re.M))


def test_every_dashboard_query_uses_only_documented_metrics() -> None:
    documented = documented_metrics()
    assert "jobsched_jobs_total" in documented and "jobsched_store_jobs" in documented
    queries = prometheus_screenshot.dashboard_queries()
    assert len(queries) >= 10
    used = set()
    for _, expr in queries:
        assert "$" not in expr  # the $type variable is filled in
        for name in re.findall(r"\bjobsched_\w+", expr):
            for suffix in HISTOGRAM_SUFFIXES:
                if name.endswith(suffix) and name.removesuffix(suffix) in documented:
                    name = name.removesuffix(suffix)
            used.add(name)
    assert used <= documented, f"undocumented metrics in the dashboard: {used - documented}"


def test_the_graphed_queries_are_dashboard_queries() -> None:
    queries = prometheus_screenshot.dashboard_queries()
    for title, index in prometheus_screenshot.GRAPHED:
        assert len([t for t, _ in queries if t == title]) > index, (title, index)
    # Prometheus's classic graph page orders its g0..gN parameters as text: at
    # most 10 graphs keep g10 from landing between g1 and g2.
    assert len(prometheus_screenshot.GRAPHED) <= 10


def test_the_screenshot_tool_without_prometheus_is_one_clear_line() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "benchmarks.prometheus_screenshot", "--prometheus", "/nonexistent"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert run.returncode == 2
    assert "no prometheus binary at '/nonexistent' (apt-get install prometheus)" in run.stderr
    assert run.stdout == ""
