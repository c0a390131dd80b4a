"""The kernel: collaborators that own their state, composed by `Kernel`.

========== ============================================================
core       `Kernel`: composition, lifecycle, the submit fast path, finishing
workers    the worker loop, attempts, timeouts, retries
table      `JobTable`: jobs, keys, unique keys, attempt histories, the history bound
graph      `DependencyGraph`: who waits for whom; returns what an ending releases
queues     `Queues`: ready and delayed jobs, and the one admission chain
timers     `Timers`: recurring schedules on the kernel's own timers
operations `Operations`: retry, purge, result expiry, the reaper
progress   `ProgressBoard`: the latest report of each job, throttled listeners
listeners  `Listeners`: transition listeners, compiled for the hot path
executors  `Executors` built on first use; calls they abandoned still running
intake     what `submit` accepts: jobs, workflows, plain functions
port       the `Backend` protocol and `KernelPort`, what a backend may do
========== ============================================================
"""

from .core import Kernel
from .listeners import JobListener
from .port import AdmitHook, Backend, FinishedHook, KernelPort, StartingHook
from .progress import JobProgress, JobProgressListener
from .table import AttemptRecord

__all__ = [
    "AdmitHook",
    "AttemptRecord",
    "Backend",
    "FinishedHook",
    "JobListener",
    "JobProgress",
    "JobProgressListener",
    "Kernel",
    "KernelPort",
    "StartingHook",
]
