"""Fixed-rate recurring schedules."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._clock import TimerHandle
    from ._job import Job

_schedule_ids = itertools.count(1)


def reserve_schedule_ids(floor: int) -> None:
    """Make every later id ``sched-N`` have N > `floor` (ids restored from a store)."""
    global _schedule_ids
    following = next(_schedule_ids)
    _schedule_ids = itertools.count(max(following, floor + 1))


class RecurringSchedule:
    """Fires ``factory()`` every `interval` seconds.

    * Fixed rate, not fixed delay: the next fire time is computed from the
      previous *scheduled* time, so slow ticks don't make the schedule drift.
    * Missed fires are coalesced: a tick that comes three intervals late fires
      once, and the schedule jumps to the next future slot.
    * ``allow_overlap=False`` skips a fire while the previous job is unfinished.
    """

    def __init__(
        self,
        factory: Callable[[], Job],
        interval: float,
        first_run: float,
        allow_overlap: bool = False,
    ) -> None:
        if not interval > 0:
            raise ValueError(f"interval must be positive, got {interval!r}")
        self.schedule_id = f"sched-{next(_schedule_ids)}"
        self.factory = factory
        self.interval = interval
        self.next_run = first_run
        self.allow_overlap = allow_overlap
        self.active = True
        self.last_job_id: str | None = None
        self.fired = 0
        self.skipped = 0
        self.timer: TimerHandle | None = None

    def advance(self, now: float) -> int:
        """Move `next_run` past `now`; return how many fires were missed (coalesced)."""
        missed = int((now - self.next_run) // self.interval) + 1
        self.next_run += max(missed, 1) * self.interval
        return max(missed - 1, 0)

    def __repr__(self) -> str:
        state = "active" if self.active else "cancelled"
        return f"RecurringSchedule({self.schedule_id}, every {self.interval}s, {state})"

    def describe(self) -> dict[str, Any]:
        return {
            "schedule_id": self.schedule_id,
            "interval": self.interval,
            "next_run": self.next_run,
            "fired": self.fired,
            "skipped": self.skipped,
            "active": self.active,
        }
