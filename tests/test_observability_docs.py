"""Every Python example of docs/observability.md runs, and prints what the guide says.

Each example runs in a fresh process (a tracer provider is set once per
process). An example that ends in comment lines after its code prints
exactly those lines.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path

import pytest

GUIDE = Path(__file__).resolve().parent.parent / "docs" / "observability.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.S)


def expected_output(code: str) -> list[str] | None:
    """The trailing ``# ...`` lines of an example: what it prints (None: not said)."""
    lines = code.rstrip().splitlines()
    tail: list[str] = []
    while lines and lines[-1].startswith("# "):
        tail.insert(0, lines.pop()[2:])
    return tail or None


def test_the_guide_has_examples() -> None:
    assert len(EXAMPLES) >= 4
    assert sum(expected_output(code) is not None for code in EXAMPLES) >= 2


@pytest.mark.parametrize("code", EXAMPLES, ids=[f"example{i}" for i in range(len(EXAMPLES))])
def test_example_runs(code: str) -> None:
    # Port 0 rather than 9464: another process on this machine may hold it.
    run = subprocess.run(
        [sys.executable, "-c", code.replace("start_http_server(9464)", "start_http_server(0)")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    expected = expected_output(code)
    if expected is not None:
        assert run.stdout.splitlines() == expected


def documented(pattern: str) -> set[str]:
    return set(re.findall(pattern, GUIDE.read_text(encoding="utf-8"), re.M))


async def test_every_exported_metric_is_in_the_guide_and_the_deprecated_ones_are_marked() -> None:
    from prometheus_client import generate_latest
    from prometheus_client.parser import text_string_to_metric_families
    from prometheus_client.registry import CollectorRegistry

    from jobsched import JobScheduler, Limits
    from jobsched_plugins import prometheus

    async def fail() -> None:
        await asyncio.sleep(0)  # holds the one slot while the other job comes
        raise ValueError("no")

    registry = CollectorRegistry()
    prometheus.enable(registry)
    try:
        scheduler = JobScheduler(num_workers=2, limits=Limits(executors={"async": 1}))
        async with scheduler:
            scheduler.submit(fail, retry="none")
            scheduler.submit(fail, retry="none")  # held back by the limit at least once
            await scheduler.join()
            text = generate_latest(registry).decode()
    finally:
        prometheus.disable()
    # A counter's family drops "_total"; the guide names its samples.
    exported = {
        f.name + ("_total" if f.type == "counter" else "")
        for f in text_string_to_metric_families(text)
        if f.samples
    }
    current = documented(r"^\| `(jobsched_\w+)` \|")
    deprecated = documented(r"^\| `(jobsched_\w+)` \((?:gauge|histogram|counter)\) \|")
    assert deprecated == {"jobsched_workers_total", "jobsched_job_duration_seconds"}
    # Series that need a shared store, `status --metrics` or a schedule's misfire.
    elsewhere = {"jobsched_leases_held", "jobsched_store_jobs", "jobsched_schedule_misfires_total"}
    assert exported == (current - elsewhere) | deprecated
