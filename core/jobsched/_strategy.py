"""The strategy interface: how runnable jobs are ordered, and what holds them.

The four built-in strategies live here too, so the facade offers them without
importing a plugin; their plugin modules (``jobsched_plugins.fifo``, ...) only
register them by name.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections import deque
from heapq import heapify, heappop, heappush
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ._job import Job

SortKey = tuple[Any, ...]


class ReadyQueue(Protocol):
    """What holds a scheduler's runnable jobs, in the order of its strategy's key.

    A strategy may give the kernel one (`SchedulingStrategy.ready_queue`)
    when a structure cheaper than a heap keeps its order: `pop` must return
    the queued job with the smallest key, exactly as the kernel's own heap
    of keys would. Used by the loop thread only.
    """

    def push(self, job: Job) -> None:
        """Queue a runnable job (its `seq` is set; a retried job keeps its old one)."""

    def pop(self) -> Job | None:
        """Take the job with the smallest key out; None when the queue is empty."""

    def remove(self, job: Job) -> None:
        """Drop every entry of `job` (rare: an operator retries a job cancelled while queued)."""

    def __len__(self) -> int:
        """Entries queued (the kernel deletes lazily: cancelled jobs count until popped)."""


class SchedulingStrategy(ABC):
    """Turns a job into a sort key; the smallest key runs first.

    The key is computed once, when a job becomes runnable, and must not depend
    on the current time or on other jobs. That is what lets the ready queue be
    a heap (O(log n) push and pop) instead of a list re-sorted on every
    dispatch. End the key with ``job.seq`` (submit order) to break ties, and
    give every key the same length: the kernel's heap stores the key flattened,
    ``(*key, seq, job)``, which orders like the nested key only then.

    A strategy whose order a cheaper structure keeps may also return one from
    `ready_queue` (the built-in ``fifo`` and ``priority`` strategies do).
    """

    @abstractmethod
    def key(self, job: Job) -> SortKey:
        """Smaller runs first. Must be time-invariant."""

    def ready_queue(self) -> ReadyQueue | None:
        """A fresh queue that pops jobs in `key` order, or None for the kernel's heap.

        Called once per scheduler. The queue must agree with `key` for every
        job: a subclass that changes `key` must change this too (the built-in
        strategies give their queue only to an unchanged `key`). An object
        without ``push``, ``pop``, ``remove`` and ``len`` is refused (a
        `TypeError` naming the strategy) when the scheduler is built.
        """
        return None


class FifoReadyQueue:
    """Jobs by ``seq`` alone: the order of the key ``(job.seq,)``.

    A deque, since jobs mostly arrive in ``seq`` order: O(1) push and pop
    where a heap costs O(log n) comparisons of tuples. A job pushed after
    one with a larger ``seq`` (a retry, a delayed job coming due, a job a
    limit held back) waits in a small heap beside it, and `pop` takes
    whichever head is older, so the order stays exactly that of the key.
    """

    __slots__ = ("_jobs", "_last", "_late")

    def __init__(self) -> None:
        self._jobs: deque[Job] = deque()  # ascending seq
        self._late: list[tuple[int, Job]] = []  # heap: pushed out of seq order
        self._last = -1  # the largest seq ever appended to _jobs

    def push(self, job: Job) -> None:
        seq = job.seq
        if seq > self._last:
            self._last = seq
            self._jobs.append(job)
        else:
            heappush(self._late, (seq, job))

    def pop(self) -> Job | None:
        jobs = self._jobs
        late = self._late
        if late and (not jobs or late[0][0] < jobs[0].seq):
            return heappop(late)[1]
        return jobs.popleft() if jobs else None

    def remove(self, job: Job) -> None:
        if job in self._jobs:
            self._jobs = deque(j for j in self._jobs if j is not job)
        _remove_from_heap(self._late, job)

    def __len__(self) -> int:
        return len(self._jobs) + len(self._late)


class _Level:
    """One priority's jobs in a `PriorityReadyQueue` (a `FifoReadyQueue`, inlined)."""

    __slots__ = ("jobs", "last", "late", "priority")

    def __init__(self, priority: Any) -> None:
        self.priority = priority
        self.jobs: deque[Job] = deque()
        self.late: list[tuple[int, Job]] = []
        self.last = -1


class PriorityReadyQueue:
    """Highest ``priority`` first, then ``seq``: the order of ``(-job.priority, job.seq)``.

    One FIFO (as `FifoReadyQueue`) per priority level, created when a level
    is first used: a pop looks at a few levels instead of sifting through
    a heap of every queued job.
    """

    __slots__ = ("_by_priority", "_levels")

    def __init__(self) -> None:
        self._by_priority: dict[Any, _Level] = {}
        self._levels: list[_Level] = []  # highest priority first

    def push(self, job: Job) -> None:
        priority = job.priority
        try:
            level = self._by_priority[priority]
        except KeyError:  # the first job of this priority
            level = self._by_priority[priority] = _Level(priority)
            self._levels.append(level)
            self._levels.sort(key=lambda lv: -lv.priority)
        seq = job.seq
        if seq > level.last:
            level.last = seq
            level.jobs.append(job)
        else:
            heappush(level.late, (seq, job))

    def pop(self) -> Job | None:
        for level in self._levels:
            jobs = level.jobs
            late = level.late
            if late:
                if not jobs or late[0][0] < jobs[0].seq:
                    return heappop(late)[1]
                return jobs.popleft()
            if jobs:
                return jobs.popleft()
        return None

    def remove(self, job: Job) -> None:
        for level in self._levels:
            if job in level.jobs:
                level.jobs = deque(j for j in level.jobs if j is not job)
            _remove_from_heap(level.late, job)

    def __len__(self) -> int:
        return sum(len(level.jobs) + len(level.late) for level in self._levels)


def _remove_from_heap(heap: list[tuple[int, Job]], job: Job) -> None:
    if any(entry[1] is job for entry in heap):
        heap[:] = [entry for entry in heap if entry[1] is not job]
        heapify(heap)


# ── the built-in strategies ───────────────────────────────────────────
class FIFOStrategy(SchedulingStrategy):
    """Submit order. No starvation, no prioritisation."""

    def key(self, job: Job) -> SortKey:
        return (job.seq,)

    def ready_queue(self) -> ReadyQueue | None:
        # Keeps the order of `key` above: a subclass with its own key gets the heap.
        if type(self).key is not FIFOStrategy.key:
            return None
        return FifoReadyQueue()


class PriorityStrategy(SchedulingStrategy):
    """Highest priority first, FIFO within a priority. Low priority can starve."""

    def key(self, job: Job) -> SortKey:
        return (-job.priority, job.seq)

    def ready_queue(self) -> ReadyQueue | None:
        # Keeps the order of `key` above: a subclass with its own key gets the heap.
        if type(self).key is not PriorityStrategy.key:
            return None
        return PriorityReadyQueue()


class AgingPriorityStrategy(SchedulingStrategy):
    """Priority with aging, which bounds starvation.

    ``effective(now) = priority + age_rate * (now - submitted_at)``. Every
    waiting job ages at the same rate, so comparing two jobs at any `now` gives
    the same answer as comparing ``priority - age_rate * submitted_at``: a
    time-invariant heap key. With ``age_rate=0.1`` a LOW job outranks a newly
    submitted HIGH one after waiting 20 s (2 levels at 0.1 per second).
    """

    def __init__(self, age_rate: float = 0.1) -> None:
        if not age_rate > 0:
            raise ValueError(f"age_rate must be positive, got {age_rate!r}")
        self.age_rate = age_rate

    def key(self, job: Job) -> SortKey:
        return (-(job.priority - self.age_rate * job.submitted_at), job.seq)


class EarliestDeadlineFirstStrategy(SchedulingStrategy):
    """Earliest deadline first; jobs without a deadline go last, by priority."""

    def key(self, job: Job) -> SortKey:
        deadline = job.deadline  # a property: read once
        if deadline is None:
            deadline = math.inf
        return (deadline, -job.priority, job.seq)
