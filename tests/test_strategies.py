"""The four built-in strategies, by class and by name."""

from __future__ import annotations

import asyncio
import importlib
import math

import pytest

from jobsched import (
    AgingPriorityStrategy,
    EarliestDeadlineFirstStrategy,
    FIFOStrategy,
    Job,
    JobPriority,
    JobScheduler,
    JobStatus,
    PluginError,
    PriorityStrategy,
    SchedulingStrategy,
)
from jobsched.testing import VirtualClock
from kernel_support import Noop, builtin_plugins, make_scheduler

# A hang is a failure, not a stuck suite.
pytestmark = pytest.mark.timeout(30)

P = JobPriority


def job(name: str, seq: int, priority: P = P.MEDIUM, **attrs: float | None) -> Job:
    j = Noop(name, priority=priority)
    j.seq = seq
    for key, value in attrs.items():
        setattr(j, key, value)
    return j


def test_keys_are_the_references() -> None:
    j = job("x", 7, P.HIGH, submitted_at=50.0, deadline=12.0)
    assert FIFOStrategy().key(j) == (7,)
    assert PriorityStrategy().key(j) == (-2, 7)
    assert AgingPriorityStrategy(0.1).key(j) == (-(2 - 0.1 * 50.0), 7)
    assert EarliestDeadlineFirstStrategy().key(j) == (12.0, -2, 7)
    j.deadline = None
    assert EarliestDeadlineFirstStrategy().key(j) == (math.inf, -2, 7)


def test_strategies_are_scheduling_strategies() -> None:
    for cls in (
        FIFOStrategy,
        PriorityStrategy,
        AgingPriorityStrategy,
        EarliestDeadlineFirstStrategy,
    ):
        assert issubclass(cls, SchedulingStrategy)
    with pytest.raises(TypeError):
        SchedulingStrategy()  # type: ignore[abstract]


@pytest.mark.parametrize("rate", [0.0, -0.5])
def test_aging_rate_must_be_positive(rate: float) -> None:
    with pytest.raises(ValueError, match="age_rate"):
        AgingPriorityStrategy(age_rate=rate)


def test_aging_low_overtakes_a_fresh_high_after_twenty_seconds() -> None:
    aging = AgingPriorityStrategy(age_rate=0.1)
    low = job("low", 0, P.LOW, submitted_at=1000.0)
    # Keys of jobs with equal effective priority tie on the first element and
    # fall back to submit order, so compare just past and just before 20 s.
    fresh_high_later = job("high", 1, P.HIGH, submitted_at=1020.5)
    fresh_high_sooner = job("high", 2, P.HIGH, submitted_at=1019.5)
    assert aging.key(low) < aging.key(fresh_high_later)
    assert aging.key(low) > aging.key(fresh_high_sooner)
    assert PriorityStrategy().key(low) > PriorityStrategy().key(fresh_high_later), "starves"


async def _run_order(strategy: object, jobs: list[tuple[Job, float]]) -> list[str]:
    """Submit jobs (each after advancing a fake clock) before start; return the run order."""
    clock = VirtualClock()
    scheduler, recorder = make_scheduler(strategy, clock=clock, num_workers=1)
    for j, wait in jobs:
        await clock.advance(wait)
        scheduler.submit(j)
    async with scheduler:
        await scheduler.join()
    names = {j.job_id: j.name for j, _ in jobs}
    return [names[i] for i in recorder.started()]


async def test_fifo_runs_in_submit_order() -> None:
    jobs = [
        (Noop(n, priority=p), 0.0) for n, p in [("a", P.LOW), ("b", P.CRITICAL), ("c", P.MEDIUM)]
    ]
    assert await _run_order("fifo", jobs) == ["a", "b", "c"]


async def test_priority_runs_highest_first_fifo_within_a_level() -> None:
    spec = [("l1", P.LOW), ("h1", P.HIGH), ("m1", P.MEDIUM), ("h2", P.HIGH), ("c1", P.CRITICAL)]
    jobs = [(Noop(n, priority=p), 0.0) for n, p in spec]
    assert await _run_order(PriorityStrategy(), jobs) == ["c1", "h1", "h2", "m1", "l1"]


async def test_default_strategy_is_priority() -> None:
    scheduler = JobScheduler(plugins=builtin_plugins())
    assert isinstance(scheduler.strategy, PriorityStrategy)


async def test_aging_lets_an_old_low_job_beat_a_new_high_one() -> None:
    jobs = [
        (Noop("old-low", priority=P.LOW), 0.0),
        (Noop("new-high", priority=P.HIGH), 25.0),  # submitted 25 s later
        (Noop("new-critical", priority=P.CRITICAL), 0.0),
    ]
    assert await _run_order("aging", jobs) == ["new-critical", "old-low", "new-high"]
    jobs = [(Noop("old-low", priority=P.LOW), 0.0), (Noop("new-high", priority=P.HIGH), 5.0)]
    assert await _run_order(AgingPriorityStrategy(0.1), jobs) == ["new-high", "old-low"]


async def test_edf_runs_earliest_deadline_first_and_deadline_free_jobs_last() -> None:
    jobs = [
        (Noop("none-low", priority=P.LOW), 0.0),
        (Noop("d30", deadline=30.0), 0.0),
        (Noop("none-high", priority=P.HIGH), 0.0),
        (Noop("d10", deadline=10.0, priority=P.LOW), 0.0),
        (Noop("d20", deadline=20.0), 0.0),
    ]
    assert await _run_order("edf", jobs) == ["d10", "d20", "d30", "none-high", "none-low"]


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("fifo", FIFOStrategy),
        ("priority", PriorityStrategy),
        ("aging", AgingPriorityStrategy),
        ("edf", EarliestDeadlineFirstStrategy),
    ],
)
def test_strategies_by_name(name: str, cls: type) -> None:
    scheduler = JobScheduler(name, plugins=builtin_plugins())
    assert type(scheduler.strategy) is cls


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("fifo", FIFOStrategy),
        ("priority", PriorityStrategy),
        ("aging", AgingPriorityStrategy),
        ("edf", EarliestDeadlineFirstStrategy),
    ],
)
def test_the_classes_are_cores_and_each_plugin_module_only_registers_one(
    name: str, cls: type
) -> None:
    # jobsched offers them without importing a plugin (DESIGN.md section 8);
    # each is still its own entry-point plugin, listed and disabled by name.
    assert cls.__module__ == "jobsched._strategy"
    plugin = importlib.import_module(f"jobsched_plugins.{name}")
    assert plugin.__dict__[cls.__name__] is cls
    record = next(r for r in builtin_plugins().records() if r.name == name)
    assert (record.status, record.entry_point) == ("loaded", f"jobsched_plugins.{name}")
    assert record.provides == {"strategies": (name,)}


def test_unknown_strategy_name_lists_the_registered_ones() -> None:
    with pytest.raises(PluginError, match="unknown strategy 'agin'") as info:
        JobScheduler("agin", plugins=builtin_plugins())
    message = str(info.value)
    assert "did you mean 'aging'" in message
    known = builtin_plugins().names("strategies")
    assert {"aging", "edf", "fifo", "priority"} <= set(known)
    assert f"(registered: {', '.join(known)})" in message


def test_a_strategy_without_a_key_method_is_refused() -> None:
    with pytest.raises(TypeError, match="key"):
        JobScheduler(object(), plugins=builtin_plugins())  # type: ignore[arg-type]


async def test_a_custom_strategy_object_orders_the_heap() -> None:
    class Alphabetical(SchedulingStrategy):
        def key(self, job: Job) -> tuple[str, int]:
            return (job.name, job.seq)

    jobs = [(Noop(n), 0.0) for n in ["pear", "apple", "fig"]]
    assert await _run_order(Alphabetical(), jobs) == ["apple", "fig", "pear"]


async def test_a_strategy_whose_key_raises_refuses_the_submit_and_records_nothing() -> None:
    class Picky(SchedulingStrategy):
        def key(self, job: Job) -> tuple[int, ...]:
            if job.name == "unkeyable":
                raise ValueError("no key for this job")
            return (job.seq,)

    scheduler, _ = make_scheduler(Picky())
    bad = Noop("unkeyable")
    async with scheduler:
        with pytest.raises(ValueError, match="no key for this job"):
            scheduler.submit(bad)
        assert scheduler.jobs() == [], "a refused job is not recorded"
        good = Noop("fine")
        scheduler.submit(good)
        await asyncio.wait_for(scheduler.join(), 5)  # join() is not held up by the refused job
    assert good.status is JobStatus.COMPLETED
    assert bad.status is JobStatus.PENDING and bad.attempts == 0


async def test_a_key_that_raises_refuses_delayed_and_blocked_submits_too() -> None:
    class Picky(SchedulingStrategy):
        def key(self, job: Job) -> tuple[int, ...]:
            if job.name == "unkeyable":
                raise ValueError("no key for this job")
            return (job.seq,)

    scheduler, _ = make_scheduler(Picky())
    upstream = Noop("upstream")
    async with scheduler:
        scheduler.submit(upstream, delay=60)
        with pytest.raises(ValueError, match="no key for this job"):
            scheduler.submit(Noop("unkeyable"), delay=5)
        with pytest.raises(ValueError, match="no key for this job"):
            scheduler.submit(Noop("unkeyable"), depends_on=[upstream.job_id])
        assert scheduler.jobs() == [upstream], "refused jobs are not recorded"
        assert scheduler.cancel(upstream.job_id)
        await asyncio.wait_for(scheduler.join(), 5)
