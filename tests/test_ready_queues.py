"""Strategy-owned ready queues: the fifo and priority strategies' deques pop
exactly in the order of their keys, and the kernel falls back to its heap."""

from __future__ import annotations

import asyncio
import random

import pytest

from jobsched import FIFOStrategy, Job, JobPriority, JobStatus, PriorityStrategy, SchedulingStrategy
from jobsched.contracts import FifoReadyQueue, PriorityReadyQueue, ReadyQueue
from kernel_support import Gate, Noop, make_scheduler, until

pytestmark = pytest.mark.timeout(30)


def _job(seq: int, priority: int = 1) -> Job:
    job = Noop(f"j{seq}", priority=JobPriority(priority))
    job.seq = seq
    return job


def _drain(queue: ReadyQueue) -> list[Job]:
    out = []
    while (job := queue.pop()) is not None:
        out.append(job)
    return out


@pytest.mark.parametrize(
    ("queue_type", "strategy"),
    [(FifoReadyQueue, FIFOStrategy()), (PriorityReadyQueue, PriorityStrategy())],
)
def test_a_queue_pops_in_key_order_whatever_order_jobs_arrive_in(
    queue_type: type[ReadyQueue], strategy: SchedulingStrategy
) -> None:
    rng = random.Random(13)
    for _ in range(50):
        queue = queue_type()
        pushed: list[Job] = []
        seqs = list(range(60))
        # Mostly ascending (submits), with retries and late arrivals mixed in,
        # and pops in between, as a running scheduler does.
        for i, seq in enumerate(seqs):
            if rng.random() < 0.2:
                seq = rng.randrange(seq + 1) + 1000 * i  # a unique, older-looking seq
                seq = -seq
            job = _job(seq, rng.randrange(4))
            queue.push(job)
            pushed.append(job)
            if rng.random() < 0.3:
                popped = queue.pop()
                assert popped is not None
                best = min(pushed, key=strategy.key)
                assert popped is best
                pushed.remove(popped)
        assert len(queue) == len(pushed)
        assert _drain(queue) == sorted(pushed, key=strategy.key)
        assert len(queue) == 0 and queue.pop() is None


@pytest.mark.parametrize("queue_type", [FifoReadyQueue, PriorityReadyQueue])
def test_remove_drops_every_entry_of_a_job(queue_type: type[ReadyQueue]) -> None:
    queue = queue_type()
    jobs = [_job(seq, seq % 3) for seq in range(6)]
    for job in jobs:
        queue.push(job)
    late = _job(-1, 2)
    queue.push(late)
    queue.remove(jobs[2])
    queue.remove(late)
    assert jobs[2] not in _drain(queue)
    assert len(queue) == 0


def test_the_builtin_strategies_give_their_queue_and_a_changed_key_gets_the_heap() -> None:
    assert isinstance(FIFOStrategy().ready_queue(), FifoReadyQueue)
    assert isinstance(PriorityStrategy().ready_queue(), PriorityReadyQueue)

    class LowestFirst(PriorityStrategy):
        def key(self, job: Job) -> tuple[int, int]:
            return (int(job.priority), job.seq)

    assert LowestFirst().ready_queue() is None, "the inherited queue would disobey this key"


async def test_a_subclass_with_its_own_key_runs_in_its_own_order() -> None:
    class LowestFirst(PriorityStrategy):
        def key(self, job: Job) -> tuple[int, int]:
            return (int(job.priority), job.seq)

    scheduler, _ = make_scheduler(LowestFirst())
    order: list[str] = []
    scheduler.add_listener(
        lambda job, old, new: order.append(job.name) if new is JobStatus.RUNNING else None
    )
    for name, priority in (("high", 2), ("low", 0), ("medium", 1)):
        scheduler.submit(Noop(name, priority=JobPriority(priority)))
    async with scheduler:
        await asyncio.wait_for(scheduler.join(), 5)
    assert order == ["low", "medium", "high"]


async def test_a_retried_job_goes_ahead_of_newer_jobs_of_its_priority() -> None:
    # Its seq is older than theirs: the heap ran it first, and so must the deques.
    scheduler, _ = make_scheduler(PriorityStrategy(), num_workers=1)
    gate = Gate("gate")
    order: list[str] = []
    scheduler.add_listener(
        lambda job, old, new: order.append(job.name) if new is JobStatus.RUNNING else None
    )
    async with scheduler:
        scheduler.submit(gate)
        await until(lambda: gate.waiting, "the gate job to start")
        flaky = scheduler.submit(_Failing("flaky", retry={"policy": "fixed", "seconds": 0}))
        for i in range(3):
            scheduler.submit(Noop(f"later{i}"))
        gate.open()
        await asyncio.wait_for(scheduler.join(), 5)
        assert scheduler.get(flaky).status is JobStatus.COMPLETED
    assert order == ["gate", "flaky", "flaky", "later0", "later1", "later2"]


class _Failing(Noop):
    """Fails its first attempt, completes its second."""

    __slots__ = ()

    async def run(self) -> None:
        if self.attempts == 1:
            raise RuntimeError("first attempt fails")


def test_a_strategy_whose_ready_queue_is_not_one_is_refused_naming_it() -> None:
    class ListQueue(FIFOStrategy):
        def __repr__(self) -> str:
            return "ListQueue()"

        def ready_queue(self) -> ReadyQueue | None:
            return []  # type: ignore[return-value]  # has pop, but no push or remove

    with pytest.raises(TypeError) as info:
        make_scheduler(ListQueue())
    assert str(info.value) == (
        "strategy ListQueue(): ready_queue() must return a ReadyQueue "
        "(push, pop, remove, len) or None, got []"
    )
