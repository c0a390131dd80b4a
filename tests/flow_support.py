"""A ``jobsched worker --import flow_tasks`` process on a shared store, for
tests/test_result_of.py, tests/test_workflows.py and
tests/test_trigger_rules_stores.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from worker_support import Worker, shared_store


class FlowWorker(Worker):
    """``jobsched worker --store URL --import flow_tasks``."""

    def __init__(self, url: str) -> None:
        super().__init__(url, "--import", "flow_tasks")


@pytest.fixture(params=["sqlite", "postgresql"])
def flow_store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A shared store: one SQLite file, or a fresh PostgreSQL schema."""
    return shared_store(request, tmp_path)


@pytest.fixture
def flow_worker(flow_store_url: str) -> Iterator[str]:
    """The store's URL, with a worker process serving it."""
    worker = FlowWorker(flow_store_url)
    try:
        yield flow_store_url
    finally:
        worker.stop()
