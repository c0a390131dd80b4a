"""What ``jobsched``, ``jobsched.contracts`` and ``jobsched.store`` offer.

The root package is the scheduler's surface (DESIGN.md §3: the reference
facade, then what the guides document); plugin and store authors import what
they implement from ``jobsched.contracts`` and ``jobsched.store``.
"""

from __future__ import annotations

import importlib

import pytest

import jobsched
import jobsched.contracts
import jobsched.store

#: DESIGN.md §3: a program written against the reference design runs on
#: jobsched by changing its imports.
REFERENCE_FACADE = {
    "JobScheduler",
    "Job",
    "AsyncJob",
    "BlockingJob",
    "CpuBoundJob",
    "JobStatus",
    "JobPriority",
    "ConcurrencyModel",
    "RetryPolicy",
    "NonRetryableError",
    "SchedulerError",
    "InvalidTransitionError",
    "UnknownJobError",
    "SchedulerStoppedError",
    "FIFOStrategy",
    "PriorityStrategy",
    "AgingPriorityStrategy",
    "EarliestDeadlineFirstStrategy",
    "SchedulingStrategy",
}

CONTRACT_NAMES = {
    "AbandoningExecutor",
    "Clock",
    "Executor",
    "FifoReadyQueue",
    "PriorityReadyQueue",
    "ReadyQueue",
    "RetryPolicyLike",
    "SortKey",
    "SystemClock",
    "Trigger",
    "build_trigger",
    "retry_count",
    "retry_delay",
}

STORE_NAMES = {
    "JobRow",
    "NewJob",
    "Outcome",
    "ScheduleRow",
    "SharedJobRow",
    "SharedScheduleRow",
    "SharedStore",
    "Snapshot",
    "Store",
    "StoreContext",
    "check_snapshot",
}


def test_the_root_offers_the_reference_facade_and_the_documented_extras() -> None:
    assert set(jobsched.__all__) >= REFERENCE_FACADE
    assert {"Client", "BlockingClient", "LocalClient", "task", "hookimpl"} <= set(jobsched.__all__)
    assert {"UnknownWorkerError", "WorkerRecord", "WORKER_STATES"} <= set(jobsched.__all__)
    assert sorted(jobsched.__all__) == sorted(set(jobsched.__all__))
    for name in jobsched.__all__:
        assert getattr(jobsched, name) is not None, name


def test_what_plugins_and_stores_implement_is_not_in_the_root_surface() -> None:
    assert not (CONTRACT_NAMES | STORE_NAMES) & set(jobsched.__all__)
    assert set(jobsched.contracts.__all__) >= CONTRACT_NAMES
    for name in jobsched.contracts.__all__:
        assert getattr(jobsched.contracts, name) is not None, name
    for name in STORE_NAMES:
        assert getattr(jobsched.store, name) is not None, name


@pytest.mark.parametrize("name", sorted(CONTRACT_NAMES | STORE_NAMES))
def test_a_plugin_written_against_the_root_still_imports(name: str) -> None:
    home = jobsched.contracts if name in CONTRACT_NAMES else jobsched.store
    assert getattr(jobsched, name) is getattr(home, name)


def test_an_unknown_root_name_is_an_attribute_error_naming_it() -> None:
    with pytest.raises(AttributeError, match="'no_such_name'"):
        importlib.import_module("jobsched").no_such_name  # noqa: B018
