"""Tests for the jobsched-shortest plugin, as its author would write them."""

from __future__ import annotations

import random

import jobsched_shortest
import pytest
from jobsched_shortest import LinearRetry, ShortestFirst

from jobsched import AsyncJob, JobScheduler, JobStatus, PluginManager


class Estimated(AsyncJob):
    """A job that records the order it ran in."""

    def __init__(self, name: str, ran: list[str], estimated_seconds: float | None = None):
        super().__init__(name)
        self.ran = ran
        if estimated_seconds is not None:
            self.estimated_seconds = estimated_seconds

    async def run(self) -> None:
        self.ran.append(self.name)


def test_the_plugin_registers_its_names() -> None:
    # Register the module explicitly: no installation needed, and no other
    # third-party plugin gets in the way (the built-ins still load).
    pm = PluginManager([jobsched_shortest], autoload=False)
    assert pm.resolve("strategies", "shortest-first") is ShortestFirst
    assert pm.resolve("retry_policies", "linear") is LinearRetry


async def test_shortest_estimate_runs_first_and_the_listener_counts() -> None:
    jobsched_shortest.TRANSITIONS.clear()
    scheduler = JobScheduler("shortest-first", num_workers=1, plugins=[jobsched_shortest])
    ran: list[str] = []
    for name, estimate in [("slow", 5.0), ("unknown", None), ("fast", 0.1), ("medium", 1.0)]:
        scheduler.submit(Estimated(name, ran, estimate))
    async with scheduler:
        await scheduler.join()
    assert ran == ["fast", "medium", "slow", "unknown"]
    assert jobsched_shortest.TRANSITIONS == {"running": 4, "completed": 4}
    assert all(job.status is JobStatus.COMPLETED for job in scheduler.jobs())


def test_linear_retry_delays_and_validation() -> None:
    policy = LinearRetry(max_retries=2, step=0.5)
    assert [policy.delay(attempt, random.Random(0)) for attempt in (1, 2, 3)] == [0.5, 1.0, 1.5]
    with pytest.raises(ValueError, match="max_retries"):
        LinearRetry(max_retries=-1)
