"""A ``jobsched worker --import flow_tasks`` process on a shared store, for
tests/test_result_of.py, tests/test_workflows.py and
tests/test_trigger_rules_stores.py."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent


class FlowWorker:
    """``jobsched worker --store URL --import flow_tasks``, run from tests/."""

    def __init__(self, url: str) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jobsched",
                "worker",
                "--store",
                url,
                "--import",
                "flow_tasks",
                "--workers=2",
                "--grace=0",
            ],
            cwd=TESTS,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            if "shared scheduler started" in line:
                threading.Thread(target=self.proc.stderr.read, daemon=True).start()
                return
        pytest.fail(f"worker exited with {self.proc.wait()} before starting")

    def stop(self) -> None:
        self.proc.terminate()
        assert self.proc.wait(timeout=60) == 0


@pytest.fixture(params=["sqlite", "postgresql"])
def flow_store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A shared store: one SQLite file, or a fresh PostgreSQL schema."""
    if request.param == "postgresql":
        url: str = request.getfixturevalue("pg_schema")[0]
        return url
    return f"sqlite:///{tmp_path / 'jobs.db'}"


@pytest.fixture
def flow_worker(flow_store_url: str) -> Iterator[str]:
    """The store's URL, with a worker process serving it."""
    worker = FlowWorker(flow_store_url)
    try:
        yield flow_store_url
    finally:
        worker.stop()
