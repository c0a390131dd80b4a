"""Status, priority and concurrency-model enums, and the legal status edges."""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum, IntEnum


class JobPriority(IntEnum):
    """How urgent a job is; higher runs first under the priority strategies."""

    LOW = 0
    MEDIUM = 1
    HIGH = 2
    CRITICAL = 3


class JobStatus(Enum):
    """Where a job is in its lifecycle. Only the edges in `allowed_next` are legal."""

    PENDING = "pending"  # waiting for its run time, its dependencies, or a worker
    RUNNING = "running"
    RETRY_WAIT = "retry_wait"  # failed, waiting out its backoff delay
    COMPLETED = "completed"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"

    # Plain attributes set on each member below (bare annotations are not enum
    # members), not properties: the kernel reads them on every transition, and
    # an attribute costs a third of a property call. Treat them as read-only.
    #: True for COMPLETED, FAILED, TIMED_OUT and CANCELLED.
    is_terminal: bool
    #: The statuses this one may move to.
    allowed_next: tuple[JobStatus, ...]


# Per-member attributes instead of a dict keyed by the enum: a plain Enum is
# hashed in Python on every lookup, and the kernel checks edges on every
# transition. `new in tuple` compares by identity first, in C.
_EDGES: dict[str, tuple[JobStatus, ...]] = {
    "PENDING": (JobStatus.RUNNING, JobStatus.CANCELLED),
    "RUNNING": (
        JobStatus.COMPLETED,
        JobStatus.FAILED,
        JobStatus.TIMED_OUT,
        JobStatus.CANCELLED,
        JobStatus.RETRY_WAIT,
    ),
    "RETRY_WAIT": (JobStatus.RUNNING, JobStatus.CANCELLED),
}
for _member in JobStatus:
    _member.allowed_next = _EDGES.get(_member.name, ())
    _member.is_terminal = _member.name not in _EDGES

TERMINAL_STATUSES = frozenset(s for s in JobStatus if s.is_terminal)


def listener_statuses(statuses: object, culprit: str) -> tuple[JobStatus, ...] | None:
    """The target statuses a transition listener asked for, checked; None: all of them.

    A tuple, not a set: the kernel tests ``new in wanted``, which compares
    by identity in C, where a set would hash the enum in Python.
    """
    if statuses is None:
        return None
    if isinstance(statuses, (str, JobStatus)) or not isinstance(statuses, Iterable):
        raise TypeError(
            f"{culprit}: statuses must be a collection of JobStatus members, got {statuses!r}"
        )
    wanted: list[JobStatus] = []
    for status in statuses:
        if not isinstance(status, JobStatus):
            raise TypeError(f"{culprit}: statuses holds {status!r}, not a JobStatus member")
        if status not in wanted:
            wanted.append(status)
    if not wanted:
        raise ValueError(f"{culprit}: statuses is empty (None means every transition)")
    return tuple(wanted)


class ConcurrencyModel(str, Enum):
    """Where a job runs; the value is the name of the executor plugin that runs it.

    ASYNC   -- on the event loop, for I/O-bound code written with ``await``.
               A blocking call here stalls every job, so never do CPU work in one.
    THREAD  -- in a thread pool, for blocking I/O (sync drivers, requests).
               Threads share the GIL, so CPU-bound Python gets no speedup.
    PROCESS -- in a process pool, for CPU-bound work that must escape the GIL.
               The job and its result are pickled across the process boundary.

    A job may also name any other registered executor with a plain string.
    """

    ASYNC = "async"
    THREAD = "thread"
    PROCESS = "process"

    def __str__(self) -> str:
        return self.value
