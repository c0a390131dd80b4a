"""What a plugin implements, in one namespace.

A strategy, executor, retry-policy or trigger plugin imports its base class
or protocol from here, and its ``@hookimpl`` marker from ``jobsched``; a store
plugin imports its rows and role protocols from ``jobsched.store``::

    from jobsched import hookimpl
    from jobsched.contracts import Register, SchedulingStrategy

The scheduler's own users need none of this: ``jobsched`` re-exports the
reference design's facade and what the guides document.
"""

from __future__ import annotations

from ._clock import Clock, SystemClock, TimerHandle
from ._executor import AbandoningExecutor, Executor
from ._recurring import IntervalTrigger, Trigger, build_trigger
from ._retry import RetryPolicy, RetryPolicyLike, retry_count, retry_delay
from ._strategy import (
    AgingPriorityStrategy,
    EarliestDeadlineFirstStrategy,
    FifoReadyQueue,
    FIFOStrategy,
    PriorityReadyQueue,
    PriorityStrategy,
    ReadyQueue,
    SchedulingStrategy,
    SortKey,
)
from .hookspecs import CommandHandler, CommandLine, Register, SchedulerView, ScheduleView

__all__ = [
    "AbandoningExecutor",
    "AgingPriorityStrategy",
    "Clock",
    "CommandHandler",
    "CommandLine",
    "EarliestDeadlineFirstStrategy",
    "Executor",
    "FIFOStrategy",
    "FifoReadyQueue",
    "IntervalTrigger",
    "PriorityReadyQueue",
    "PriorityStrategy",
    "ReadyQueue",
    "Register",
    "RetryPolicy",
    "RetryPolicyLike",
    "ScheduleView",
    "SchedulerView",
    "SchedulingStrategy",
    "SortKey",
    "SystemClock",
    "TimerHandle",
    "Trigger",
    "build_trigger",
    "retry_count",
    "retry_delay",
]
