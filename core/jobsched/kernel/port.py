"""The kernel's port: the `Backend` protocol, and `KernelPort`, what a backend may do.

A backend (`jobsched.backends`) is chosen once, when a scheduler is composed.
The kernel calls it at the points `Backend` lists and nowhere else; the
backend works on the kernel through the `KernelPort` it is bound to, never
through the kernel's collaborators or their state.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from .._status import JobStatus
from .._trigger_rules import ALL_SUCCESS, Upstreams
from .queues import StartingHook

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .._clock import Clock
    from .._executor import Executor
    from .._job import Job
    from .._limits import Limiter
    from .._plugins import PluginManager, ProgressListener, TransitionListener
    from .._recurring import RecurringSchedule, Trigger
    from .._strategy import SortKey
    from .executors import Executors
    from .graph import DependencyGraph, Settled
    from .operations import Operations
    from .queues import Queues
    from .table import JobTable
    from .timers import Timers

__all__ = ["AdmitHook", "Backend", "FinishedHook", "KernelPort", "StartingHook"]

#: ``admit(job, delay, depends_on, key, unique_key, trigger_rule)``: see `Backend.admit`.
AdmitHook = Callable[["Job", float, "Sequence[str]", "str | None", "str | None", str], "str | None"]
#: ``finished(job_id, status)``: see `Backend.finished`.
FinishedHook = Callable[[str, JobStatus], None]


class Backend(Protocol):
    """How a kernel's jobs are kept: in memory, in a journal, or in a shared store.

    Chosen once, when a scheduler is composed (`jobsched.backends`). The
    kernel calls it at the points below and nowhere else; it works on the
    kernel through the `KernelPort` `bind` gives it.

    Per-job hooks are attributes that may be None: None costs nothing on the
    per-job path (the in-memory backend sets all five to None). They are
    read once, right after `bind`.

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
      `KernelPort.release_committed` (durable before visible).
    - ``progress(job, done, total, message)``: a running job's progress,
      throttled (at most 4 a second per job); called only for jobs that
      report progress.
    - ``starting(job) -> bool``: a worker took `job` from the ready queue and
      is about to start it. False drops it unstarted: the kernel forgets it
      (no transition, as `KernelPort.forget`), because the backend no longer
      holds it (a shared store's lease that ran out).
    """

    listener: TransitionListener | None
    admit: AdmitHook | None
    finished: FinishedHook | None
    progress: ProgressListener | None
    starting: StartingHook | None

    def bind(self, kernel: KernelPort) -> None:
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
        (`retry_job`); raise to refuse, before anything changed."""

    def purged(
        self,
        job_ids: Sequence[str],
        before: float,
        statuses: Sequence[JobStatus],
        *,
        exact: bool = False,
    ) -> None:
        """`purge` forgot these terminal jobs, those in `statuses` that
        finished at or before `before` (monotonic): a store deletes them (and
        older ones of the same kind it keeps). `exact` (`purge_jobs`: an
        operator chose them by id): a store deletes these jobs alone."""

    def results_expired(self, jobs: Sequence[Job]) -> None:
        """`expire_results` dropped these completed jobs' results: a
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
        """Add a recurring schedule (`schedule_recurring`'s arguments); the
        kernel's own `KernelPort.add_recurring` unless the backend keeps schedules."""

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
        """Return once every change so far is kept (see `flush`)."""

    async def join(self) -> None:
        """Wait until every job submitted here is terminal (see `join`)."""


class KernelSide(Protocol):
    """What the port needs of the kernel's core (`jobsched.kernel.core.Kernel`)."""

    plugins: PluginManager
    clock: Clock
    num_workers: int
    queue_slots: dict[str, int | None]
    table: JobTable
    graph: DependencyGraph
    queues: Queues
    timers: Timers
    executors: Executors
    operations: Operations

    @property
    def started(self) -> bool: ...

    @property
    def stopping(self) -> bool: ...

    @property
    def running(self) -> int: ...

    def submit(self, job: Any, *args: Any, **options: Any) -> str: ...

    def cancel(self, job_id: str) -> bool: ...

    def fail(self, error: BaseException) -> None: ...

    def ask_stop(self) -> None: ...

    def forget(self, job: Job) -> None: ...

    def release(self, job: Job) -> None: ...

    def cancel_job(self, job: Job, reason: str) -> None: ...

    def apply(self, settled: Settled) -> None: ...


class KernelPort:
    """The kernel's backend-facing side: what a backend may read of and do to it."""

    __slots__ = ("_core",)

    def __init__(self, core: KernelSide) -> None:
        self._core = core

    # ── reading ───────────────────────────────────────────────────────
    @property
    def plugins(self) -> PluginManager:
        """The scheduler's plugins."""
        return self._core.plugins

    @property
    def clock(self) -> Clock:
        """The scheduler's clock (monotonic `now()`, wall `time()`)."""
        return self._core.clock

    @property
    def history_limit(self) -> int:
        """How many finished jobs the scheduler remembers."""
        return self._core.table.history_limit

    @property
    def result_ttl(self) -> float | None:
        """Seconds a completed job's result is kept when the job sets no
        ``result_ttl`` of its own (None: for good). A shared store applies
        it through `Outcome.result_ttl` and its reaper."""
        return self._core.operations.result_ttl

    @property
    def retention(self) -> float | None:
        """Seconds finished jobs are kept before a reaper purges them (None: until purged)."""
        return self._core.operations.retention

    @property
    def started(self) -> bool:
        """True once ``start()`` began (a durable store's submits before it are deferred)."""
        return self._core.started

    @property
    def stopping(self) -> bool:
        """True once ``stop()`` began."""
        return self._core.stopping

    @property
    def num_workers(self) -> int:
        """How many attempts the kernel runs at once."""
        return self._core.num_workers

    @property
    def running(self) -> int:
        """Attempts in flight right now."""
        return self._core.running

    @property
    def queued(self) -> int:
        """Entries in the ready queue (cancelled ones included until popped)."""
        return len(self._core.queues)

    @property
    def limiter(self) -> Limiter | None:
        """The scheduler's limits at run time (None when none are configured)."""
        return self._core.queues.limiter

    @property
    def served_queues(self) -> dict[str, int]:
        """The queues it serves, each with the most of its jobs that run at
        once here (its own concurrency, else every worker's slot)."""
        workers = self._core.num_workers
        return {q: workers if n is None else n for q, n in self._core.queue_slots.items()}

    def claim_rooms(self, room: int, held: Callable[[], Mapping[str, int]]) -> dict[str, int]:
        """How many jobs of each queue it serves the kernel may take now, `room`
        in all: a queue with a concurrency of its own takes up to twice that
        (its running jobs and one queued each), less the ones ``held()``
        counts (claimed and not yet ended here, by queue; asked only for
        such a queue); a queue paused here takes none."""
        paused = self._core.queues.paused_queues
        slotted = self._core.queue_slots
        counts: Mapping[str, int] = {}
        if any(slots is not None for slots in slotted.values()):
            counts = held()
        rooms = {}
        for queue, slots in slotted.items():
            if queue in paused:
                continue
            rooms[queue] = room if slots is None else min(room, 2 * slots - counts.get(queue, 0))
        return rooms

    def sort_key(self, job: Job) -> SortKey:
        """The strategy's key for `job`, ending in ``job.seq``."""
        return self._core.queues.key(job)

    def find(self, job_id: str) -> Job | None:
        """The job with this id, or None."""
        return self._core.table.find(job_id)

    def key_of(self, job_id: str) -> str | None:
        """The external key the job was submitted (or restored) with, if any."""
        return self._core.table.key_of(job_id)

    def executor(self, model: str) -> Executor:
        """The executor for `model`, built now if it was not yet."""
        return self._core.executors.get_or_build(model)

    async def wait_idle(self) -> None:
        """Wait until no job the kernel knows is unfinished."""
        await self._core.table.idle.wait()

    # ── doing ─────────────────────────────────────────────────────────
    def submit(self, job: Job, **options: Any) -> str:
        """Submit `job` with `submit`'s options (a submit the backend deferred)."""
        return self._core.submit(job, **options)

    def cancel(self, job_id: str) -> bool:
        """Cancel a job (`cancel`)."""
        return self._core.cancel(job_id)

    def fail(self, error: BaseException) -> None:
        """The backend cannot go on (its store was migrated by a newer jobsched,
        say): the scheduler's ``wait_failed`` returns `error` and ``stop`` raises
        it. The first error is kept."""
        self._core.fail(error)

    def ask_stop(self) -> None:
        """An operator asked this process to stop (`WorkersRole.request_worker`):
        the scheduler's ``wait_stop_asked`` returns, and the process that runs
        it stops it (``jobsched worker`` does, as on SIGTERM)."""
        self._core.ask_stop()

    def add_recurring(
        self,
        factory: Callable[[], Job],
        interval: float | None = None,
        *,
        trigger: Trigger | dict[str, Any] | None = None,
        **options: Any,
    ) -> str:
        """A schedule the kernel runs on its own timers (`schedule_recurring`'s options)."""
        return self._core.timers.add(factory, interval, trigger=trigger, **options)

    def adopt(self, job: Job) -> None:
        """Queue a job the backend claimed: runnable now, counted as unfinished.

        Its id, attempts and options are the backend's; the kernel gives it a
        submit order. No await inside: atomic.
        """
        core = self._core
        core.table.adopt(job)
        job.run_at = core.clock.now()
        core.queues.push(job)

    def forget(self, job: Job) -> None:
        """The backend keeps this unfinished job from now on (a shared retry):
        the kernel no longer counts or knows it."""
        self._core.forget(job)

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
        core = self._core
        graph = core.graph
        if depends_on:
            graph.link(job.job_id, depends_on, trigger_rule)
        evicted = core.table.restore(job, key, unique_key)
        if job.status.is_terminal:
            if evicted is not None:
                graph.forget(evicted)
            return
        if unmet:
            rule = Upstreams(trigger_rule, len(unmet)) if trigger_rule != ALL_SUCCESS else None
            graph.hold(job.job_id, set(unmet), rule)
        else:
            core.release(job)

    def restore_schedule(
        self, sched: RecurringSchedule | None, schedule_id: str, key: str | None
    ) -> None:
        """Install a schedule read back from a store (None: an ended one, whose key stays known)."""
        self._core.timers.restore(sched, schedule_id, key)

    def cancel_restored(self, job: Job, reason: str) -> None:
        """Cancel a restored job that can never run (its upstream failed or is gone)."""
        self._core.cancel_job(job, reason)

    def release_committed(self, finished: Mapping[str, JobStatus]) -> None:
        """The store committed these terminal states: now their dependents may move.

        Only for a backend with a `Backend.finished` hook.
        """
        self._core.apply(self._core.graph.release_committed(finished))
