"""The ``fifo`` strategy: submit order, no starvation, no prioritisation."""

from __future__ import annotations

from jobsched import FifoReadyQueue, Job, ReadyQueue, SchedulingStrategy, SortKey, hookimpl
from jobsched.hookspecs import Register


class FIFOStrategy(SchedulingStrategy):
    """Submit order. No starvation, no prioritisation."""

    def key(self, job: Job) -> SortKey:
        return (job.seq,)

    def ready_queue(self) -> ReadyQueue | None:
        # Keeps the order of `key` above: a subclass with its own key gets the heap.
        if type(self).key is not FIFOStrategy.key:
            return None
        return FifoReadyQueue()


@hookimpl
def jobsched_register_strategies(register: Register) -> None:
    register("fifo", FIFOStrategy)
