"""The ``priority`` strategy: highest priority first, FIFO within a priority."""

from __future__ import annotations

from jobsched import Job, PriorityReadyQueue, ReadyQueue, SchedulingStrategy, SortKey, hookimpl
from jobsched.hookspecs import Register


class PriorityStrategy(SchedulingStrategy):
    """Highest priority first, FIFO within a priority. Low priority can starve."""

    def key(self, job: Job) -> SortKey:
        return (-job.priority, job.seq)

    def ready_queue(self) -> ReadyQueue | None:
        # Keeps the order of `key` above: a subclass with its own key gets the heap.
        if type(self).key is not PriorityStrategy.key:
            return None
        return PriorityReadyQueue()


@hookimpl
def jobsched_register_strategies(register: Register) -> None:
    register("priority", PriorityStrategy)
