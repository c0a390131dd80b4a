"""The strategy interface: how the ready heap orders runnable jobs."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._job import Job

SortKey = tuple[Any, ...]


class SchedulingStrategy(ABC):
    """Turns a job into a sort key; the smallest key runs first.

    The key is computed once, when a job becomes runnable, and must not depend
    on the current time or on other jobs. That is what lets the ready queue be
    a heap (O(log n) push and pop) instead of a list re-sorted on every
    dispatch. End the key with ``job.seq`` (submit order) to break ties, and
    give every key the same length: the ready heap stores the key flattened,
    ``(*key, seq, job)``, which orders like the nested key only then.
    """

    @abstractmethod
    def key(self, job: Job) -> SortKey:
        """Smaller runs first. Must be time-invariant."""
