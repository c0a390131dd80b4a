"""`JobScheduler`: the public facade, a scheduler that has a kernel.

Composition happens here, once: plugins are loaded, the strategy and the store
are resolved by name, and the backend that keeps the jobs is picked (memory,
a journal to a store one process owns, or a store several processes share).
The kernel (`jobsched.kernel`) then runs without ever asking which one it got.
The facade offers DESIGN.md's reference API and its documented extras;
everything backend-facing stays on the kernel and its port.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from ._clock import Clock
from ._job import Job
from ._limits import Limiter, Limits
from ._options import check_queue
from ._plugins import PluginManager, default_plugin_manager
from ._strategy import SchedulingStrategy
from ._submission import Submission, plan_batch
from ._trigger_rules import ALL_SUCCESS
from ._workflow import Workflow
from .backends import JournalBackend, LocalBackend, SharedBackend
from .kernel import Backend, JobListener, Kernel
from .kernel.executors import AbandonedCalls
from .kernel.graph import DependencyGraph
from .kernel.listeners import Listeners
from .kernel.operations import Operations
from .kernel.progress import ProgressBoard
from .kernel.table import JobTable
from .kernel.timers import Timers
from .store import (
    MAX_BUILD_REFUSALS,
    MAX_LEASE_EXPIRIES,
    StoreBase,
    as_shared_store,
    as_store,
    resolve_store,
)

__all__ = ["JobListener", "JobScheduler", "choose_backend"]

P = ParamSpec("P")
R = TypeVar("R")


class _Forward(Generic[P, R]):
    """A facade method that is a method of the kernel or of one of its parts.

    Bound once per scheduler, on first use, and cached on the instance: the
    facade adds no call to the path it forwards (a submit loop pays nothing).
    """

    def __init__(self, method: Callable[Concatenate[Any, P], R], part: str) -> None:
        self.method_name = method.__name__
        self.part = part
        self.__doc__ = method.__doc__
        self.name = self.method_name

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> _Forward[P, R]: ...

    @overload
    def __get__(self, obj: JobScheduler, owner: type | None = None) -> Callable[P, R]: ...

    def __get__(
        self, obj: JobScheduler | None, owner: type | None = None
    ) -> _Forward[P, R] | Callable[P, R]:
        if obj is None:
            return self
        target = obj.kernel if not self.part else getattr(obj.kernel, self.part)
        bound: Callable[P, R] = getattr(target, self.method_name)
        obj.__dict__[self.name] = bound
        return bound


def _forward(method: Callable[Concatenate[Any, P], R], part: str = "") -> _Forward[P, R]:
    """Forward to `method` of the kernel (`part` "") or of its part named `part`."""
    return _Forward(method, part)


class JobScheduler:
    """An asyncio job scheduler composed from plugins.

    `strategy` is a `SchedulingStrategy` or a registered name (default
    ``"priority"``); `plugins` is a `PluginManager`, or an iterable of plugin
    objects to use with the built-in plugins (no third-party autoload), or None
    for every installed plugin. Names are resolved here, once. `limits` caps
    attempts per executor and per job type and rates per job type (a `Limits`
    or a mapping; docs/limits.md); without it the dispatch path is unchanged.

    `store` makes jobs durable: a `Store` or a URL resolved through the store
    plugins (``"sqlite:///jobs.db"``); None (the default) keeps everything in
    memory at no cost. With a durable store, ``start()`` restores the stored
    jobs and schedules first: a `submit` made before it is accepted once they
    are restored, and `schedule_recurring` must come after it (see
    docs/durability.md).

    `shared` says how a durable store is used: None (the default) follows the
    store (``store.shared``: PostgreSQL is shared, SQLite is owned by one
    process); True shares it with other processes (the store must implement
    `SharedStore`); False makes this process its only owner. A process
    that only submits and follows jobs uses `jobsched.Client` (docs/client.md).

    `result_ttl` is how many seconds a completed job's result is kept when
    the job sets none itself (``submit(..., result_ttl=...)``, a job type's
    ``result_ttl`` attribute); None keeps results. `retention` is how many
    seconds finished jobs are kept at all: a reaper purges older ones
    (None: never). Both are applied away from the hot path, by a periodic
    reaper (see docs/client.md); in-process, a SQLite file the scheduler
    owns deletes what it purges.

    `max_lease_expiries` (shared stores only; default 3) is how many times a
    job's lease may expire, its worker dying or stalling while it ran,
    before this process's reaper fails it ("lease expired N times") instead
    of queueing it again: a job that kills or blocks its worker cannot walk
    the cluster (docs/durability.md). `max_build_refusals` (shared stores
    only; default 5) is how many worker processes may claim a job and fail
    to build it from its stored arguments (they run another version of its
    job type: a rolling deploy hands it back, untouched, for another
    worker) before it fails, naming the type and the error
    (docs/reliability.md).

    `queues` names the queues this scheduler serves: a list of names, or a
    mapping of names to this process's concurrency for each (``{"emails": 2,
    "reports": 4}``: at most 2 email jobs run at once here; None: no limit of
    its own). None (the default) serves the ``"default"`` queue alone. On a
    shared store it claims only those queues' jobs (and submits to any);
    kept in memory or in a store it owns, it refuses a job for another
    queue, which nothing would run (docs/queues.md).

    Executors are built when a job first asks for one: a broken executor
    plugin fails the jobs that use it (FAILED, not retried, with an error
    naming the plugin and the ``JOBSCHED_DISABLE_PLUGINS`` fix), nothing else.

    The scheduler has a `kernel` (`jobsched.kernel.Kernel`); what a backend,
    a worker process or a test needs beyond this facade is there.
    """

    def __init__(
        self,
        strategy: SchedulingStrategy | str | None = None,
        *,
        num_workers: int = 4,
        rng: random.Random | None = None,
        history_limit: int = 10_000,
        plugins: PluginManager | Iterable[object] | None = None,
        clock: Clock | None = None,
        limits: Limits | Mapping[str, Any] | None = None,
        store: StoreBase | str | None = None,
        shared: bool | None = None,
        result_ttl: float | None = None,
        retention: float | None = None,
        max_lease_expiries: int | None = None,
        max_build_refusals: int | None = None,
        queues: Iterable[str] | Mapping[str, int | None] | None = None,
    ) -> None:
        if plugins is None:
            plugins = default_plugin_manager()
        elif not isinstance(plugins, PluginManager):
            plugins = PluginManager(plugins, autoload=False)
        resolved = resolve_store(store, plugins)
        self._kernel = Kernel(
            strategy,
            plugins=plugins,
            backend=choose_backend(
                resolved,
                shared=shared,
                max_lease_expiries=max_lease_expiries,
                max_build_refusals=max_build_refusals,
            ),
            num_workers=num_workers,
            rng=rng,
            history_limit=history_limit,
            clock=clock,
            limits=limits,
            result_ttl=result_ttl,
            retention=retention,
            queues=queues,
            subject=self,
        )
        self._store = resolved
        # Asked once, as the per-job submit hooks are (by the kernel).
        self._submit_batch = plugins.submit_batch()

    @property
    def kernel(self) -> Kernel:
        """The kernel this scheduler has: its collaborators and its backend's port."""
        return self._kernel

    # ── the reference facade ──────────────────────────────────────────
    submit = _forward(Kernel.submit)
    submit_threadsafe = _forward(Kernel.submit_threadsafe)
    schedule_recurring = _forward(Kernel.schedule_recurring)
    cancel_recurring = _forward(Kernel.cancel_recurring)
    cancel = _forward(Kernel.cancel)
    get = _forward(JobTable.get, "table")
    jobs = _forward(Kernel.jobs)
    join = _forward(Kernel.join)
    start = _forward(Kernel.start)
    stop = _forward(Kernel.stop)
    add_listener = _forward(Listeners.add, "listeners")

    @property
    def peak_running(self) -> int:
        """The most attempts ever in flight at once."""
        return self._kernel.peak_running

    async def __aenter__(self) -> JobScheduler:
        await self._kernel.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._kernel.stop(cancel_running=exc_info[0] is not None)

    # ── documented extras ─────────────────────────────────────────────
    @property
    def plugins(self) -> PluginManager:
        """The plugins this scheduler was composed from."""
        return self._kernel.plugins

    @property
    def strategy(self) -> SchedulingStrategy:
        """The scheduling strategy (resolved from its name, if one was given)."""
        return self._kernel.strategy

    @property
    def num_workers(self) -> int:
        """How many attempts run at once."""
        return self._kernel.num_workers

    @property
    def store(self) -> StoreBase | None:
        """The store (resolved from its URL), or None in memory."""
        return self._store

    @property
    def started(self) -> bool:
        """True once `start` began (a durable store's submits before it are deferred)."""
        return self._kernel.started

    @property
    def limiter(self) -> Limiter | None:
        """The scheduler's limits at run time (None when none are configured)."""
        return self._kernel.queues.limiter

    @property
    def queues(self) -> dict[str, int | None]:
        """The queues this scheduler serves, with its concurrency for each."""
        return dict(self._kernel.queue_slots)

    @property
    def queue_paused(self) -> bool:
        """True between `pause_queue` and `resume_queue` (every queue paused)."""
        return self._kernel.queues.paused

    @property
    def paused_queues(self) -> list[str]:
        """The queues paused on their own (`pause_queue` with a name), by name."""
        return sorted(self._kernel.queues.paused_queues)

    def pause_queue(self, name: str | None = None) -> bool:
        """Start no new attempt until `resume_queue`; running ones finish.

        `name` None pauses every queue; a queue's name pauses that queue
        alone (the others go on). Jobs are still accepted and queued. False
        if already paused.
        """
        if name is None:
            return self._kernel.queues.pause()
        return self._kernel.queues.pause_queue(check_queue(name))

    def resume_queue(self, name: str | None = None) -> bool:
        """Start attempts again after `pause_queue` (of every queue, or of the
        one named); False if it was not paused."""
        if name is None:
            return self._kernel.queues.resume()
        return self._kernel.queues.resume_queue(check_queue(name))

    remove_listener = _forward(Listeners.remove, "listeners")
    add_progress_listener = _forward(ProgressBoard.add_listener, "progress")
    remove_progress_listener = _forward(ProgressBoard.remove_listener, "progress")
    job_progress = _forward(ProgressBoard.latest, "progress")
    flush = _forward(Kernel.flush)
    resolve = _forward(Kernel.resolve)
    job_counts = _forward(Kernel.job_counts)
    lookup = _forward(JobTable.lookup, "table")
    unique_key_of = _forward(JobTable.unique_key_of, "table")
    attempt_history = _forward(JobTable.attempt_history, "table")
    dependents = _forward(DependencyGraph.dependents, "graph")
    waiting_on = _forward(DependencyGraph.waiting_on, "graph")
    retry_job = _forward(Operations.retry_job, "operations")
    retry_jobs = _forward(Operations.retry_jobs, "operations")
    purge = _forward(Operations.purge, "operations")
    purge_jobs = _forward(Operations.purge_jobs, "operations")
    expire_results = _forward(Operations.expire_results, "operations")
    recurring = _forward(Timers.schedules, "timers")
    pause_schedule = _forward(Timers.pause, "timers")
    resume_schedule = _forward(Timers.resume, "timers")
    trigger_schedule = _forward(Timers.trigger, "timers")
    abandoned_calls = _forward(AbandonedCalls.ids, "abandoned")

    def submit_many(
        self, jobs: Iterable[Job | Submission | Workflow | Callable[..., Any]]
    ) -> list[str]:
        """Queue several jobs; returns every job's id, a workflow's jobs in its
        submit order (as `Client.submit_many`).

        Each item is a `Job`, a `Submission` (a job with `submit`'s options,
        which may depend on an earlier `Job` of the batch by naming the
        object), a workflow or a plain function taking no arguments. Every
        item is checked before any is queued: a bad option, an unknown
        dependency or a job already submitted queues none.
        """
        # With a durable store, submits made before start() are deferred
        # (checked once the store is restored) and a job built before then
        # whose id a restored job has is renumbered: only the same object is
        # a sure refusal.
        kernel = self._kernel
        in_memory = self._store is None
        planned = plan_batch(
            jobs,
            kernel.table.find,
            kernel.plugins,
            in_memory=in_memory,
            look_up=in_memory or kernel.started,
        )
        batch = self._submit_batch
        if batch is not None:
            with batch():
                return self._submit_planned(planned)
        return self._submit_planned(planned)

    def _submit_planned(self, planned: Iterable[tuple[Submission, Job]]) -> list[str]:
        kernel = self._kernel
        ids: list[str] = []
        ids_of: dict[int, str] = {}
        for item, job in planned:
            job_id = kernel.submit(
                job,
                delay=item.delay,
                depends_on=[ids_of[id(d)] if isinstance(d, Job) else d for d in item.depends_on],
                key=item.key,
                unique_key=item.unique_key,
                result_ttl=item.result_ttl,
                keep_result=item.keep_result,
                group=item.group,
                trigger_rule=None if item.trigger_rule == ALL_SUCCESS else item.trigger_rule,
            )
            ids_of[id(item.job)] = job_id
            ids.append(job_id)
        return ids


def choose_backend(
    store: StoreBase | None,
    *,
    shared: bool | None,
    max_lease_expiries: int | None = None,
    max_build_refusals: int | None = None,
) -> Backend:
    """The backend for `store` (see `JobScheduler`): picked once, never branched on later."""
    if shared is not None and not isinstance(shared, bool):
        raise TypeError(f"shared must be True, False or None, got {shared!r}")
    durable = store is not None and bool(store.durable)
    asked = shared
    if shared is None:
        shared = durable and bool(getattr(store, "shared", False))
    if shared:
        if store is None or not durable:
            raise ValueError(
                "shared=True needs a durable store several processes can share "
                "(e.g. store='postgresql://...'); "
                + ("none was given" if store is None else f"{store!r} is not durable")
            )
        # A TypeError naming what the store lacks, as for any store that breaks its contract.
        try:
            shared_store = as_shared_store(store)
        except TypeError as exc:
            if asked is None:
                raise
            raise TypeError(
                f"shared=True: {exc}; this store is for one process at a time "
                "(leave shared unset), or use a store that implements SharedStore"
            ) from None
        return SharedBackend(
            shared_store,
            max_lease_expiries=(
                MAX_LEASE_EXPIRIES if max_lease_expiries is None else max_lease_expiries
            ),
            max_build_refusals=(
                MAX_BUILD_REFUSALS if max_build_refusals is None else max_build_refusals
            ),
        )
    where = f"{store!r} is not shared" if durable else "this scheduler keeps its jobs in memory"
    if max_lease_expiries is not None:
        raise ValueError(f"max_lease_expiries bounds the leases of a shared store; {where}")
    if max_build_refusals is not None:
        raise ValueError(f"max_build_refusals bounds the claims of a shared store; {where}")
    if durable:
        assert store is not None
        if asked is False and store.shared:
            raise ValueError(
                f"shared=False: {store!r} is always shared; it has no single-owner mode"
            )
        return JournalBackend(as_store(store))
    return LocalBackend(store)
