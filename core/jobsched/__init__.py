"""jobsched: an asyncio job scheduler whose every policy is a pluggy plugin.

The public names are the reference design's facade (``JobScheduler``, ``Job``,
``AsyncJob``, the statuses, strategies and errors) plus what jobsched adds:
plugin management, function jobs, tasks (``@task``: a function that is a
registered job type), workflows (``chain``, ``group``, ``chord``, ``result_of``),
durable stores and the ``hookimpl`` marker for plugins.
"""

from __future__ import annotations

import importlib
from typing import Any

import pluggy

from ._blocking import BlockingClient
from ._cancel import CancelToken, JobCancelledError, cancel_token, run_with_token
from ._client import Client
from ._errors import (
    BadArgumentsError,
    InvalidTransitionError,
    JobFailedError,
    NonRetryableError,
    NotPicklableError,
    PluginError,
    ResultUnavailableError,
    Retry,
    SchedulerError,
    SchedulerStoppedError,
    UnknownJobError,
    UnknownScheduleError,
    UnknownWorkerError,
)
from ._job import AsyncJob, BlockingJob, CpuBoundJob, FunctionJob, Job
from ._jobtypes import (
    ArgumentInfo,
    JobSpec,
    JobSpecError,
    JobTypeInfo,
    build_job,
    describe_job_type,
    job_spec,
    job_type_info,
    job_types,
)
from ._limits import Limits, Rate, job_type_of
from ._local_client import LocalClient
from ._operator import OperatorAPI
from ._options import (
    DEFAULT_QUEUE,
    MAX_DELAY,
    MAX_GROUP_LENGTH,
    MAX_KEY_LENGTH,
    MAX_NESTING,
    MAX_QUEUE_LENGTH,
    MAX_RETRIES,
    MAX_WORKERS,
    check_queue,
)
from ._plugins import (
    DISABLE_PLUGINS_ENV,
    PluginManager,
    PluginRecord,
    default_plugin_manager,
    load_plugins,
)
from ._progress import (
    PROGRESS_INTERVAL,
    ProgressThrottle,
    progress,
    progress_reporter,
    progress_sender,
)
from ._records import (
    HISTORY_WINDOWS,
    MAX_SCHEDULE_RUNS,
    WORKER_STATES,
    Attempt,
    History,
    HistoryBucket,
    JobInfo,
    JobPage,
    LimitUse,
    Progress,
    QueueBacklog,
    QueueInfo,
    ScheduleInfo,
    Stats,
    ThroughputBucket,
    TypeStats,
    WorkerInfo,
    WorkerRecord,
)
from ._recurring import (
    COALESCE_POLICIES,
    MAX_INTERVAL,
    MIN_INTERVAL,
    IntervalTrigger,
    RecurringSchedule,
)
from ._retry import RetryPolicy
from ._scheduler import JobListener, JobScheduler
from ._status import ConcurrencyModel, JobPriority, JobStatus
from ._strategy import (
    AgingPriorityStrategy,
    EarliestDeadlineFirstStrategy,
    FIFOStrategy,
    PriorityStrategy,
    SchedulingStrategy,
)
from ._submission import Submission
from ._task import Task, TaskCall, TaskJob, task
from ._trigger_rules import TRIGGER_RULES
from ._version import __version__ as __version__
from ._workflow import Chain, Chord, Group, Workflow, chain, chord, group, result_of
from .backends.schedules import OVERDUE_AFTER
from .store import (
    StoreError,
)

#: Marks a plugin's hook implementations: ``@hookimpl def jobsched_register_strategies(...)``.
hookimpl = pluggy.HookimplMarker("jobsched")


__all__ = [
    "COALESCE_POLICIES",
    "DEFAULT_QUEUE",
    "DISABLE_PLUGINS_ENV",
    "HISTORY_WINDOWS",
    "MAX_DELAY",
    "MAX_GROUP_LENGTH",
    "MAX_INTERVAL",
    "MAX_KEY_LENGTH",
    "MAX_NESTING",
    "MAX_QUEUE_LENGTH",
    "MAX_RETRIES",
    "MAX_SCHEDULE_RUNS",
    "MAX_WORKERS",
    "MIN_INTERVAL",
    "OVERDUE_AFTER",
    "PROGRESS_INTERVAL",
    "TRIGGER_RULES",
    "WORKER_STATES",
    "AgingPriorityStrategy",
    "ArgumentInfo",
    "AsyncJob",
    "Attempt",
    "BadArgumentsError",
    "BlockingClient",
    "BlockingJob",
    "CancelToken",
    "Chain",
    "Chord",
    "Client",
    "ConcurrencyModel",
    "CpuBoundJob",
    "EarliestDeadlineFirstStrategy",
    "FIFOStrategy",
    "FunctionJob",
    "Group",
    "History",
    "HistoryBucket",
    "IntervalTrigger",
    "InvalidTransitionError",
    "Job",
    "JobCancelledError",
    "JobFailedError",
    "JobInfo",
    "JobListener",
    "JobPage",
    "JobPriority",
    "JobScheduler",
    "JobSpec",
    "JobSpecError",
    "JobStatus",
    "JobTypeInfo",
    "LimitUse",
    "Limits",
    "LocalClient",
    "NonRetryableError",
    "NotPicklableError",
    "OperatorAPI",
    "PluginError",
    "PluginManager",
    "PluginRecord",
    "PriorityStrategy",
    "Progress",
    "ProgressThrottle",
    "QueueBacklog",
    "QueueInfo",
    "Rate",
    "RecurringSchedule",
    "ResultUnavailableError",
    "Retry",
    "RetryPolicy",
    "ScheduleInfo",
    "SchedulerError",
    "SchedulerStoppedError",
    "SchedulingStrategy",
    "Stats",
    "StoreError",
    "Submission",
    "Task",
    "TaskCall",
    "TaskJob",
    "ThroughputBucket",
    "TypeStats",
    "UnknownJobError",
    "UnknownScheduleError",
    "UnknownWorkerError",
    "WorkerInfo",
    "WorkerRecord",
    "Workflow",
    "build_job",
    "cancel_token",
    "chain",
    "check_queue",
    "chord",
    "default_plugin_manager",
    "describe_job_type",
    "group",
    "hookimpl",
    "job_spec",
    "job_type_info",
    "job_type_of",
    "job_types",
    "load_plugins",
    "progress",
    "progress_reporter",
    "progress_sender",
    "result_of",
    "run_with_token",
    "task",
]


# Names plugin and store authors import from `jobsched.contracts` and
# `jobsched.store`; still found here for plugins written before those
# namespaces held them, but not part of the package's own surface.
_MOVED = {
    "AbandoningExecutor": "jobsched.contracts",
    "Clock": "jobsched.contracts",
    "Executor": "jobsched.contracts",
    "FifoReadyQueue": "jobsched.contracts",
    "PriorityReadyQueue": "jobsched.contracts",
    "ReadyQueue": "jobsched.contracts",
    "RetryPolicyLike": "jobsched.contracts",
    "SortKey": "jobsched.contracts",
    "SystemClock": "jobsched.contracts",
    "Trigger": "jobsched.contracts",
    "build_trigger": "jobsched.contracts",
    "retry_count": "jobsched.contracts",
    "retry_delay": "jobsched.contracts",
    "JobRow": "jobsched.store",
    "NewJob": "jobsched.store",
    "Outcome": "jobsched.store",
    "ScheduleRow": "jobsched.store",
    "SharedJobRow": "jobsched.store",
    "SharedScheduleRow": "jobsched.store",
    "SharedStore": "jobsched.store",
    "Snapshot": "jobsched.store",
    "Store": "jobsched.store",
    "StoreContext": "jobsched.store",
    "check_snapshot": "jobsched.store",
}


def __getattr__(name: str) -> Any:
    home = _MOVED.get(name)
    if home is None:
        raise AttributeError(f"module 'jobsched' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
