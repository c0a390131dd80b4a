"""The kernel: queues, workers, retries, dependencies, cancellation, shutdown.

The kernel knows no store. How jobs are kept is a `Backend`, chosen once when a
scheduler is composed (`jobsched.backends`: in memory, a journal to a store one
process owns, or a store several processes share). The kernel calls its
backend at a few documented points; the backend calls the kernel's public
methods (the ones under "Backend-facing API"), never its private state.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import sys
import threading
from collections import deque
from collections.abc import Callable, Coroutine, Iterable, Mapping
from heapq import heapify, heappop, heappush
from typing import TYPE_CHECKING, Any, Protocol, cast

import structlog

from . import _fork
from ._clock import Clock, SystemClock, TimerHandle
from ._errors import (
    InvalidTransitionError,
    NonRetryableError,
    PluginError,
    SchedulerError,
    SchedulerStoppedError,
    UnknownJobError,
    UnknownScheduleError,
)
from ._executor import Executor
from ._fork import leave_forked_child
from ._job import FunctionJob, Job, refuse_option_parameters
from ._jobtypes import build_retry_policy
from ._limits import Limiter, Limits, job_type_of
from ._options import (
    MAX_DELAY,
    NOT_GIVEN,
    check_delay,
    check_job_id,
    check_key,
    check_num_workers,
    check_retention,
    check_retry_policy,
    id_list,
    is_retry_spec,
    to_keep_result,
    to_result_ttl,
)
from ._plugins import (
    DISABLE_PLUGINS_ENV,
    PluginManager,
    ProgressListener,
    Registration,
    TransitionListener,
)
from ._progress import ProgressThrottle, set_worker_reporter
from ._recurring import (
    CoalescePolicy,
    IntervalTrigger,
    RecurringSchedule,
    Trigger,
    build_trigger,
)
from ._result_of import job_id_of, not_json, unavailable
from ._retry import RetryPolicy
from ._retry_filter import retry_verdict
from ._status import JobStatus, listener_statuses
from ._strategy import ReadyQueue, SchedulingStrategy, SortKey
from ._submission import check_workflow_options, job_with_options
from ._trigger_rules import ALL_SUCCESS, Upstreams, check_trigger_rule
from ._workflow import Workflow
from .store import result_as_json

if TYPE_CHECKING:
    from collections.abc import Sequence

logger = structlog.get_logger("jobsched")

JobListener = Callable[[Job, JobStatus, JobStatus], None]
# A transition listener and the target statuses it wants (None: every one).
_Wanted = tuple[TransitionListener, tuple[JobStatus, ...] | None]
#: ``listener(job, done, total, message)``: see `Kernel.add_progress_listener`.
JobProgressListener = Callable[[Job, float, "float | None", "str | None"], None]

PENDING = JobStatus.PENDING
RUNNING = JobStatus.RUNNING
RETRY_WAIT = JobStatus.RETRY_WAIT
COMPLETED = JobStatus.COMPLETED
FAILED = JobStatus.FAILED
TIMED_OUT = JobStatus.TIMED_OUT
CANCELLED = JobStatus.CANCELLED
#: The error of an attempt a shutdown tore down.
SHUTDOWN = "scheduler shut down"

#: The keywords `JobScheduler.submit` takes beside a `FunctionJob`'s options.
SUBMIT_OPTIONS = (
    "delay",
    "depends_on",
    "unique_key",
    "key",
    "result_ttl",
    "keep_result",
    "trigger_rule",
)

#: The statuses `Kernel.retry_job` takes a job out of.
RETRYABLE = (FAILED, TIMED_OUT, CANCELLED)


class AttemptRecord(tuple):  # type: ignore[type-arg]
    """One ended attempt of a job: ``(number, status, error, started_at, finished_at)``.

    Times are the kernel clock's monotonic seconds. A plain tuple subclass:
    one is built only when an attempt fails and is retried, or when an
    operator retries a finished job.
    """

    __slots__ = ()

    def __new__(
        cls,
        number: int,
        status: JobStatus,
        error: str | None,
        started_at: float | None,
        finished_at: float | None,
    ) -> AttemptRecord:
        return tuple.__new__(cls, (number, status, error, started_at, finished_at))

    number = property(lambda self: self[0], doc="1 for the first attempt")
    status = property(lambda self: self[1], doc="how it ended (FAILED, TIMED_OUT, ...)")
    error = property(lambda self: self[2], doc="its error, if any")
    started_at = property(lambda self: self[3], doc="monotonic start")
    finished_at = property(lambda self: self[4], doc="monotonic end")


class JobProgress(tuple):  # type: ignore[type-arg]
    """A job's latest progress report: ``(done, total, message, updated_at)``.

    `updated_at` is wall-clock epoch seconds (the clock's ``time()``).
    """

    __slots__ = ()

    def __new__(
        cls, done: float, total: float | None, message: str | None, updated_at: float
    ) -> JobProgress:
        return tuple.__new__(cls, (done, total, message, updated_at))

    done = property(lambda self: self[0], doc="how much is done")
    total = property(lambda self: self[1], doc="out of how much (None: unknown)")
    message = property(lambda self: self[2], doc="what it is doing")
    updated_at = property(lambda self: self[3], doc="when it was reported (wall clock)")


class _Notes:
    """What the kernel knows about a job beyond its own fields; most jobs have none."""

    __slots__ = ("depends_on", "history", "progress", "throttle", "trigger_rule")

    def __init__(self) -> None:
        self.depends_on: tuple[str, ...] = ()
        self.trigger_rule = ALL_SUCCESS
        self.history: list[AttemptRecord] = []
        self.progress: JobProgress | None = None
        self.throttle: ProgressThrottle | None = None


class _WorkerReporter:
    """Where `jobsched.progress` reports go from the jobs one worker runs."""

    __slots__ = ("kernel", "slot")

    def __init__(self, kernel: Kernel, slot: _Slot) -> None:
        self.kernel = kernel
        self.slot = slot

    def report_current(self, done: float, total: float | None, message: str | None) -> None:
        job = self.slot.job
        if job is None:
            raise SchedulerError("progress() called outside a running job")
        self.kernel.report_progress(job, done, total, message)

    def report_threadsafe(
        self, job: Job, done: float, total: float | None, message: str | None
    ) -> None:
        self.kernel.report_progress_threadsafe(job, done, total, message)


class _CancelCountingTask(asyncio.Task):  # type: ignore[type-arg]
    """A worker task for Python 3.10, whose tasks cannot say they are being cancelled.

    Counts cancel requests as 3.11's ``Task.cancelling()`` does, so that a
    job that raises ``CancelledError`` itself can be told from a worker
    being cancelled.
    """

    _requests = 0

    def cancel(self, msg: Any = None) -> bool:
        self._requests += 1
        return super().cancel(msg)

    def cancelling(self) -> int:
        return self._requests

    def uncancel(self) -> int:
        if self._requests > 0:
            self._requests -= 1
        return self._requests


def _start_worker(coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
    if sys.version_info >= (3, 11):
        return asyncio.create_task(coro, name=name)
    return _CancelCountingTask(coro, name=name)


class _Slot:
    """One worker and the attempt it is running, if any."""

    __slots__ = ("cancel_requested", "deadline", "expired", "job", "reporter", "task")

    def __init__(self) -> None:
        self.job: Job | None = None
        self.task: asyncio.Task[None] | None = None
        self.deadline = math.inf
        self.expired = False  # the watchdog cancelled this attempt: a timeout
        self.cancel_requested = False  # cancel(job_id) cancelled this attempt
        self.reporter: _WorkerReporter | None = None


#: ``admit(job, delay, depends_on, key, unique_key, trigger_rule)``: see `Backend.admit`.
AdmitHook = Callable[[Job, float, "Sequence[str]", "str | None", "str | None", str], "str | None"]
#: ``finished(job_id, status)``: see `Backend.finished`.
FinishedHook = Callable[[str, JobStatus], None]
#: ``starting(job) -> bool``: see `Backend.starting`.
StartingHook = Callable[[Job], bool]


class Backend(Protocol):
    """How a kernel's jobs are kept: in memory, in a journal, or in a shared store.

    Chosen once, when a scheduler is composed (`jobsched.backends`). The
    kernel calls it at the points below and nowhere else; it works on the
    kernel through the kernel's backend-facing methods.

    Per-job hooks are attributes that may be None: None costs nothing on the
    per-job path (the in-memory backend sets all four to None).

    - ``listener(job, old, new)``: called first on every transition.
    - ``admit(job, delay, depends_on, key, unique_key, trigger_rule) -> str |
      None``: a new job, checked by the kernel and not recorded yet
      (`trigger_rule` is one of `TRIGGER_RULES`, ``"all_success"`` by
      default: a backend that keeps jobs keeps it with `depends_on`). Return
      an id to take the job away (the kernel records nothing: a shared
      queue, or a submit deferred until the store is open); None lets the
      kernel queue it. May raise to refuse the job, and may give it a new id.
    - ``finished(job_id, status)``: a job reached a terminal state. With this
      hook the kernel holds its dependents back until the backend calls
      `Kernel.release_committed` (durable before visible).
    - ``progress(job, done, total, message)``: a running job's progress,
      throttled (at most 4 a second per job); called only for jobs that
      report progress.
    - ``starting(job) -> bool``: a worker took `job` from the ready queue and
      is about to start it. False drops it unstarted: the kernel forgets it
      (no transition, as `forget`), because the backend no longer holds it
      (a shared store's lease that ran out).
    """

    listener: TransitionListener | None
    admit: AdmitHook | None
    finished: FinishedHook | None
    progress: ProgressListener | None
    starting: StartingHook | None

    def bind(self, kernel: Kernel) -> None:
        """Called once by the kernel's constructor, before anything else."""

    def refused(self, job: Job) -> None:
        """The kernel refused a job `admit` let through (say, an unknown dependency)."""

    def retry(self, job: Job) -> bool:
        """`job` waits for its retry (RETRY_WAIT, `run_at` set). True: the backend
        keeps it from now on and the kernel forgets it; False: the kernel queues it."""

    def interrupted(self, job: Job) -> bool:
        """A shutdown tears down `job`'s attempt: it ends CANCELLED in the kernel,
        but is not a cancel (it should run again, as after a crash). True when
        the backend keeps the job to run again (it is handed back)."""

    def retried(self, job: Job) -> None:
        """An operator is making the terminal `job` PENDING again
        (`Kernel.retry_job`); raise to refuse, before anything changed."""

    def purged(self, job_ids: Sequence[str], before: float, statuses: Sequence[JobStatus]) -> None:
        """`Kernel.purge` forgot these terminal jobs, those in `statuses` that
        finished at or before `before` (monotonic): a store deletes them (and
        older ones of the same kind it keeps)."""

    def results_expired(self, jobs: Sequence[Job]) -> None:
        """`Kernel.expire_results` dropped these completed jobs' results: a
        store drops them too (called from the reaper's timer, never per job)."""

    def cancel(self, job_id: str) -> bool:
        """Cancel a job the kernel does not know (held elsewhere); False if unknown."""

    def resolve(self, job_id: str) -> str:
        """The kept job's id for an id `submit` returned (a store may dedupe by key)."""

    def schedule_recurring(
        self,
        factory: Callable[[], Job],
        interval: float | None,
        trigger: Trigger | dict[str, Any] | None,
        options: dict[str, Any],
    ) -> str:
        """Add a recurring schedule (`Kernel.schedule_recurring`'s arguments);
        the kernel's own `Kernel.add_recurring` unless the backend keeps schedules."""

    def cancel_recurring(self, schedule_id: str) -> bool:
        """Stop a schedule the kernel does not know; False if unknown."""

    def schedule_added(self, sched: RecurringSchedule, spec: Any, key: str | None) -> None:
        """A new kernel schedule; `spec` is how its trigger was given."""

    def schedule_changed(self, sched: RecurringSchedule) -> None:
        """A kernel schedule fired, ended or was cancelled."""

    def schedule_fired(self, sched: RecurringSchedule, job_id: str) -> None:
        """A kernel schedule submitted `job_id`."""

    async def open(self) -> None:
        """``start()``: open the store and restore what it holds, before the workers start."""

    async def stop_claiming(self) -> None:
        """First thing in ``stop()``: take no more work."""

    async def close(self) -> BaseException | None:
        """Last thing in ``stop()``, after the workers exited: write what is left and
        close the store. Returns an error for ``stop()`` to raise, or None."""

    async def flush(self) -> None:
        """Return once every change so far is kept (see `Kernel.flush`)."""

    async def join(self) -> None:
        """Wait until every job submitted here is terminal (see `Kernel.join`)."""


class _Executors(dict):  # type: ignore[type-arg]
    """Executors by model name, each built on first use.

    A broken third-party executor then affects only the jobs that ask for it:
    building it fails once, and every attempt on it ends FAILED (not retried)
    with the error, naming the plugin and how to disable it. Looking up a
    built executor is a plain dict lookup (``__missing__`` runs only on a miss).
    """

    def __init__(self, registry: Mapping[str, Registration], workers: int) -> None:
        super().__init__()
        self.registry = registry
        self.workers = workers

    def __missing__(self, model: str) -> Executor:
        name = str(getattr(model, "value", model))
        reg = self.registry[name]
        try:
            executor: Executor = reg.factory(workers=self.workers)
        except Exception as exc:
            message = (
                f"executor {name!r} from plugin {reg.plugin!r} failed to start: "
                f"{type(exc).__name__}: {exc}; disable the plugin with "
                f"{DISABLE_PLUGINS_ENV}={reg.plugin} or submit the job to another executor"
            )
            logger.error(
                "executor failed to start", executor=name, plugin=reg.plugin, error=str(exc)
            )
            executor = _BrokenExecutor(message)
        self[model] = executor
        return executor


class _BrokenExecutor:
    """Stands in for an executor that failed to start: every attempt fails, not retried."""

    def __init__(self, message: str) -> None:
        self.message = message

    def invoke(self, job: Job) -> Any:
        raise NonRetryableError(self.message)

    def shutdown(self) -> None:
        pass


def default_factory(plugins: PluginManager, kind: str, name: str, option: str) -> Any:
    """The factory of a default the kernel relies on, or an error saying what disabled it.

    `option` is how to do without it (``"pass strategy=..."``).
    """
    reg = plugins.registry[kind].get(name)
    if reg is not None:
        return reg.factory
    raise PluginError(f"{missing_default(plugins, kind, name)}; or {option}")


def missing_default(plugins: PluginManager, kind: str, name: str) -> str:
    """Why a default `name` of `kind` (``"strategies"``...) is not registered, and the fix."""
    singular = {"strategies": "strategy", "executors": "executor"}.get(kind, kind.rstrip("s"))
    for record in plugins.records():
        if record.name == name and record.status != "loaded":
            return (
                f"the default {singular} {name!r} is unavailable: its plugin {name!r} is "
                f"{record.status} ({record.error}); re-enable it (take {name!r} out of "
                f"{DISABLE_PLUGINS_ENV}, the deny-list or the allow-list)"
            )
    return f"{plugins.unknown_name_message(kind, name)}; it is the default {singular}"


_PROBE_SEQ = -7_654_321  # a submit order no real job has


def _probe() -> None:
    """The function of the job `_key_ending_in_seq` asks a strategy about."""


def _key_ending_in_seq(key: Callable[[Job], SortKey]) -> Callable[[Job], SortKey]:
    """The strategy's key function, made to end in ``job.seq``.

    Ready-heap entries are ``(*key, job)``: the key's last element must be
    unique so that two jobs are never compared. A key that ends in ``job.seq``
    already (every built-in strategy's) is used as it is, at no cost; any
    other is wrapped once, here, to append it.
    """
    probe = FunctionJob(_probe)
    probe.seq = _PROBE_SEQ
    try:
        ends_in_seq = tuple(key(probe))[-1:] == (_PROBE_SEQ,)
    except Exception:  # a key that cannot judge a plain job: wrap it to be safe
        ends_in_seq = False
    if ends_in_seq:
        return key

    def key_and_seq(job: Job) -> SortKey:
        return (*key(job), job.seq)

    return key_and_seq


class _KeyHeap:
    """The ready queue of a strategy that brings none: a heap of ``(*key, job)``.

    Entries are the strategy key flattened with the job, not (key, job): one
    tuple instead of two saves 48 bytes per pending job, and comparing flat
    entries halves the cost of a heap pop (about 1 us at 100k queued). Same
    order as nested keys as long as a strategy's keys have one length, which
    every built-in's do. The key ends in ``job.seq`` (unique), so the job
    itself is never compared.
    """

    __slots__ = ("entries", "key")

    def __init__(self, key: Callable[[Job], SortKey]) -> None:
        self.key = key
        self.entries: list[tuple[Any, ...]] = []

    def push(self, job: Job) -> None:
        heappush(self.entries, (*self.key(job), job))

    def push_entry(self, entry: tuple[Any, ...]) -> None:
        """Queue an entry `submit` built (it computes the key before recording anything)."""
        heappush(self.entries, entry)

    def pop(self) -> Job | None:
        entries = self.entries
        return heappop(entries)[-1] if entries else None

    def remove(self, job: Job) -> None:
        entries = self.entries
        if any(entry[-1] is job for entry in entries):
            self.entries = [entry for entry in entries if entry[-1] is not job]
            heapify(self.entries)

    def __len__(self) -> int:
        return len(self.entries)


class Kernel:
    """The queues, workers and state machine of a scheduler, over one `Backend`.

    `JobScheduler` (the facade) composes a kernel from plugins and a store;
    build that, not this.

    Data structures, all owned by the event-loop thread (no locks: every
    check-then-act runs with no ``await`` in the middle):

    ``_ready``       the runnable jobs, in the strategy's order: the strategy's
                     own `ReadyQueue` (fifo, priority), else a heap of (*key, job)
    ``_delayed``     heap of (run_at, seq, job): delayed first runs and retry backoffs
    ``_blocked``     job id -> ids of unmet dependencies
    ``_dependents``  job id -> ids of jobs waiting on it (until it ends)
    ``_downstream``  job id -> ids of every job submitted to depend on it,
                     in submit order (kept while both are known: `dependents`)
    ``_slots``       one per worker: the attempt it runs, its deadline

    A cancelled job stays in its queue and is skipped when popped (lazy
    deletion, O(1) cancel). One timer wakes the delayed heap, one watchdog timer
    enforces every running job's timeout, one timer per recurring schedule: no
    polling anywhere.
    """

    def __init__(
        self,
        strategy: SchedulingStrategy | str | None,
        *,
        plugins: PluginManager,
        backend: Backend,
        num_workers: int = 4,
        rng: random.Random | None = None,
        history_limit: int = 10_000,
        clock: Clock | None = None,
        limits: Limits | Mapping[str, Any] | None = None,
        result_ttl: float | None = None,
        retention: float | None = None,
    ) -> None:
        check_num_workers(num_workers)
        if history_limit < 0:
            raise ValueError(f"history_limit must be >= 0, got {history_limit!r}")
        self._result_ttl = to_result_ttl(result_ttl)
        self._retention = check_retention(retention)
        self.plugins = plugins
        if strategy is None:
            strategy = default_factory(
                plugins, "strategies", "priority", "pass a strategy (strategy=...)"
            )()
        elif isinstance(strategy, str):
            strategy = plugins.resolve("strategies", strategy)()
        key = getattr(strategy, "key", None)
        if not callable(key):
            raise TypeError(f"strategy must have a key(job) method, got {strategy!r}")
        self.strategy: SchedulingStrategy = strategy  # type: ignore[assignment]
        self._key: Callable[[Job], SortKey] = _key_ending_in_seq(key)
        self.num_workers = num_workers
        # Built on first use: a broken executor fails only the jobs that use it.
        self._executors = _Executors(plugins.registry["executors"], num_workers)
        self._rng = rng or random.Random()
        self._history_limit = history_limit
        self._clock: Clock = clock or SystemClock()
        self._limiter: Limiter | None = None
        if limits is not None and (limits := Limits.coerce(limits)):
            self._limiter = self._make_limiter(limits)
            # Swapped, not branched on: a scheduler without limits keeps the plain path.
            self._take_next = self._take_next_limited  # type: ignore[method-assign]
        self._unique: dict[str, str] = {}  # dedupe key -> id of its pending/running job
        self._unique_of: dict[str, str] = {}  # job id -> its dedupe key

        self._jobs: dict[str, Job] = {}
        # The strategy's own queue when it has one (a deque per priority pops
        # in O(1) where a heap of 100k entries costs ~1 us per pop); else a heap.
        make_queue = getattr(strategy, "ready_queue", None)
        queue: ReadyQueue | None = make_queue() if callable(make_queue) else None
        if queue is not None and not all(
            callable(getattr(queue, name, None)) for name in ("push", "pop", "remove", "__len__")
        ):
            raise TypeError(
                f"strategy {strategy!r}: ready_queue() must return a ReadyQueue "
                f"(push, pop, remove, len) or None, got {queue!r}"
            )
        # Only the kernel's heap needs the key at submit (to refuse a key that raises).
        self._heap: _KeyHeap | None = None
        if queue is None:
            queue = self._heap = _KeyHeap(self._key)
        self._ready: ReadyQueue = queue
        self._delayed: list[tuple[float, int, Job]] = []
        self._blocked: dict[str, set[str]] = {}
        self._dependents: dict[str, list[str]] = {}
        # Unlike _dependents (emptied as upstreams end, and without the
        # dependents an ended upstream released at submit), this keeps every
        # edge for `dependents`; dicts as ordered sets, so forgetting a job
        # unlinks it in O(1).
        self._downstream: dict[str, dict[str, None]] = {}
        # Blocked job id -> its upstreams' outcomes, for a rule other than all_success.
        self._rules: dict[str, Upstreams] = {}
        # Finished, dependents held until the backend says the state is kept.
        self._unreleased: set[str] = set()
        self._finished: deque[str] = deque()  # terminal job ids, oldest first
        self._recurring: dict[str, RecurringSchedule] = {}
        self._slots = [_Slot() for _ in range(num_workers)]
        self._keys: dict[str, str] = {}  # external key -> job id (submit(key=...))
        # Job id -> its key: a key is forgotten with its job, so both stay bounded.
        self._key_of: dict[str, str] = {}
        self._schedule_keys: dict[str, str] = {}
        self._schedule_key_of: dict[str, str] = {}
        # The backend is bound first: its per-job hooks are read once, here.
        self._backend = backend
        backend.bind(self)
        self._admit = backend.admit
        self._on_finished = backend.finished
        self._starting = backend.starting
        # Workers pop the ready queue themselves (no _take_next call) while
        # nothing can hold a job back: no limits, no pause, no starting hook.
        self._plain_take = self._limiter is None and self._starting is None
        # Each listener with the target statuses it wants (None: all of them).
        self._plugin_listeners: tuple[_Wanted, ...] = plugins.transition_listeners()
        if backend.listener is not None:
            self._plugin_listeners = ((backend.listener, None), *self._plugin_listeners)
        self._user_listeners: list[_Wanted] = []
        self._listeners: tuple[TransitionListener, ...] = ()
        self._running_listeners: tuple[TransitionListener, ...] = ()
        self._listener_filters: tuple[_Wanted, ...] | None = None
        self._listener_pairs: tuple[_Wanted, ...] = ()
        self._compile_listeners()
        self._plugin_progress = plugins.progress_listeners()
        if backend.progress is not None:
            self._plugin_progress = (backend.progress, *self._plugin_progress)
        self._progress_listeners: tuple[ProgressListener, ...] = self._plugin_progress
        self._user_progress: list[JobProgressListener] = []
        # Job id -> its history and progress: only for jobs that were retried
        # or report progress, so the plain job path never touches it.
        self._notes: dict[str, _Notes] = {}
        # Jobs whose progress throttle may hold a value: flushed when the attempt ends.
        self._throttled: dict[str, _Notes] = {}
        self._thread_reports: dict[str, tuple[Job, float, float | None, str | None]] = {}
        self._thread_reports_lock = threading.Lock()
        self._queue_paused = False
        self._reaper: TimerHandle | None = None
        self._reap_wanted = False  # a job brought its own result settings
        self._submit_hooks = plugins.submit_hooks()
        self._seq = 0
        self._unfinished = 0
        self._running_count = 0
        self.peak_running = 0  # the most attempts ever in flight at once
        self._idle = asyncio.Event()
        self._idle.set()
        self._work_available = asyncio.Event()
        # Workers waiting on _work_available: submit sets the event only when
        # one is (Event.set is a Python call, and a busy worker looks anyway).
        self._waiting_workers = 0
        self._delay_timer: TimerHandle | None = None
        self._delay_timer_at = math.inf
        self._watchdog: TimerHandle | None = None
        self._watchdog_at = math.inf
        # Job id -> a future done once the call an executor abandoned (a
        # timed-out or cancelled thread or pool-process call) has ended, and
        # what waits for that end: no new attempt of a job starts before it.
        self._abandoned_calls: dict[str, asyncio.Future[None]] = {}
        self._after_call: dict[str, Callable[[], None]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._started = False
        self._stopping = False
        self._stopped = False
        self._stop_done = asyncio.Event()
        self._failure: BaseException | None = None
        self._failed = asyncio.Event()

    # ── Public API (call on the loop thread unless noted) ─────────────
    def add_listener(
        self, listener: JobListener, *, statuses: Iterable[JobStatus] | None = None
    ) -> None:
        """Observer hook: called as ``listener(job, old_status, new_status)``.

        `statuses`, the target statuses it wants (e.g. the terminal ones),
        limits it to the transitions into them; the others cost it nothing,
        not even a call. None (the default): every transition. A listener
        that raises is logged and skipped; the others still run.
        """
        wanted = listener_statuses(statuses, f"add_listener({listener!r})")
        self._user_listeners.append((listener, wanted))
        self._compile_listeners()

    def remove_listener(self, listener: JobListener) -> None:
        """Stop calling a listener `add_listener` added (`ValueError` if it was not)."""
        for i, (added, _) in enumerate(self._user_listeners):
            if added == listener:
                del self._user_listeners[i]
                self._compile_listeners()
                return
        raise ValueError(f"remove_listener: {listener!r} was not added")

    def _compile_listeners(self) -> None:
        # Per-transition lookups stay attribute reads: the RUNNING sites read
        # the listeners that want RUNNING, and `_notify` checks filters only
        # when some listener has one.
        pairs = self._plugin_listeners + tuple(self._user_listeners)
        self._listeners = tuple(listener for listener, _ in pairs)
        self._running_listeners = tuple(
            listener for listener, wanted in pairs if wanted is None or RUNNING in wanted
        )
        filtered = any(wanted is not None for _, wanted in pairs)
        self._listener_filters = pairs if filtered else None
        self._listener_pairs = pairs

    def add_progress_listener(self, listener: JobProgressListener) -> None:
        """Called as ``listener(job, done, total, message)`` when a running job
        reports progress (`jobsched.progress`), throttled to at most 4 calls a
        second per job, the latest report always included. On the loop thread;
        one that raises is logged and skipped.
        """
        self._user_progress.append(listener)
        self._progress_listeners = self._plugin_progress + tuple(self._user_progress)

    def remove_progress_listener(self, listener: JobProgressListener) -> None:
        """Stop calling a listener `add_progress_listener` added."""
        self._user_progress.remove(listener)
        self._progress_listeners = self._plugin_progress + tuple(self._user_progress)

    def submit(
        self,
        job: Job | Workflow | Callable[..., Any],
        *args: Any,
        delay: float = 0.0,
        depends_on: Iterable[str] = (),
        unique_key: str | None = None,
        key: str | None = None,
        result_ttl: float | None = None,
        keep_result: bool | None = None,
        trigger_rule: str | None = None,
        kwargs: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> str:
        """Queue a job and return its id. Dependencies must already be submitted.

        `job` is a `Job`, or a plain function or coroutine function followed by
        its arguments: ``submit(fn, *args, model=..., name=..., priority=...,
        timeout=..., retry=..., deadline=..., **fn_kwargs)`` (see `FunctionJob`).
        A `Job` takes `Client.submit`'s options, with the same checks and
        errors: `priority`, `timeout`, `retry`, `name`, `result_ttl` and
        `keep_result` are set on a copy of it, queued under its id (the
        caller's object is left as it was); it takes no arguments.
        Options are spelled as in a job file too: ``priority="low"``,
        ``timeout=False`` (no timeout), ``retry="none"`` or a table such as
        ``retry={"policy": "fixed", "seconds": 2}``; a wrong one is refused
        here with what is valid.

        Every keyword named like an option of submit or of `FunctionJob` is
        that option, never the function's argument. So a function with a
        parameter named like a `FunctionJob` option (``timeout``, ``name``,
        ``priority``, ``model``, ``retry``, ``deadline``) is refused, unless
        its keyword arguments come as a mapping:
        ``submit(connect, "db", kwargs={"timeout": 3}, timeout=5)`` calls
        ``connect("db", timeout=3)`` as a job with a 5 s timeout. A parameter
        named like one of submit's own (``delay``, ``depends_on``,
        ``unique_key``, ``key``) is refused only when that keyword is given:
        ``submit(asyncio.sleep, 1)`` is fine. A function that takes only
        ``**kwargs`` is not refused: an option's keyword never reaches it.
        Arguments that cannot bind to the function's signature are refused
        here too.

        `delay` is seconds from now, at most `MAX_DELAY` (one year).

        `unique_key` deduplicates: while a job submitted with the same key is
        pending, waiting to retry or running, submit returns *that* job's id and
        queues nothing. The key is free again once that job has finished.

        `key` is an external id (say, a job file's id): submitting a key the
        scheduler already knows, including one restored from a durable store,
        queues nothing and returns the id of the job that has it. That is how a
        rerun after a crash resumes instead of starting a second copy. A key is
        known as long as its job is: while it is unfinished and, once it has
        finished, while it is among the last `history_limit` finished jobs.

        `result_ttl` (seconds) and `keep_result` override the job's own
        (`Job.result_ttl`, `Job.keep_result`): how long a completed job's
        result is kept, and whether it is stored at all. None keeps the job's.

        `trigger_rule` says when a job with `depends_on` runs: ``"all_success"``
        (None, the default: once every upstream completed), ``"all_done"``,
        ``"one_success"``, ``"one_failed"`` or ``"none_failed"`` (see
        docs/tasks.md); a job whose rule can no longer be met is cancelled
        with the reason. A store keeps the rule with the job's dependencies.

        `job` may also be a workflow (`jobsched.chain`, `group`, `chord`):
        its jobs are submitted in order, its first steps waiting for
        `depends_on`, and the id of its last job is returned (`submit_many`
        returns them all).

        A task job whose arguments hold `jobsched.result_of` markers depends
        on those upstreams too, and gets their results when it is released.
        """
        if delay != 0.0:
            delay = check_delay(delay)
        if depends_on.__class__ is str:
            id_list(depends_on, "depends_on")  # refused: its characters are not ids
        upstreams = None
        rule = ALL_SUCCESS
        if trigger_rule is not None and check_trigger_rule(trigger_rule) != ALL_SUCCESS:
            rule = trigger_rule
            upstreams = Upstreams(trigger_rule, 0)  # counted below, with result_of's upstreams
        if (
            args
            or options
            or kwargs is not None
            # A class check, not isinstance(job, Job): Job is an ABC, whose
            # isinstance costs a Python-level call on every submit.
            or Job not in job.__class__.__mro__
            or job.retry.__class__ is not RetryPolicy  # type: ignore[union-attr]
            or result_ttl is not None
            or keep_result is not None
        ):
            job = self._as_job(
                job,
                args,
                kwargs,
                options,
                (delay, depends_on, unique_key, key, result_ttl, keep_result, trigger_rule),
            )
        else:
            job = cast(Job, job)  # a Job whose retry policy is resolved already
        marked = False
        if job.takes_results:  # a task's job, or a workflow: one check for both
            if isinstance(job, Workflow):
                given = (unique_key, key, result_ttl, keep_result, trigger_rule, kwargs)
                return self._submit_workflow(job, args, options, delay, depends_on, given)[-1]
            upstreams_of_results = job.result_upstreams(job_id_of)
            if upstreams_of_results:
                marked = True
                depends_on = [*depends_on, *upstreams_of_results]
        if upstreams is not None:
            if not depends_on:
                raise ValueError(f"trigger_rule={trigger_rule!r} needs depends_on")
            upstreams.waiting = len(set(depends_on))
        if result_ttl is not None:
            job.result_ttl = to_result_ttl(result_ttl)
            self._need_reaper()
        if keep_result is not None:
            job.keep_result = to_keep_result(keep_result)
            self._need_reaper()
        if self._stopping:
            raise SchedulerStoppedError(f"scheduler is stopping; {job.job_id} was not accepted")
        if unique_key is not None:
            existing = self._unique.get(check_key(unique_key, "unique_key"))
            if existing is not None:
                return existing
        if key is not None:
            known = self._keys.get(check_key(key, "key"))
            if known is not None:
                return known
        if job.status is not PENDING or job.attempts:
            raise SchedulerError(f"{job.job_id} was already submitted")
        if job.model not in self._executors.registry:
            raise PluginError(f"{job!r}: {self._unknown_executor(job.model)}")
        if self._submit_hooks:
            for hook in self._submit_hooks:
                hook(job)
        admit = self._admit
        if admit is not None:
            # The backend may take the job (a shared queue, a submit before
            # start()), refuse it (not storable as data) or renumber it.
            taken = admit(
                job, delay, tuple(depends_on) if depends_on else (), key, unique_key, rule
            )
            if taken is not None:
                return taken
        job_id = job.job_id
        if job_id in self._jobs:
            self._backend.refused(job)
            raise SchedulerError(f"{job_id} was already submitted")
        deps = set(depends_on) if depends_on else None
        if deps:
            unknown = [d for d in deps if d not in self._jobs]
            if unknown:
                self._backend.refused(job)
                # Requiring dependencies to exist first makes cycles impossible.
                raise UnknownJobError(f"{job_id}: unknown dependencies: {sorted(unknown)}")
        now = self._clock.now()
        job.seq = seq = self._seq
        job.submitted_at = now
        # Share the float when there is no delay: 24 bytes per pending job.
        job.run_at = run_at = now + delay if delay else now
        # The key is computed before anything is recorded, for delayed and
        # blocked jobs too: a key() that raises refuses the submit and leaves
        # no trace, instead of failing later in a timer or a worker.
        entry = None
        if self._heap is not None:
            try:
                entry = (*self._key(job), job)
            except BaseException:
                self._backend.refused(job)
                raise
        self._seq = seq + 1
        self._jobs[job_id] = job
        if unique_key is not None:
            self._unique[unique_key] = job_id
            self._unique_of[job_id] = unique_key
        if key is not None:
            self._keys[key] = job_id
            self._key_of[job_id] = key
        self._unfinished += 1
        if self._unfinished == 1:
            self._idle.clear()
        if deps:
            notes = self._notes_of(job_id)
            notes.depends_on = tuple(sorted(deps))
            notes.trigger_rule = rule
            self._link_downstream(job_id, notes.depends_on)
        if deps and upstreams is not None:
            if self._wait_by_rule(job, deps, upstreams):
                return job_id
        elif deps:
            jobs = self._jobs
            for d in sorted(deps):
                status = jobs[d].status
                if status.is_terminal and status is not COMPLETED:
                    self._finish(job, CANCELLED, error=f"upstream {d} {status.value}")
                    return job_id
            # An upstream whose completion the backend has not kept yet is unmet:
            # durable before visible.
            unmet = {d for d in deps if jobs[d].status is not COMPLETED or d in self._unreleased}
            if unmet:
                self._blocked[job_id] = unmet
                for d in unmet:
                    self._dependents.setdefault(d, []).append(job_id)
                return job_id
        if marked:
            job.resolve_results(self._result_for)
        if run_at > now:
            heappush(self._delayed, (run_at, seq, job))
            if run_at < self._delay_timer_at and self._started:
                self._arm_delay_timer(run_at)
        else:
            if entry is None:
                self._ready.push(job)
            else:
                self._heap.push_entry(entry)  # type: ignore[union-attr]
            if self._waiting_workers:
                self._work_available.set()
        return job_id

    def _as_job(
        self,
        job: Job | Workflow | Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any] | None,
        options: dict[str, Any],
        scheduling: tuple[Any, ...],
        caller: str = "submit",
    ) -> Job:
        """`job`, or a `FunctionJob` of a plain function, with its retry policy resolved.

        `scheduling` is the values of `SUBMIT_OPTIONS` the caller gave.
        """
        if not isinstance(job, Job):
            if isinstance(job, Workflow):
                return cast(Job, job)  # submit() takes it apart, by its takes_results
            if kwargs is None:
                # FunctionJob refuses a parameter named like one of its options
                # outright. Submit's own are common parameter names (asyncio.sleep
                # has `delay`): refused only when given, as then it is ambiguous.
                given = [
                    name
                    for name, value in zip(SUBMIT_OPTIONS, scheduling, strict=True)
                    if value or (name == "keep_result" and value is not None)
                ]
                refuse_option_parameters(job, given)
            job = FunctionJob(job, *args, kwargs=kwargs, **options)
        elif args or kwargs is not None:
            raise TypeError(
                f"{caller}() got arguments for {job!r}, which is already a job: "
                "arguments are only for plain functions"
            )
        else:
            named = dict(zip(SUBMIT_OPTIONS, scheduling, strict=True))
            result_ttl, keep_result = named["result_ttl"], named["keep_result"]
            if options or result_ttl is not None or keep_result is not None:
                # Client's options, on a copy: the caller's job stays as it was.
                job = job_with_options(
                    job, options, self.plugins, result_ttl=result_ttl, keep_result=keep_result
                )
        retry = job.retry
        if retry.__class__ is not RetryPolicy and is_retry_spec(retry):
            # A policy name or table, as a job file writes it: this
            # scheduler's plugins say what the names mean.
            job.retry = check_retry_policy(build_retry_policy(retry, self.plugins))
        return job

    def _submit_workflow(
        self,
        workflow: Any,
        args: tuple[Any, ...],
        options: Mapping[str, Any],
        delay: float,
        depends_on: Iterable[str],
        refused: tuple[Any, ...],
    ) -> list[str]:
        """Submit a workflow's jobs, upstreams first; their ids in that order."""
        unique_key, key, result_ttl, keep_result, trigger_rule, kwargs = refused
        check_workflow_options(
            workflow,
            delay=delay,
            given=(
                args or None,
                unique_key,
                key,
                result_ttl,
                keep_result,
                kwargs,
                *(value for name, value in options.items() if name != "timeout"),
            ),
            timeout=options.get("timeout", NOT_GIVEN),
            trigger_rule=ALL_SUCCESS if trigger_rule is None else trigger_rule,
        )
        plan = workflow.plan(())
        for job, _ in plan:
            if job.status is not PENDING or job.attempts or job.job_id in self._jobs:
                raise SchedulerError(f"{job.job_id} was already submitted")
        first = tuple(depends_on)
        ids = []
        for job, after in plan:
            deps = [d.job_id for d in after] if after else first
            ids.append(self.submit(job, depends_on=deps))
        return ids

    def _result_for(self, upstream_id: str) -> Any:
        """An upstream's result for a dependent's `result_of` marker: None if
        it did not complete (a trigger rule released the dependent anyway);
        JSON only when the backend keeps jobs in a store."""
        job = self._jobs.get(upstream_id)
        if job is None:
            raise unavailable(
                upstream_id, "no such job here (purged, or past the scheduler's history_limit)"
            )
        if job.status is not COMPLETED:
            return None
        if not job.keep_result:
            raise unavailable(upstream_id, "its job keeps no result (keep_result=False)")
        # Past its time the result counts as gone, whether or not the reaper ran.
        ttl = self.result_ttl_of(job)
        finished = job.finished_at
        if ttl is not None and finished is not None and finished + ttl <= self._clock.now():
            raise unavailable(upstream_id, f"its result expired (result_ttl {ttl:g}s)")
        result = job.result
        if result is None:
            return None
        if self._admit is None and self._on_finished is None:
            return result  # in memory: the object itself
        data = result_as_json(result)
        if isinstance(data, dict) and "$repr" in data:
            raise unavailable(upstream_id, not_json(type(result).__name__))
        return data

    def _wait_by_rule(self, job: Job, deps: set[str], upstreams: Upstreams) -> bool:
        """Hold `job` until its trigger rule decides; False: it may run now."""
        job_id = job.job_id
        unmet = set()
        for d in sorted(deps):
            status = self._jobs[d].status
            # An upstream whose end the backend has not kept yet still waits:
            # durable before visible.
            if not status.is_terminal or d in self._unreleased:
                unmet.add(d)
                continue
            run, reason = upstreams.settle(d, status)
            if run is False:
                self._finish(job, CANCELLED, error=reason)
                return True
            if run:
                return False
        self._blocked[job_id] = unmet
        self._rules[job_id] = upstreams
        for d in unmet:
            self._dependents.setdefault(d, []).append(job_id)
        return True

    def submit_threadsafe(self, job: Job | Callable[..., Any], *args: Any, **kwargs: Any) -> str:
        """Submit from any thread; returns the job id at once.

        The real submit runs on the loop thread (``call_soon_threadsafe``), so
        the scheduler's structures are still touched by one thread only. The
        job, its options and `delay` are checked here, with `submit`'s rules,
        and raise in the caller; an error found on the loop (say, an unknown
        dependency) is logged and the job is recorded nowhere; use `submit` on
        the loop when you need that error.
        """
        # Stopping first: after stop() the loop is set but the answer is "stopped",
        # not "start() the scheduler".
        if self._stopping:
            raise SchedulerStoppedError("scheduler is stopping")
        if self._loop is None:
            raise SchedulerError("start() the scheduler before submitting from other threads")
        # What can be checked here is, so the caller gets the error and not the log.
        options: dict[str, Any] = {k: kwargs.pop(k) for k in SUBMIT_OPTIONS if k in kwargs}
        if options.get("delay", 0.0) != 0.0:
            options["delay"] = check_delay(options["delay"])
        scheduling = tuple(options.get(name) for name in SUBMIT_OPTIONS)
        fn_kwargs = kwargs.pop("kwargs", None)
        job = self._as_job(job, args, fn_kwargs, kwargs, scheduling, "submit_threadsafe")
        if isinstance(job, Workflow):
            raise TypeError("submit_threadsafe() takes a job: submit a workflow on the loop")
        self._loop.call_soon_threadsafe(self._submit_logged, job, options)
        return job.job_id

    def schedule_recurring(
        self,
        factory: Callable[[], Job],
        interval: float | None = None,
        *,
        start_in: float = 0.0,
        allow_overlap: bool = False,
        trigger: Trigger | dict[str, Any] | None = None,
        misfire_grace_time: float | None = None,
        coalesce: CoalescePolicy = "one",
        jitter: float = 0.0,
        name: str | None = None,
        key: str | None = None,
    ) -> str:
        """Submit ``factory()`` every `interval` seconds, or whenever `trigger` fires.

        Returns a schedule id for `cancel_recurring`. With `interval` the
        schedule runs at a fixed rate, first after `start_in` seconds. Fires
        missed while the loop was busy coalesce into one; without
        `allow_overlap` a fire is skipped while the previous job is unfinished.

        `trigger` is a trigger object (``CronTrigger("0 2 * * *",
        tz="America/New_York")``) or a job-file style mapping (``{"cron": "0 2 *
        * *", "tz": "America/New_York"}``) resolved through the trigger
        plugins. `misfire_grace_time`, `coalesce` and `jitter` apply to every
        trigger (see `RecurringSchedule`).

        `key` names the schedule across restarts: a key the scheduler already
        knows (restored from a store) returns that schedule's id and gives it
        this `factory`, keeping its next fire time and counts; nothing new is
        added. Each job a keyed schedule fires gets the key ``"<key>#<n>"``.
        With a durable store the trigger must be an interval or a mapping (it
        is stored as data), each fired job is stored, and the last one is the
        schedule's template: what it fires after a restart if nobody schedules
        it again.
        """
        if self._stopping:
            raise SchedulerStoppedError("scheduler is stopping")
        if not callable(factory):
            raise TypeError(f"factory must be callable, got {factory!r}")
        if start_in < 0:
            raise ValueError(f"start_in must be >= 0, got {start_in!r}")
        if trigger is not None and interval is not None:
            raise TypeError("schedule_recurring() takes an interval or a trigger, not both")
        options = {
            "start_in": start_in,
            "allow_overlap": allow_overlap,
            "misfire_grace_time": misfire_grace_time,
            "coalesce": coalesce,
            "jitter": jitter,
            "name": name,
            "key": key,
        }
        return self._backend.schedule_recurring(factory, interval, trigger, options)

    def add_recurring(
        self,
        factory: Callable[[], Job],
        interval: float | None = None,
        *,
        start_in: float = 0.0,
        allow_overlap: bool = False,
        trigger: Trigger | dict[str, Any] | None = None,
        misfire_grace_time: float | None = None,
        coalesce: CoalescePolicy = "one",
        jitter: float = 0.0,
        name: str | None = None,
        key: str | None = None,
    ) -> str:
        """Backend-facing: a schedule the kernel runs on its own timers
        (what `schedule_recurring` does unless the backend keeps schedules)."""
        if key is not None:
            known = self._schedule_keys.get(key)
            if known is not None:
                existing = self._recurring.get(known)
                if existing is not None:
                    existing.factory = factory
                return known
        spec = trigger if trigger is not None else {"interval": interval}
        if trigger is not None:
            if start_in:
                raise TypeError("start_in is for interval schedules; a trigger sets its own start")
            trigger = build_trigger(trigger, lambda n: self.plugins.resolve("triggers", n))
        elif interval is None:
            raise TypeError("schedule_recurring() needs an interval or a trigger")
        else:
            trigger = IntervalTrigger(interval, start_in=start_in)
        sched = RecurringSchedule(
            factory,
            allow_overlap=allow_overlap,
            trigger=trigger,
            misfire_grace_time=misfire_grace_time,
            coalesce=coalesce,
            jitter=jitter,
            name=name,
        )
        sched.bind(self._clock)
        self._backend.schedule_added(sched, spec, key)
        if key is not None:
            self._schedule_keys[key] = sched.schedule_id
            self._schedule_key_of[sched.schedule_id] = key
        self._recurring[sched.schedule_id] = sched
        if self._started and not sched.paused:
            self._arm_schedule(sched)
        return sched.schedule_id

    def cancel_recurring(self, schedule_id: str) -> bool:
        """Stop a recurring schedule; False if unknown or already cancelled."""
        sched = self._recurring.pop(schedule_id, None)
        if sched is None:
            return self._backend.cancel_recurring(schedule_id)
        sched.active = False
        if sched.timer is not None:
            sched.timer.cancel()
            sched.timer = None
        self._backend.schedule_changed(sched)
        return True

    def recurring(self) -> list[RecurringSchedule]:
        """The active recurring schedules."""
        return list(self._recurring.values())

    def cancel(self, job_id: str) -> bool:
        """Cancel a job. False if it is unknown or already finished.

        A queued job is cancelled at once. A running ASYNC job gets
        ``CancelledError`` at its next await. A running THREAD or PROCESS job is
        abandoned: its status becomes CANCELLED but the thread or process
        finishes the call anyway (neither can be interrupted safely; a thread
        job's `jobsched.cancel_token()` is set so it can stop early), and no
        new attempt of the job starts before that call returned. A
        SUBPROCESS job's child process is killed (docs/executors.md).
        With a shared store, a job this process does not hold is cancelled
        through the store.
        """
        job = self._jobs.get(job_id)
        if job is None:
            return self._backend.cancel(job_id)
        if job.status.is_terminal:
            return False
        if job.status is RUNNING:
            for slot in self._slots:
                if slot.job is job:
                    self._cancel_attempt(slot)
                    return True
        # Queued, or RUNNING but not started yet (a listener cancelled it on
        # its PENDING -> RUNNING transition): nothing is in flight to stop.
        self._finish(job, CANCELLED, error="cancelled")
        return True

    def get(self, job_id: str) -> Job:
        """The job with this id (finished ones while they are in the history)."""
        try:
            return self._jobs[job_id]
        except (KeyError, TypeError):
            check_job_id(job_id)
            raise UnknownJobError(job_id) from None

    def jobs(self) -> list[Job]:
        """Every job the scheduler knows: unfinished ones and the bounded history."""
        return list(self._jobs.values())

    def waiting_on(self, job_id: str) -> frozenset[str]:
        """The ids of the dependencies the PENDING job `job_id` still waits for.

        Empty when it waits for none. A dependency is met once it completed
        and, with a durable store, once that completion is committed.
        """
        self.get(job_id)  # an unknown id is an error, not "waits for nothing"
        return frozenset(self._blocked.get(job_id, ()))

    def job_counts(self) -> dict[str, int]:
        """Unfinished jobs this scheduler holds, by where they wait.

        ``pending`` (runnable now, or parked by a limit), ``delayed`` (a first
        run not due yet), ``blocked`` (on dependencies), ``retry_wait`` and
        ``running``. Cheap and safe to call from another thread (a metrics
        scrape): it reads sizes and one copy of the delayed heap, so the
        figures may be a moment apart from each other.
        """
        running = self._running_count
        blocked = len(self._blocked)
        delayed = retry_wait = 0
        for _, _, job in list(self._delayed):
            status = job.status
            if status is RETRY_WAIT:
                retry_wait += 1
            elif status is PENDING:
                delayed += 1
        pending = self._unfinished - running - blocked - delayed - retry_wait
        return {
            "pending": max(pending, 0),
            "delayed": delayed,
            "blocked": blocked,
            "retry_wait": retry_wait,
            "running": running,
        }

    # ── Operator actions (call on the loop thread) ────────────────────
    def retry_job(self, job_id: str) -> Job:
        """Run a failed, timed-out or cancelled job again; returns it, PENDING.

        Its attempts start again from 0 and its last error and result are
        cleared; the attempt that ended it is kept in `attempt_history`. It
        is queued at once, whatever it depended on, unless the call of its
        last attempt still runs (an abandoned thread or process call): then
        it stays PENDING until that call has returned. A job in any other
        status raises `InvalidTransitionError` naming it; an id the
        scheduler does not know (or no longer remembers) `UnknownJobError`.
        """
        if self._stopping:
            raise SchedulerStoppedError(f"scheduler is stopping; {job_id} was not retried")
        job = self.get(job_id)
        status = job.status
        if status not in RETRYABLE:
            raise InvalidTransitionError(
                f"{job_id} is {status.value}: only a failed, timed_out or cancelled job "
                "can be retried"
            )
        self._backend.retried(job)  # may refuse (a shared store's job): nothing changed yet
        if job.attempts:
            notes = self._notes_of(job_id)
            notes.history.append(
                AttemptRecord(job.attempts, status, job.last_error, job.started_at, job.finished_at)
            )
        # A job cancelled while queued may still sit in a heap (lazy deletion):
        # take that entry out, or the job would be run twice.
        self._drop_queued(job)
        with contextlib.suppress(ValueError):  # not in the history: restored as finished
            self._finished.remove(job_id)
        job.attempts = 0
        job.last_error = None
        job.last_failure_timed_out = False
        job.result = None
        job.started_at = job.finished_at = None
        job.seq = self._seq
        self._seq += 1
        job.run_at = self._clock.now()
        job.status = PENDING
        self._unfinished += 1
        self._idle.clear()
        if self._listeners:
            self._notify(job, status, PENDING)
        if job_id in self._abandoned_calls:
            # Its last call still runs on a thread: the new attempt waits for its end.
            self._after_call[job_id] = lambda: self._enqueue_if_pending(job)
        else:
            self._enqueue(job)
        return job

    def _enqueue_if_pending(self, job: Job) -> None:
        if job.status is PENDING and self._jobs.get(job.job_id) is job:
            self._enqueue(job)

    def retry_jobs(
        self, statuses: Iterable[JobStatus | str] = (FAILED,), job_type: str | None = None
    ) -> list[str]:
        """`retry_job` every job in `statuses` (failed, timed_out, cancelled) of
        `job_type` (its `jobsched.job_type_of` name; None: any); returns their
        ids in submit order. Any other status raises `ValueError`."""
        wanted = _statuses_of(statuses, RETRYABLE, "retried (requeued)")
        registered = self._registered_types()
        chosen = [
            job
            for job in self._jobs.values()
            if job.status in wanted
            and (job_type is None or job_type_of(job, registered) == job_type)
        ]
        chosen.sort(key=lambda job: job.seq)
        return [self.retry_job(job.job_id).job_id for job in chosen]

    def purge(self, older_than: float, statuses: Iterable[JobStatus | str] | None = None) -> int:
        """Forget terminal jobs that finished more than `older_than` seconds ago.

        `statuses` (default: every terminal one) must all be terminal, else
        `ValueError`; unfinished jobs are never purged. A durable store
        deletes them too (a one-owner store also the older ones it keeps
        beyond the history). Returns how many jobs the scheduler forgot.
        """
        if isinstance(older_than, bool) or not isinstance(older_than, int | float):
            raise TypeError(f"older_than must be a number of seconds, got {older_than!r}")
        if not older_than >= 0:
            raise ValueError(f"older_than must be >= 0 seconds, got {older_than!r}")
        terminal = tuple(s for s in JobStatus if s.is_terminal)
        wanted = terminal if statuses is None else _statuses_of(statuses, terminal, "purged")
        before = self._clock.now() - older_than
        jobs = self._jobs
        gone = [
            job_id
            for job_id in self._finished
            if (job := jobs.get(job_id)) is not None
            and job.status in wanted
            and job.finished_at is not None
            and job.finished_at <= before
            and job_id not in self._unreleased
        ]
        if gone:
            removed = set(gone)
            self._finished = deque(j for j in self._finished if j not in removed)
            for job_id in gone:
                self._forget_finished(job_id)
        self._backend.purged(gone, before, wanted)
        return len(gone)

    def expire_results(self) -> int:
        """Drop the results of completed jobs past their time to keep them; returns how many.

        A job's time is `result_ttl_of` it. The scheduler calls this from a
        timer, armed when it has a `result_ttl` or `retention`, or once a job
        is submitted with ``result_ttl=`` or ``keep_result=``; a job type's own
        defaults alone arm nothing (that would cost every submit a check):
        call it yourself then.
        """
        now = self._clock.now()
        jobs = self._jobs
        expired: list[Job] = []
        for job_id in self._finished:
            job = jobs.get(job_id)
            if job is None or job.status is not COMPLETED or job.result is None:
                continue
            ttl = self.result_ttl_of(job)
            if ttl is not None and job.finished_at is not None and job.finished_at + ttl <= now:
                job.result = None
                expired.append(job)
        if expired:
            self._backend.results_expired(expired)
        return len(expired)

    def result_ttl_of(self, job: Job) -> float | None:
        """Seconds `job`'s result is kept after it finished (None: as long as
        the job is remembered): 0 with ``keep_result=False``, else the job's
        ``result_ttl``, else the scheduler's."""
        if not job.keep_result:
            return 0.0
        return self._result_ttl if job.result_ttl is None else job.result_ttl

    def attempt_history(self, job_id: str) -> list[AttemptRecord]:
        """The ended attempts of a job, oldest first, its current one excluded.

        An attempt that failed and was retried, and the attempt that ended a
        job an operator retried. The attempt that ended a terminal job is in
        the job's own fields (`attempts`, `last_error`, times), not here.
        """
        self.get(job_id)
        notes = self._notes.get(job_id)
        return list(notes.history) if notes is not None else []

    def depends_on(self, job_id: str) -> tuple[str, ...]:
        """The ids of the jobs `job_id` was submitted to wait for (met or not)."""
        notes = self._notes.get(job_id)
        return notes.depends_on if notes is not None else ()

    def dependents(self, job_id: str) -> tuple[str, ...]:
        """The ids of the jobs submitted to depend on `job_id` (waiting or not,
        ended or not), in submit order, as far as the scheduler still knows
        them (a dependent forgotten from the history is not listed).
        `UnknownJobError` for an id the scheduler does not know.

        Read from an index kept beside the queues: no scan of the jobs.
        """
        self.get(job_id)
        found = self._downstream.get(job_id)
        return tuple(found) if found else ()

    def trigger_rule(self, job_id: str) -> str:
        """The trigger rule `job_id` was submitted with (``"all_success"`` by default)."""
        notes = self._notes.get(job_id)
        return notes.trigger_rule if notes is not None else ALL_SUCCESS

    def job_progress(self, job_id: str) -> JobProgress | None:
        """The latest progress the job reported (kept after it ends), or None."""
        notes = self._notes.get(job_id)
        return notes.progress if notes is not None else None

    def pause_queue(self) -> bool:
        """Start no new attempt until `resume_queue`; running ones finish.

        Jobs are still accepted and queued. False if already paused.
        """
        if self._queue_paused:
            return False
        self._queue_paused = True
        # Swapped, not branched on: the dispatch path is unchanged while running.
        self._take_next = self._take_nothing  # type: ignore[method-assign]
        self._plain_take = False
        return True

    def resume_queue(self) -> bool:
        """Start attempts again after `pause_queue`; False if it was not paused."""
        if not self._queue_paused:
            return False
        self._queue_paused = False
        del self._take_next  # back to the class's (or the limiter's) method
        self._plain_take = self._limiter is None and self._starting is None
        if self._limiter is not None:
            self._take_next = self._take_next_limited  # type: ignore[method-assign]
        self._work_available.set()
        return True

    @property
    def queue_paused(self) -> bool:
        """True between `pause_queue` and `resume_queue`."""
        return self._queue_paused

    def pause_schedule(self, schedule_id: str) -> bool:
        """Stop a recurring schedule from firing until `resume_schedule`.

        False if it is already paused; `UnknownScheduleError` naming it if
        the scheduler runs no such schedule.
        """
        sched = self._schedule(schedule_id)
        if sched.paused:
            return False
        sched.paused = True
        if sched.timer is not None:
            sched.timer.cancel()
            sched.timer = None
        self._backend.schedule_changed(sched)
        return True

    def resume_schedule(self, schedule_id: str) -> bool:
        """Let a paused schedule fire again: its next fire is the first one after now
        (the fires it missed while paused are skipped). False if not paused."""
        sched = self._schedule(schedule_id)
        if not sched.paused:
            return False
        sched.paused = False
        sched.skip_past(self._clock)
        self._backend.schedule_changed(sched)
        if self._started and not self._stopping:
            self._arm_schedule(sched)
        return True

    def trigger_schedule(self, schedule_id: str) -> str:
        """Submit the schedule's job once, now; its next fire time does not move.

        Returns the job's id. Fires even while the schedule is paused, and
        regardless of `allow_overlap`.
        """
        if self._stopping:
            raise SchedulerStoppedError("scheduler is stopping")
        sched = self._schedule(schedule_id)
        key = self._schedule_key_of.get(sched.schedule_id)
        job_id = self.submit(
            sched.factory(), key=None if key is None else f"{key}#{sched.fired + 1}"
        )
        sched.fired += 1
        sched.last_job_id = job_id
        self._backend.schedule_fired(sched, job_id)
        self._backend.schedule_changed(sched)
        return job_id

    def _schedule(self, schedule_id: str) -> RecurringSchedule:
        sched = self._recurring.get(schedule_id)
        if sched is None:
            raise UnknownScheduleError(f"unknown recurring schedule {schedule_id!r}")
        return sched

    @property
    def running(self) -> int:
        """Attempts in flight right now."""
        return self._running_count

    def attempt_in(self, task: asyncio.Task[Any] | None) -> Job | None:
        """The job whose attempt worker task `task` is running, or None.

        It only reads, so a watchdog thread may ask it while the loop is
        blocked (``asyncio.current_task(loop)`` names the task that blocks it).
        """
        for slot in self._slots:
            if task is not None and slot.task is task:
                return slot.job
        return None

    async def join(self) -> None:
        """Wait until every submitted job has reached a terminal state.

        With a shared store: every job submitted by this process, wherever it runs.
        """
        await self._backend.join()

    def lookup(self, key: str) -> str | None:
        """The id of the job submitted (or restored) with this external key, if any."""
        return self._keys.get(key)

    def key_of(self, job_id: str) -> str | None:
        """The external key the job was submitted (or restored) with, if any."""
        return self._key_of.get(job_id)

    def unique_key_of(self, job_id: str) -> str | None:
        """The `unique_key` the job was submitted with while it holds it: until
        it finishes (then the key is free for another job)."""
        return self._unique_of.get(job_id)

    def resolve(self, job_id: str) -> str:
        """The id under which the store keeps the job `submit` returned `job_id` for.

        The same id, except with a shared store, which deduplicates `key` and
        `unique_key` across the cluster when it writes the job: after
        `flush()`, a job it did not store resolves to the id of the job it kept.
        """
        return self._backend.resolve(job_id)

    async def flush(self) -> None:
        """Wait until every state change so far is committed to the store.

        Returns at once without a durable store. Raises `StoreError` if a
        write fails meanwhile (the scheduler keeps running and retries the
        write). With a shared store: every submit so far is written. `stop`
        flushes by itself.
        """
        await self._backend.flush()

    async def start(self) -> None:
        """Start the workers on the running loop.

        With a durable store this first opens it and restores what it holds.
        """
        if self._stopping:
            raise SchedulerStoppedError("a stopped scheduler cannot be started again")
        if self._started:
            raise SchedulerError("already started")
        self._started = True
        self._loop = asyncio.get_running_loop()
        try:
            await self._backend.open()
        except BaseException:
            self._started = False
            raise
        self.plugins.scheduler_started(self)
        self._tasks = [
            _start_worker(self._worker(slot), f"jobsched-worker-{i}")
            for i, slot in enumerate(self._slots)
        ]
        if self._delayed:
            self._arm_delay_timer(self._delayed[0][0])
        if self._result_ttl is not None or self._retention is not None or self._reap_wanted:
            self._arm_reaper()
        for sched in list(self._recurring.values()):
            if not sched.paused:
                self._arm_schedule(sched)

    async def stop(self, *, cancel_running: bool = False) -> None:
        """Graceful shutdown.

        New submits are rejected; workers finish the attempt they are on (or
        cancel it, with `cancel_running`) and exit. Queued jobs are left
        PENDING, and a job that fails now is not retried. With a durable
        store, attempts cancelled by `cancel_running` stay RUNNING in the
        store (they run again on the next start; a shared store hands them
        to another process), and everything else is written before the store
        is closed; a final write that fails raises `StoreError`.
        """
        if self._stopped:
            return
        if cancel_running:
            for slot in self._slots:
                if slot.job is not None and not slot.cancel_requested:
                    # A shutdown is not a cancel: the backend keeps these to run
                    # again (at-least-once, as after a crash).
                    if self._backend.interrupted(slot.job):
                        slot.job.handed_back = True  # listeners log a hand-back
                    self._cancel_attempt(slot)
        if self._stopping:
            # Another stop() is under way (a signal handler's beside the context
            # manager's, say): wait for its teardown instead of running a second.
            await self._stop_done.wait()
            return
        self._stopping = True
        await self._backend.stop_claiming()
        for sched in list(self._recurring.values()):
            if sched.timer is not None:
                sched.timer.cancel()
                sched.timer = None
        self._work_available.set()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        for timer in (self._delay_timer, self._watchdog, self._reaper):
            if timer is not None:
                timer.cancel()
        self._delay_timer = self._watchdog = self._reaper = None
        self._drop_waits_for_abandoned_calls()
        for executor in self._executors.values():
            executor.shutdown()
        store_error = await self._backend.close() if self._started else None
        if store_error is None:
            store_error = self._failure
        self._stopped = True
        try:
            if self._started:
                self.plugins.scheduler_stopped(self)
        finally:
            self._stop_done.set()
        if store_error is not None:
            raise store_error

    def _drop_waits_for_abandoned_calls(self) -> None:
        """At stop: a job whose timed-out call still runs ends as an attempt a
        shutdown tears down (its backend keeps it to run again); a retried
        job waiting for such a call stays PENDING, as queued jobs do."""
        waiting, self._after_call = self._after_call, {}
        for job_id in waiting:
            job = self._jobs.get(job_id)
            if job is not None and job.status is RUNNING:
                self._backend.interrupted(job)
                self._finish(job, CANCELLED, error="scheduler shut down")

    def fail(self, error: BaseException) -> None:
        """The backend cannot go on (its store was migrated by a newer
        jobsched, say): `wait_failed` returns `error` and `stop` raises it.
        The first error is kept."""
        if self._failure is None:
            self._failure = error
            self._failed.set()

    async def wait_failed(self) -> BaseException:
        """Wait until the backend failed for good (`fail`); its error. A process
        that runs until told to stop (``jobsched worker``) waits for this too."""
        await self._failed.wait()
        assert self._failure is not None
        return self._failure

    def interrupt_running(self) -> None:
        """Tear down the attempts in flight as a shutdown would (after `stop` began).

        Their workers are cancelled; each job ends CANCELLED here ("scheduler
        shut down") and its backend keeps it to run again. This is what
        ``jobsched worker`` does when its grace period runs out.
        """
        for slot in self._slots:
            if slot.job is not None and slot.task is not None:
                slot.task.cancel()

    async def __aenter__(self) -> Kernel:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop(cancel_running=exc_info[0] is not None)

    # ── Backend-facing API: what a backend may do to the kernel ───────
    @property
    def clock(self) -> Clock:
        """The scheduler's clock (monotonic `now()`, wall `time()`)."""
        return self._clock

    @property
    def history_limit(self) -> int:
        """How many finished jobs the scheduler remembers."""
        return self._history_limit

    @property
    def result_ttl(self) -> float | None:
        """Seconds a completed job's result is kept when the job sets no
        ``result_ttl`` of its own (None: for good). Backends apply it: a
        shared store through `Outcome.result_ttl` and its reaper."""
        return self._result_ttl

    @property
    def retention(self) -> float | None:
        """Seconds finished jobs are kept before a reaper purges them (None:
        until purged by hand)."""
        return self._retention

    @property
    def started(self) -> bool:
        """True once `start` began (a durable store's submits before it are deferred)."""
        return self._started

    @property
    def stopping(self) -> bool:
        """True once `stop` began."""
        return self._stopping

    @property
    def queued(self) -> int:
        """Entries in the ready queue (cancelled ones included until popped)."""
        return len(self._ready)

    @property
    def backend(self) -> Backend:
        """How this scheduler keeps its jobs (`jobsched.backends`)."""
        return self._backend

    def sort_key(self, job: Job) -> SortKey:
        """The strategy's key for `job`, ending in ``job.seq``."""
        return self._key(job)

    def find(self, job_id: str) -> Job | None:
        """The job with this id, or None."""
        return self._jobs.get(job_id)

    def executor(self, model: str) -> Executor:
        """The executor for `model`, built now if it was not yet."""
        if model not in self._executors.registry:
            raise PluginError(self._unknown_executor(model))
        return self._executors[model]  # type: ignore[no-any-return]

    def adopt(self, job: Job) -> None:
        """Queue a job the backend claimed: runnable now, counted as unfinished.

        Its id, attempts and options are the backend's; the kernel gives it a
        submit order. No await inside: atomic.
        """
        job.seq = self._seq
        self._seq += 1
        job.run_at = self._clock.now()
        self._jobs[job.job_id] = job
        self._unfinished += 1
        self._idle.clear()
        self._ready.push(job)
        self._work_available.set()

    def restore(
        self,
        job: Job,
        *,
        key: str | None = None,
        unique_key: str | None = None,
        unmet: set[str] | None = None,
        depends_on: Sequence[str] = (),
        trigger_rule: str = ALL_SUCCESS,
    ) -> None:
        """Install a job read back from a store, its status and times as stored.

        A terminal job joins the history. Any other is queued (or delayed to
        its `run_at`), unless `unmet` names upstreams it still waits for; it
        then waits for them by its `trigger_rule` (the upstreams that have
        ended are the caller's to settle, with `Upstreams`). Restore jobs in
        submit order, upstreams first.
        """
        job_id = job.job_id
        self._jobs[job_id] = job
        if key is not None and key not in self._keys:
            self._keys[key] = job_id
            self._key_of[job_id] = key
        self._seq = max(self._seq, job.seq + 1)
        if depends_on:
            notes = self._notes_of(job_id)
            notes.depends_on = tuple(sorted(set(depends_on)))
            notes.trigger_rule = trigger_rule
            self._link_downstream(job_id, notes.depends_on)
        if job.status.is_terminal:
            self._remember_finished(job_id)
            return
        if unique_key is not None:
            self._unique[unique_key] = job_id
            self._unique_of[job_id] = unique_key
        self._unfinished += 1
        self._idle.clear()
        if unmet:
            self._blocked[job_id] = set(unmet)
            if trigger_rule != ALL_SUCCESS:
                self._rules[job_id] = Upstreams(trigger_rule, len(unmet))
            for dep in unmet:
                self._dependents.setdefault(dep, []).append(job_id)
        else:
            if job.takes_results:
                job.resolve_results(self._result_for)
            self._enqueue(job)

    def restore_schedule(
        self, sched: RecurringSchedule | None, schedule_id: str, key: str | None
    ) -> None:
        """Install a schedule read back from a store (None: an ended one, whose key stays known)."""
        if sched is not None:
            self._recurring[schedule_id] = sched
            if key is not None:
                self._schedule_key_of[schedule_id] = key
        if key is not None:
            self._schedule_keys[key] = schedule_id

    def cancel_restored(self, job: Job, reason: str) -> None:
        """Cancel a restored job that can never run (its upstream failed or is gone)."""
        self._finish(job, CANCELLED, error=reason)

    def forget(self, job: Job) -> None:
        """The backend keeps this unfinished job from now on (a shared retry):
        the kernel no longer counts or knows it."""
        if self._downstream:
            self._unlink_downstream(job.job_id)
        if self._notes:
            self._notes.pop(job.job_id, None)  # the store keeps its history
        if self._jobs.get(job.job_id) is job:
            del self._jobs[job.job_id]
            self._unfinished -= 1
            if self._unfinished == 0:
                self._idle.set()

    async def wait_idle(self) -> None:
        """Wait until no job the kernel knows is unfinished."""
        await self._idle.wait()

    def release_committed(self, finished: Mapping[str, JobStatus]) -> None:
        """The store committed these terminal states: now their dependents may move.

        Only for a backend with a `Backend.finished` hook.
        """
        work: list[tuple[Job, JobStatus, str | None]] = []
        unreleased = self._unreleased
        for job_id, status in finished.items():
            unreleased.discard(job_id)
            dependents = self._dependents.pop(job_id, None)
            if dependents:
                self._settle_dependents(job_id, status, dependents, work)
        for job, status, error in work:
            self._finish(job, status, error=error)

    # ── Internals: queueing ───────────────────────────────────────────
    def _submit_logged(self, job: Job, options: dict[str, Any]) -> None:
        try:
            self.submit(job, **options)
        except (SchedulerError, ValueError, TypeError):
            logger.exception("threadsafe submit failed", job_id=job.job_id, job_name=job.name)

    def _enqueue(self, job: Job) -> None:
        if job.run_at > self._clock.now():
            heappush(self._delayed, (job.run_at, job.seq, job))
            if job.run_at < self._delay_timer_at and self._started:
                self._arm_delay_timer(job.run_at)
        else:
            self._ready.push(job)
            self._work_available.set()

    def _arm_delay_timer(self, when: float) -> None:
        if self._delay_timer is not None:
            self._delay_timer.cancel()
        self._delay_timer_at = when
        self._delay_timer = self._clock.call_at(when, self._on_delay_timer)

    def _on_delay_timer(self) -> None:
        self._delay_timer = None
        self._delay_timer_at = math.inf
        delayed, push = self._delayed, self._ready.push
        now = self._clock.now()
        promoted = False
        while delayed and delayed[0][0] <= now:
            job = heappop(delayed)[2]
            if not job.status.is_terminal:
                push(job)
                promoted = True
        if promoted:
            self._work_available.set()
        if delayed and not self._stopping:
            self._arm_delay_timer(delayed[0][0])

    def _take_next(self) -> Job | None:
        """Pop the best runnable job and mark it RUNNING. No await inside: atomic."""
        pop = self._ready.pop
        starting = self._starting
        while (job := pop()) is not None:
            if job.status.is_terminal:
                continue  # lazily deleted: cancelled while queued
            if starting is not None and not starting(job):
                self.forget(job)  # no longer the backend's to run
                continue
            # A queued job that is not terminal is PENDING or RETRY_WAIT, both
            # of which may move to RUNNING: no edge check needed.
            old = job.status
            job.status = RUNNING
            if self._running_listeners:
                self._notify_running(job, old)
            return job
        return None

    def _take_next_limited(self) -> Job | None:
        """`_take_next` when limits are configured: held-back jobs are parked or delayed."""
        pop = self._ready.pop
        limiter = self._limiter
        assert limiter is not None
        admit = limiter.admit
        starting = self._starting
        while (job := pop()) is not None:
            if job.status.is_terminal:
                limiter.skipped(job)
                continue
            if starting is not None and not starting(job):
                limiter.skipped(job)
                self.forget(job)
                continue
            wait = admit(job)
            if wait:
                if wait > 0:  # no rate token until `wait`: to the delayed heap
                    job.run_at = wait
                    self._enqueue(job)
                continue  # parked by a concurrency limit: the next job may run
            self._transition(job, RUNNING)
            return job
        return None

    def _unknown_executor(self, model: object) -> str:
        name = str(model)
        if name == "async":  # the default: say what disabled it
            return missing_default(self.plugins, "executors", name)
        return self.plugins.unknown_name_message("executors", name)

    def _make_limiter(self, limits: Limits) -> Limiter:
        limits.check_names(
            executors=self.plugins.names("executors"), job_types=self.plugins.names("job_types")
        )
        registered = {
            reg.factory: name
            for name, reg in self.plugins.registry["job_types"].items()
            if isinstance(reg.factory, type)
        }
        return Limiter(
            limits, clock=self._clock, requeue=self._requeue, registered_types=registered
        )

    def _requeue(self, job: Job) -> None:
        self._ready.push(job)
        self._work_available.set()

    @property
    def limiter(self) -> Limiter | None:
        """The scheduler's limits at run time (None when none are configured)."""
        return self._limiter

    # ── Internals: retention ──────────────────────────────────────────
    def _need_reaper(self) -> None:
        """A job has its own result settings: make sure the reaper runs."""
        self._reap_wanted = True
        if self._reaper is None and self._started and not self._stopping:
            self._arm_reaper()

    def _arm_reaper(self) -> None:
        # A timer, never the job path: often enough that nothing outlives its
        # time by much (a quarter of the shortest setting), at most once a second.
        settings = [s for s in (self._result_ttl, self._retention) if s is not None]
        period = min(60.0, max(1.0, min(settings, default=60.0) / 4))
        self._reaper = self._clock.call_at(self._clock.now() + period, self._reap)

    def _reap(self) -> None:
        """Drop expired results, purge jobs past `retention`, and re-arm."""
        self._reaper = None
        if self._stopping:
            return
        self.expire_results()
        if self._retention is not None:
            self.purge(self._retention)
        self._arm_reaper()

    # ── Internals: operator actions and progress ──────────────────────
    def _take_nothing(self) -> Job | None:
        """`_take_next` while the queue is paused."""
        return None

    def _registered_types(self) -> dict[type, str]:
        return {
            reg.factory: name
            for name, reg in self.plugins.registry["job_types"].items()
            if isinstance(reg.factory, type)
        }

    def _link_downstream(self, job_id: str, upstreams: Iterable[str]) -> None:
        downstream = self._downstream
        for upstream in upstreams:
            found = downstream.get(upstream)
            if found is None:
                downstream[upstream] = {job_id: None}
            else:
                found[job_id] = None

    def _unlink_downstream(self, job_id: str) -> None:
        """Forget `job_id`'s edges both ways (before its notes are dropped)."""
        downstream = self._downstream
        downstream.pop(job_id, None)
        notes = self._notes.get(job_id)
        if notes is None:
            return
        for upstream in notes.depends_on:
            found = downstream.get(upstream)
            if found is not None:
                found.pop(job_id, None)
                if not found:
                    del downstream[upstream]

    def _notes_of(self, job_id: str) -> _Notes:
        notes = self._notes.get(job_id)
        if notes is None:
            notes = self._notes[job_id] = _Notes()
        return notes

    def _drop_queued(self, job: Job) -> None:
        """Take `job`'s stale entries out of the ready queue and the delayed heap."""
        self._ready.remove(job)
        if any(entry[2] is job for entry in self._delayed):
            self._delayed = [entry for entry in self._delayed if entry[2] is not job]
            heapify(self._delayed)

    def _forget_finished(self, job_id: str) -> None:
        """Drop a terminal job and what is kept beside it (its key, its notes)."""
        self._jobs.pop(job_id, None)
        if self._key_of and (key := self._key_of.pop(job_id, None)) is not None:
            del self._keys[key]
        if self._downstream:
            self._unlink_downstream(job_id)
        if self._notes:
            self._notes.pop(job_id, None)

    def report_progress(
        self, job: Job, done: float, total: float | None, message: str | None
    ) -> None:
        """Backend- and executor-facing: `job` reported progress (on the loop thread).

        Kept at once (`job_progress`); passed to the progress listeners, the
        hook and the backend through the job's throttle. A report for an
        attempt that has ended is dropped.
        """
        job_id = job.job_id
        if job.status is not RUNNING or self._jobs.get(job_id) is not job:
            return
        notes = self._notes_of(job_id)
        value = notes.progress = JobProgress(done, total, message, self._clock.time())
        if not self._progress_listeners:
            return
        throttle = notes.throttle
        if throttle is None:
            clock = self._clock
            throttle = notes.throttle = ProgressThrottle(
                lambda value: self._publish_progress(job, value),
                clock.now,
                lambda delay, fn: clock.call_at(clock.now() + delay, fn),
            )
        self._throttled[job_id] = notes
        throttle.update(value)

    def report_progress_threadsafe(
        self, job: Job, done: float, total: float | None, message: str | None
    ) -> None:
        """`report_progress` from any thread: the latest report of each job
        crosses to the loop, one hand-over in flight at a time."""
        loop = self._loop
        if loop is None:
            return
        with self._thread_reports_lock:
            first = not self._thread_reports
            self._thread_reports[job.job_id] = (job, done, total, message)
        if first:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody listens
                loop.call_soon_threadsafe(self._take_thread_reports)

    def _take_thread_reports(self) -> None:
        with self._thread_reports_lock:
            reports, self._thread_reports = self._thread_reports, {}
        for job, done, total, message in reports.values():
            self.report_progress(job, done, total, message)

    def _publish_progress(self, job: Job, value: JobProgress) -> None:
        done, total, message = value[0], value[1], value[2]
        for listener in self._progress_listeners:
            try:
                listener(job, done, total, message)
            except Exception:
                logger.exception(
                    "progress listener failed", job_id=job.job_id, listener=repr(listener)
                )

    def _end_progress(self, job: Job) -> None:
        """The attempt of `job` ends: what its throttle holds is passed on now."""
        notes = self._throttled.pop(job.job_id, None)
        if notes is not None and notes.throttle is not None:
            notes.throttle.flush()
            notes.throttle = None

    # ── Internals: workers ────────────────────────────────────────────
    async def _worker(self, slot: _Slot) -> None:
        slot.task = asyncio.current_task()
        # Once per worker, not per job: async jobs find their reporter in the
        # worker task's context (tasks they create inherit it).
        slot.reporter = _WorkerReporter(self, slot)
        set_worker_reporter(slot.reporter)
        work = self._work_available
        executors = self._executors
        now = self._clock.now
        inf = math.inf
        pop = self._ready.pop
        started_in = _fork.pid  # a forked child's copy of this worker must not go on
        while not self._stopping:
            if self._plain_take:  # _take_next, inline
                job = pop()
                while job is not None and job.status.is_terminal:
                    job = pop()  # lazily deleted: cancelled while queued
                if job is not None:
                    old = job.status  # PENDING or RETRY_WAIT: both may move to RUNNING
                    job.status = RUNNING
                    if self._running_listeners:
                        self._notify_running(job, old)
            else:
                job = self._take_next()
            if job is None:
                # Clear-then-wait is safe: nothing can set the event between
                # _take_next() returning None and clear(), as there is no await
                # in between. Every waiter wakes on set() and re-checks.
                work.clear()
                self._waiting_workers += 1
                try:
                    await work.wait()
                finally:
                    self._waiting_workers -= 1
                continue
            if job.status is not RUNNING:
                continue  # cancelled between _take_next() and here, by a listener
            # The attempt runs inline in the worker task, and in this frame: a
            # task, or even a coroutine call, per attempt would cost more than
            # the rest of the job's path. Timeouts and cancel(job_id) cancel
            # the worker task while it awaits the attempt; the slot's flags say
            # which, so a TimeoutError the job raises itself stays an ordinary
            # failure. Whatever else the job raises, even CancelledError or
            # SystemExit, fails the job and not the worker.
            try:
                job.attempts += 1
                job.started_at = started = now()
                slot.job = job
                running = self._running_count = self._running_count + 1
                if running > self.peak_running:
                    self.peak_running = running
                timeout = job.timeout
                if timeout is not None:
                    slot.deadline = deadline = started + timeout
                    if deadline < self._watchdog_at:
                        self._arm_watchdog(deadline)
                try:
                    result = await executors[job.model].invoke(job)
                except asyncio.CancelledError as exc:
                    self._attempt_failed(job, slot, timeout, exc, cancelled_error=True)
                    continue
                except BaseException as exc:  # a job's SystemExit must not end the program
                    if _fork.pid != started_in:
                        leave_forked_child(started_in, job, exc)
                    self._attempt_failed(job, slot, timeout, exc)
                    continue
                if _fork.pid != started_in:
                    leave_forked_child(started_in, job, None)
                if slot.expired or slot.cancel_requested:
                    # Cancelled or timed out as it returned: that decision stands.
                    self._attempt_failed(job, slot, timeout, None)
                    continue
                # Completed: _release inline, the common path.
                if self._limiter is not None:
                    self._limiter.release(job)
                if self._throttled:
                    self._end_progress(job)
                slot.job = None
                slot.deadline = inf
                self._running_count -= 1
                job.result = result
                self._finish(job, COMPLETED)
            except asyncio.CancelledError:
                raise  # the worker itself is being torn down
            except Exception:  # a bug in our own bookkeeping
                logger.exception("worker crashed", job_id=job.job_id)

    def _attempt_failed(
        self,
        job: Job,
        slot: _Slot,
        timeout: float | None,
        error: BaseException | None,
        *,
        cancelled_error: bool = False,
    ) -> None:
        """An attempt ended other than by returning normally, or was cancelled
        or timed out by the kernel as it returned (`error` None)."""
        task: Any = slot.task  # cancelling()/uncancel(): 3.11's, or _CancelCountingTask's
        expired, cancelled = slot.expired, slot.cancel_requested
        if cancelled_error and not (expired or cancelled) and task.cancelling():
            # The worker itself is being cancelled (a shutdown, from outside
            # the kernel or `interrupt_running`): not a cancel of the job.
            self._release(slot)
            if self._backend.interrupted(job):
                job.handed_back = True  # listeners log a hand-back, not a cancel
            self._finish(job, CANCELLED, error=SHUTDOWN)
            raise error  # type: ignore[misc]
        if (expired or cancelled) and task.cancelling():
            task.uncancel()  # our cancel request was handled here
        self._release(slot)
        still_running = self._watch_abandoned(job) if (expired or cancelled) else None
        if cancelled:
            self._finish(job, CANCELLED, error=SHUTDOWN if job.handed_back else "cancelled")
        elif expired:
            retry, _, note = retry_verdict(None, job.retry_on, job.no_retry_on)
            message = f"timed out after {timeout}s{note}"
            if still_running is not None and retry and self._retries_left(job):
                # Its retry must not run beside the call still running: the
                # job stays RUNNING (its call is) until that call ends, and
                # its outcome then is this timeout, whatever the call returns.
                logger.warning(
                    "timed out; the retry waits for the abandoned call to end",
                    job_id=job.job_id,
                    attempt=job.attempts,
                )
                job.last_error = message
                job.last_failure_timed_out = True
                attempt = job.attempts
                self._after_call[job.job_id] = lambda: self._timed_out_call_ended(
                    job, attempt, message, retry
                )
                return
            self._after_failure(job, message, retryable=retry, timed_out=True)
        elif error is not None:
            # Not CancelledError, SystemExit...: the job asked to stop, not to
            # be tried again; nor what the job's retry_on/no_retry_on rule out.
            retry, delay, note = retry_verdict(error, job.retry_on, job.no_retry_on)
            self._after_failure(job, _describe_error(error) + note, retryable=retry, delay=delay)

    def _watch_abandoned(self, job: Job) -> asyncio.Future[None] | None:
        """After an attempt of `job` was cancelled: the future of its call if the
        executor abandoned it still running (see `AbandoningExecutor`), else None."""
        still_running = getattr(self._executors[job.model], "still_running", None)
        ended: asyncio.Future[None] | None = None if still_running is None else still_running(job)
        if ended is None or ended.done():
            return None
        job_id = job.job_id
        self._abandoned_calls[job_id] = ended
        ended.add_done_callback(lambda _: self._abandoned_call_ended(job_id, ended))
        return ended

    def _abandoned_call_ended(self, job_id: str, ended: asyncio.Future[None]) -> None:
        if self._abandoned_calls.get(job_id) is not ended:
            return  # a later call of the job is the one watched now
        del self._abandoned_calls[job_id]
        then = self._after_call.pop(job_id, None)
        if then is not None:
            then()

    def _timed_out_call_ended(self, job: Job, attempt: int, message: str, retry: bool) -> None:
        """The call of `job`'s timed-out attempt ended: record the timeout now
        (a retry may start), unless the job was cancelled meanwhile."""
        if job.status is RUNNING and job.attempts == attempt and self._jobs.get(job.job_id) is job:
            self._after_failure(job, message, retryable=retry, timed_out=True)

    def _retries_left(self, job: Job) -> bool:
        """Whether a failure of `job`'s latest attempt would be retried (`_retry_wait`'s count)."""
        try:
            return not self._stopping and job.attempts <= job.retry.max_retries
        except Exception:  # a broken policy: `_retry_wait` says why
            return False

    def abandoned_calls(self) -> list[str]:
        """The ids of the jobs whose cancelled or timed-out calls still run on a
        thread or pool process (their executor could not stop them), oldest first."""
        return list(self._abandoned_calls)

    def _release(self, slot: _Slot) -> None:
        if self._limiter is not None:
            self._limiter.release(slot.job)  # type: ignore[arg-type]
        if self._throttled:
            self._end_progress(slot.job)  # type: ignore[arg-type]
        slot.job = None
        slot.deadline = math.inf
        slot.expired = slot.cancel_requested = False
        self._running_count -= 1

    def _cancel_attempt(self, slot: _Slot) -> None:
        if slot.cancel_requested or slot.task is None:
            return
        slot.cancel_requested = True
        if not slot.expired:
            slot.task.cancel()

    def _arm_watchdog(self, when: float) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
        self._watchdog_at = when
        self._watchdog = self._clock.call_at(when, self._on_watchdog)

    def _on_watchdog(self) -> None:
        """Time out every attempt past its deadline, then re-arm for the next one."""
        self._watchdog = None
        self._watchdog_at = math.inf
        now = self._clock.now()
        earliest = math.inf
        for slot in self._slots:
            if slot.job is None or slot.expired:
                continue
            if slot.deadline <= now:
                slot.expired = True
                if not slot.cancel_requested and slot.task is not None:
                    slot.task.cancel()
            elif slot.deadline < earliest:
                earliest = slot.deadline
        if earliest < math.inf:
            self._arm_watchdog(earliest)

    def _after_failure(
        self,
        job: Job,
        error: str,
        *,
        retryable: bool = True,
        timed_out: bool = False,
        delay: float | None = None,
    ) -> None:
        job.last_error = error
        job.last_failure_timed_out = timed_out
        wait = None
        if retryable and not self._stopping:
            wait, error = self._retry_wait(job, error, delay)
        if wait is not None:
            # The failed attempt joins the job's history; the final one is
            # the job's own fields, so a job that never retries records nothing.
            self._notes_of(job.job_id).history.append(
                AttemptRecord(
                    job.attempts,
                    TIMED_OUT if timed_out else FAILED,
                    error,
                    job.started_at,
                    self._clock.now(),
                )
            )
            job.previous_run_at = job.run_at  # the failed attempt's due time, for listeners
            job.run_at = self._clock.now() + wait
            self._transition(job, RETRY_WAIT)
            if self._backend.retry(job):
                self.forget(job)  # the backend's now: another process may take it
            else:
                self._enqueue(job)
        else:
            self._finish(job, TIMED_OUT if timed_out else FAILED, error=error)

    def _retry_wait(
        self, job: Job, error: str, delay: float | None = None
    ) -> tuple[float | None, str]:
        """Seconds until the failed job's next attempt (None: no more), and its error.

        `delay` (a `jobsched.Retry`'s) replaces the policy's delay, not its
        count. A retry policy that raises or asks for a wait that is not 0 to
        `MAX_DELAY` seconds ends the job, with the reason added to its error:
        the worker and the run go on.
        """
        policy = job.retry
        try:
            if job.attempts > policy.max_retries:
                return None, error
            wait = policy.delay(job.attempts, self._rng) if delay is None else delay
            if not 0 <= wait <= MAX_DELAY:  # also NaN
                raise ValueError(f"it asked to wait {wait!r}s; the most is {MAX_DELAY:.0f}s")
        except Exception as exc:
            return None, f"{error} (not retried: retry policy {policy!r} failed: {exc})"
        return wait, error

    # ── Internals: recurring ──────────────────────────────────────────
    def _arm_schedule(self, sched: RecurringSchedule) -> None:
        when = sched.arm_time(self._clock)
        if when is None:  # the trigger is exhausted (a date that has fired)
            sched.active = False
            self._recurring.pop(sched.schedule_id, None)
            self._backend.schedule_changed(sched)
            return
        sched.timer = self._clock.call_at(when, lambda: self._on_schedule(sched))

    def _on_schedule(self, sched: RecurringSchedule) -> None:
        sched.timer = None
        if not sched.active or sched.paused or self._stopping:
            return
        fires = sched.take_due(self._clock)
        self._backend.schedule_changed(sched)  # its next fire time moved on
        if sched.pending_misfires:
            for fire, lateness, count in sched.pending_misfires:
                self.plugins.schedule_misfired(self, sched, fire, lateness, count)
            sched.pending_misfires.clear()
        if fires:
            self._fire(sched, fires)
        self._arm_schedule(sched)

    def _fire(self, sched: RecurringSchedule, fires: list[float]) -> None:
        previous = self._jobs.get(sched.last_job_id) if sched.last_job_id else None
        if previous is not None and not previous.status.is_terminal and not sched.allow_overlap:
            sched.skipped += len(fires)
            return
        key = self._schedule_key_of.get(sched.schedule_id) if self._schedule_key_of else None
        for _ in fires:
            try:
                delay = sched.jitter_delay(self._rng)
                sched.last_job_id = self.submit(
                    sched.factory(),
                    delay=delay,
                    key=None if key is None else f"{key}#{sched.fired + 1}",
                )
            except Exception:  # a broken factory must not stop the schedule
                logger.exception("recurring schedule failed to fire", schedule_id=sched.schedule_id)
                continue
            sched.fired += 1
            self._backend.schedule_fired(sched, sched.last_job_id)

    # ── Internals: state changes ──────────────────────────────────────
    def _transition(self, job: Job, new: JobStatus) -> None:
        old = job.status
        if new not in old.allowed_next:
            raise InvalidTransitionError(f"{job.job_id}: {old.value} -> {new.value}")
        job.status = new
        if self._listeners:
            self._notify(job, old, new)

    def _notify(self, job: Job, old: JobStatus, new: JobStatus) -> None:
        filters = self._listener_filters
        if filters is None:
            for listener in self._listeners:
                try:
                    listener(job, old, new)
                except Exception:  # a bad listener must not kill a worker
                    logger.exception("listener failed", job_id=job.job_id, listener=repr(listener))
            return
        for listener, wanted in filters:
            if wanted is None or new in wanted:
                try:
                    listener(job, old, new)
                except Exception:
                    logger.exception("listener failed", job_id=job.job_id, listener=repr(listener))

    def _notify_running(self, job: Job, old: JobStatus) -> None:
        for listener in self._running_listeners:
            try:
                listener(job, old, RUNNING)
            except Exception:  # a bad listener must not kill a worker
                logger.exception("listener failed", job_id=job.job_id, listener=repr(listener))

    def _finish(self, job: Job, status: JobStatus, *, error: str | None = None) -> None:
        # Iterative, so a long chain of dependents cannot hit the recursion
        # limit; the work list exists only once a job has dependents to settle.
        work: list[tuple[Job, JobStatus, str | None]] | None = None
        finished = self._finished
        while True:
            old = job.status
            if not old.is_terminal:
                if status not in old.allowed_next:
                    raise InvalidTransitionError(f"{job.job_id}: {old.value} -> {status.value}")
                if error is not None:
                    job.last_error = error
                job.finished_at = self._clock.now()
                job.status = status
                if self._listeners:
                    # `_notify` inline: a job ends once, and an observer that
                    # listens only to ends (metrics) saves a call per job.
                    for listener, wanted in self._listener_pairs:
                        if wanted is None or status in wanted:
                            try:
                                listener(job, old, status)
                            except Exception:  # a bad listener must not kill a worker
                                logger.exception(
                                    "listener failed", job_id=job.job_id, listener=repr(listener)
                                )
                job_id = job.job_id
                if self._blocked:
                    self._blocked.pop(job_id, None)
                if self._rules:
                    self._rules.pop(job_id, None)
                on_finished = self._on_finished
                if on_finished is None:
                    if self._dependents:
                        dependents = self._dependents.pop(job_id, None)
                        if dependents:
                            if work is None:
                                work = []
                            self._settle_dependents(job_id, status, dependents, work)
                else:
                    # Durable before visible: dependents wait for release_committed().
                    self._unreleased.add(job_id)
                    on_finished(job_id, status)
                if self._unique_of:
                    key = self._unique_of.pop(job_id, None)
                    if key is not None:
                        del self._unique[key]
                self._unfinished -= 1
                if self._unfinished == 0:
                    self._idle.set()
                # Bound memory (as _remember_finished): a recurring job would
                # otherwise grow _jobs forever. One in, at most one out.
                finished.append(job_id)
                if len(finished) > self._history_limit:
                    oldest = finished.popleft()  # as _forget_finished, inline
                    self._jobs.pop(oldest, None)
                    if self._key_of and (key := self._key_of.pop(oldest, None)) is not None:
                        del self._keys[key]
                    if self._downstream:
                        self._unlink_downstream(oldest)
                    if self._notes:
                        self._notes.pop(oldest, None)
            if not work:
                return
            job, status, error = work.pop()

    def _settle_dependents(
        self,
        job_id: str,
        status: JobStatus,
        dependents: list[str],
        work: list[tuple[Job, JobStatus, str | None]],
    ) -> None:
        """Release the dependents of a finished job, or queue their cancellation."""
        for dep_id in dependents:
            dependent = self._jobs.get(dep_id)
            if dependent is None or dependent.status.is_terminal:
                continue
            upstreams = self._rules.get(dep_id) if self._rules else None
            if upstreams is not None:  # kept until it finishes
                unmet = self._blocked.get(dep_id)
                if unmet is None:
                    continue  # released early: how its other upstreams end no longer matters
                run, reason = upstreams.settle(job_id, status)
                if run is None:
                    unmet.discard(job_id)
                    continue
                del self._blocked[dep_id]
                if run:
                    if dependent.takes_results:
                        dependent.resolve_results(self._result_for)
                    self._enqueue(dependent)
                else:
                    work.append((dependent, CANCELLED, reason))
            elif status is COMPLETED:
                unmet = self._blocked.get(dep_id)
                if unmet is not None:
                    unmet.discard(job_id)
                    if not unmet:
                        del self._blocked[dep_id]
                        if dependent.takes_results:
                            dependent.resolve_results(self._result_for)
                        self._enqueue(dependent)
            else:  # cascade: the upstream did not complete
                work.append((dependent, CANCELLED, f"upstream {job_id} {status.value}"))

    def _remember_finished(self, job_id: str) -> None:
        # Bound memory: a recurring job would otherwise grow _jobs forever.
        finished = self._finished
        finished.append(job_id)
        while len(finished) > self._history_limit:
            self._forget_finished(finished.popleft())


def _statuses_of(
    statuses: Iterable[JobStatus | str], allowed: tuple[JobStatus, ...], what: str
) -> tuple[JobStatus, ...]:
    """`statuses` as members of `allowed`; `ValueError` naming any other."""
    if isinstance(statuses, JobStatus | str):
        statuses = (statuses,)
    found: list[JobStatus] = []
    for given in statuses:
        try:
            status = JobStatus(given)
        except ValueError:
            status = None
        if status not in allowed:
            names = ", ".join(s.value for s in allowed)
            raise ValueError(f"status {given!r} cannot be {what}: use one of {names}")
        found.append(status)
    return tuple(found)


def _describe_error(error: BaseException) -> str:
    """``"ValueError: bad input"``; the bare type name when there is no message."""
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
