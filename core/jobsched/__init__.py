"""jobsched: an asyncio job scheduler whose every policy is a pluggy plugin.

The public names are the reference design's facade (``JobScheduler``, ``Job``,
``AsyncJob``, the statuses, strategies and errors) plus what jobsched adds:
plugin management, function jobs, tasks (``@task``: a function that is a
registered job type), workflows (``chain``, ``group``, ``chord``, ``result_of``),
durable stores and the ``hookimpl`` marker for plugins.
"""

from __future__ import annotations

import pluggy

from ._cancel import CancelToken, JobCancelledError, cancel_token, run_with_token
from ._client import (
    Attempt,
    BlockingClient,
    Client,
    JobInfo,
    JobPage,
    LimitUse,
    Progress,
    ScheduleInfo,
    Stats,
    ThroughputBucket,
    WorkerInfo,
)
from ._clock import Clock, SystemClock
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
)
from ._executor import AbandoningExecutor, Executor
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
from ._options import MAX_DELAY, MAX_KEY_LENGTH, MAX_NESTING, MAX_RETRIES, MAX_WORKERS
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
from ._recurring import (
    COALESCE_POLICIES,
    MAX_INTERVAL,
    MIN_INTERVAL,
    IntervalTrigger,
    RecurringSchedule,
    Trigger,
    build_trigger,
)
from ._retry import RetryPolicy, RetryPolicyLike, retry_count, retry_delay
from ._scheduler import JobListener, JobScheduler
from ._status import ConcurrencyModel, JobPriority, JobStatus
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
from ._submission import Submission
from ._task import Task, TaskCall, TaskJob, task
from ._trigger_rules import TRIGGER_RULES
from ._workflow import Chain, Chord, Group, Workflow, chain, chord, group, result_of
from .store import (
    JobRow,
    NewJob,
    Outcome,
    ScheduleRow,
    SharedJobRow,
    SharedScheduleRow,
    SharedStore,
    Snapshot,
    Store,
    StoreContext,
    StoreError,
    check_snapshot,
)

#: Marks a plugin's hook implementations: ``@hookimpl def jobsched_register_strategies(...)``.
hookimpl = pluggy.HookimplMarker("jobsched")

__version__ = "0.1.0"

__all__ = [
    "COALESCE_POLICIES",
    "DISABLE_PLUGINS_ENV",
    "MAX_DELAY",
    "MAX_INTERVAL",
    "MAX_KEY_LENGTH",
    "MAX_NESTING",
    "MAX_RETRIES",
    "MAX_WORKERS",
    "MIN_INTERVAL",
    "PROGRESS_INTERVAL",
    "TRIGGER_RULES",
    "AbandoningExecutor",
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
    "Clock",
    "ConcurrencyModel",
    "CpuBoundJob",
    "EarliestDeadlineFirstStrategy",
    "Executor",
    "FIFOStrategy",
    "FifoReadyQueue",
    "FunctionJob",
    "Group",
    "IntervalTrigger",
    "InvalidTransitionError",
    "Job",
    "JobCancelledError",
    "JobFailedError",
    "JobInfo",
    "JobListener",
    "JobPage",
    "JobPriority",
    "JobRow",
    "JobScheduler",
    "JobSpec",
    "JobSpecError",
    "JobStatus",
    "JobTypeInfo",
    "LimitUse",
    "Limits",
    "LocalClient",
    "NewJob",
    "NonRetryableError",
    "NotPicklableError",
    "Outcome",
    "PluginError",
    "PluginManager",
    "PluginRecord",
    "PriorityReadyQueue",
    "PriorityStrategy",
    "Progress",
    "ProgressThrottle",
    "Rate",
    "ReadyQueue",
    "RecurringSchedule",
    "ResultUnavailableError",
    "Retry",
    "RetryPolicy",
    "RetryPolicyLike",
    "ScheduleInfo",
    "ScheduleRow",
    "SchedulerError",
    "SchedulerStoppedError",
    "SchedulingStrategy",
    "SharedJobRow",
    "SharedScheduleRow",
    "SharedStore",
    "Snapshot",
    "SortKey",
    "Stats",
    "Store",
    "StoreContext",
    "StoreError",
    "Submission",
    "SystemClock",
    "Task",
    "TaskCall",
    "TaskJob",
    "ThroughputBucket",
    "Trigger",
    "UnknownJobError",
    "UnknownScheduleError",
    "WorkerInfo",
    "Workflow",
    "build_job",
    "build_trigger",
    "cancel_token",
    "chain",
    "check_snapshot",
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
    "retry_count",
    "retry_delay",
    "run_with_token",
    "task",
]
