"""The kernel's core: composition, lifecycle, the submit fast path, transitions.

The core composes the collaborators that own the kernel's state (the job
table, the dependency graph, the queues with their admission chain, the
workers, the timers, progress, executors, listeners, operator actions) and
drives a job through them: submit, start, finish. It knows no store: how jobs are kept is
a `Backend`, which works on the kernel through its `KernelPort`.

Everything is owned by the event-loop thread (no locks: every
check-then-act runs with no ``await`` in the middle). One timer wakes the
delayed heap, one watchdog timer enforces every running job's timeout, one
timer per recurring schedule: no polling anywhere.
"""

from __future__ import annotations

import asyncio
import inspect
import random
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import structlog

from .._clock import Clock, SystemClock
from .._errors import (
    InvalidTransitionError,
    PluginError,
    SchedulerError,
    SchedulerStoppedError,
    UnknownJobError,
)
from .._job import Job, job_extras
from .._limits import Limits
from .._options import (
    DEFAULT_QUEUE,
    check_delay,
    check_key,
    check_num_workers,
    check_retention,
    id_list,
    to_keep_result,
    to_queue_slots,
    to_result_ttl,
)
from .._recurring import CoalescePolicy, Trigger
from .._result_of import job_id_of, not_json, unavailable
from .._retry import RetryPolicy
from .._status import JobStatus
from .._strategy import SchedulingStrategy
from .._trigger_rules import ALL_SUCCESS, Upstreams, check_trigger_rule
from .._workflow import Workflow
from ..store import result_as_json
from .executors import AbandonedCalls, Executors, default_factory
from .graph import DependencyGraph
from .intake import SUBMIT_OPTIONS, as_job, submit_workflow
from .listeners import Listeners, Wanted
from .operations import Operations
from .port import Backend, KernelPort
from .progress import ProgressBoard
from .queues import Queues
from .table import JobTable
from .timers import Timers
from .workers import SHUTDOWN, Workers

if TYPE_CHECKING:
    from .._plugins import PluginManager
    from ..hookspecs import SchedulerView
    from .graph import Settled

logger = structlog.get_logger("jobsched")

PENDING = JobStatus.PENDING
RUNNING = JobStatus.RUNNING
RETRY_WAIT = JobStatus.RETRY_WAIT
COMPLETED = JobStatus.COMPLETED
CANCELLED = JobStatus.CANCELLED


class Kernel:
    """The workers and state machine of a scheduler, over its collaborators and one `Backend`.

    `JobScheduler` (the facade) composes a kernel from plugins and a store;
    build that, not this. The collaborators are public attributes, each
    owning its state: `table` (jobs, keys, history), `graph` (dependencies),
    `queues` (ready and delayed, the admission chain, `limiter`), `workers`
    (slots, timeouts, retries), `timers` (recurring schedules), `progress`,
    `executors`, `abandoned` (calls an executor abandoned), `listeners`,
    `operations` (retry, purge, expiry), and `port`, the side a backend
    works on.

    `subject` is what plugins' lifecycle and misfire hooks receive: the
    `JobScheduler` that has this kernel.
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
        queues: Iterable[str] | Mapping[str, int | None] | None = None,
        subject: SchedulerView,
    ) -> None:
        check_num_workers(num_workers)
        #: The queues this scheduler serves, with its concurrency for each
        #: (None: no limit of its own); `to_queue_slots` spells them.
        self.queue_slots = to_queue_slots(queues)
        self._served = frozenset(self.queue_slots)
        result_ttl = to_result_ttl(result_ttl)
        retention = check_retention(retention)
        self.plugins = plugins
        if strategy is None:
            strategy = default_factory(
                plugins, "strategies", "priority", "pass a strategy (strategy=...)"
            )()
        elif isinstance(strategy, str):
            strategy = plugins.resolve("strategies", strategy)()
        self.strategy: SchedulingStrategy = strategy  # type: ignore[assignment]
        self.num_workers = num_workers
        self.clock: Clock = clock or SystemClock()
        self._rng = rng or random.Random()
        #: What lifecycle and misfire hooks receive (the `JobScheduler`).
        self._subject = subject
        self.table = JobTable(history_limit)
        self.graph = DependencyGraph(self.table)
        # Built on first use: a broken executor fails only the jobs that use it.
        self.executors = Executors(plugins, num_workers)
        self.abandoned = AbandonedCalls()
        if limits is not None:
            limits = Limits.coerce(limits)
            limits.check_names(
                executors=plugins.names("executors"), job_types=plugins.names("job_types")
            )
        # The backend is bound first: its per-job hooks are read once, after that.
        self.backend = backend
        self.port = KernelPort(self)
        backend.bind(self.port)
        self._admit = backend.admit
        self._on_finished = backend.finished
        fixed: tuple[Wanted, ...] = plugins.transition_listeners()
        if backend.listener is not None:
            fixed = ((backend.listener, None), *fixed)
        self.listeners = Listeners(fixed)
        plugin_progress = plugins.progress_listeners()
        if backend.progress is not None:
            plugin_progress = (backend.progress, *plugin_progress)
        self.progress = ProgressBoard(self.table, self.clock, plugin_progress)
        self.queues = Queues(
            strategy,  # type: ignore[arg-type]
            self.clock,
            limits=limits or None,
            registered_types=self.registered_types(),
            starting=backend.starting,
            drop=self.forget,
            queue_slots=self.queue_slots,
        )
        self.timers = Timers(
            clock=self.clock,
            rng=self._rng,
            plugins=plugins,
            hooks=backend,
            submit=self.submit,
            find=self.table.find,
        )
        self.operations = Operations(
            table=self.table,
            graph=self.graph,
            queues=self.queues,
            listeners=self.listeners,
            progress=self.progress,
            abandoned=self.abandoned,
            hooks=backend,
            clock=self.clock,
            registered_types=self.registered_types,
            result_ttl=result_ttl,
            retention=retention,
        )
        # The submit path reads these two for the kernel's own heap (None
        # with a strategy's queue): the key is computed before anything is recorded.
        self._heap = self.queues.heap
        self._key = self.queues.key
        self.workers = Workers(
            num_workers,
            table=self.table,
            queues=self.queues,
            listeners=self.listeners,
            progress=self.progress,
            executors=self.executors,
            abandoned=self.abandoned,
            backend=backend,
            clock=self.clock,
            rng=self._rng,
            finish=self.finish,
            transition=self.transition,
            forget=self.forget,
        )
        self._submit_hooks = plugins.submit_hooks()
        # The submit fast path's lookups, done once here.
        self._executor_names = self.executors.registry
        self._now = self.clock.now
        #: Job classes known to be `Job` subclasses that do not `takes_results`.
        self._plain_types: set[type] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._started = False
        #: When `start` opened the backend (the clock's wall time), None before.
        self.started_at: float | None = None
        self._stopping = False
        self._stopped = False
        self._stop_done = asyncio.Event()
        self._failure: BaseException | None = None
        self._failed = asyncio.Event()
        self._stop_asked = asyncio.Event()

    # ── state ─────────────────────────────────────────────────────────
    @property
    def started(self) -> bool:
        """True once `start` began (a durable store's submits before it are deferred)."""
        return self._started

    @property
    def stopping(self) -> bool:
        """True once `stop` began."""
        return self._stopping

    @property
    def running(self) -> int:
        """Attempts in flight right now."""
        return self.workers.running

    @property
    def peak_running(self) -> int:
        """The most attempts ever in flight at once."""
        return self.workers.peak_running

    def registered_types(self) -> dict[type, str]:
        """The registered job types' classes and names."""
        return {
            reg.factory: name
            for name, reg in self.plugins.registry["job_types"].items()
            if isinstance(reg.factory, type)
        }

    def jobs(self) -> list[Job]:
        """Every job the scheduler knows: unfinished ones and the bounded history."""
        return list(self.table.jobs.values())

    def job_counts(self) -> dict[str, int]:
        """Unfinished jobs this scheduler holds, by where they wait.

        ``pending`` (runnable now, or parked by a limit), ``delayed`` (a first
        run not due yet), ``blocked`` (on dependencies), ``retry_wait`` and
        ``running``. Cheap and safe to call from another thread (a metrics
        scrape): it reads sizes and one copy of the delayed heap, so the
        figures may be a moment apart from each other.
        """
        running = self.workers.running
        blocked = len(self.graph.blocked)
        delayed = retry_wait = 0
        for _, _, job in list(self.queues.delayed):
            status = job.status
            if status is RETRY_WAIT:
                retry_wait += 1
            elif status is PENDING:
                delayed += 1
        pending = self.table.unfinished - running - blocked - delayed - retry_wait
        return {
            "pending": max(pending, 0),
            "delayed": delayed,
            "blocked": blocked,
            "retry_wait": retry_wait,
            "running": running,
        }

    # ── submitting ────────────────────────────────────────────────────
    def _submit_with_options(
        self,
        /,
        job: Job | Workflow | Callable[..., Any],
        *args: Any,
        delay: float = 0.0,
        depends_on: Iterable[str] = (),
        unique_key: str | None = None,
        key: str | None = None,
        result_ttl: float | None = None,
        keep_result: bool | None = None,
        trigger_rule: str | None = None,
        group: str | None = None,
        kwargs: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> str:
        """`submit` with what it was given beyond a plain job: the options
        checked and applied, a function made a job, a workflow taken apart."""
        if delay != 0.0:
            delay = check_delay(delay)
        # type(x), not x.__class__: a call CPython specialises, where reading
        # __class__ is a generic attribute lookup on every submit.
        if type(depends_on) is str:
            id_list(depends_on, "depends_on")  # refused: its characters are not ids
        upstreams = None
        rule = ALL_SUCCESS
        if trigger_rule is not None and check_trigger_rule(trigger_rule) != ALL_SUCCESS:
            rule = trigger_rule
            upstreams = Upstreams(trigger_rule, 0)  # counted below, with result_of's upstreams
        cls = type(job)
        plain_types = self._plain_types
        if (
            args
            or options
            or kwargs is not None
            or result_ttl is not None
            or keep_result is not None
            or group is not None
            # A class check, not isinstance(job, Job): Job is an ABC, whose
            # isinstance costs a Python-level call on every submit.
            or (cls not in plain_types and Job not in cls.__mro__)
            or type(job.retry) is not RetryPolicy  # type: ignore[union-attr]
        ):
            job = as_job(
                job,
                args,
                kwargs,
                options,
                (delay, depends_on, unique_key, key, result_ttl, keep_result, trigger_rule, group),
                self.plugins,
            )
            cls = type(job)
        if TYPE_CHECKING:  # a Job by the checks above (or a workflow); no call at run time
            assert isinstance(job, Job)
        marked = False
        if cls not in plain_types:
            if job.takes_results:  # a task's job, or a workflow: one check for both
                if isinstance(job, Workflow):
                    given = (unique_key, key, result_ttl, keep_result, trigger_rule, kwargs, group)
                    return submit_workflow(
                        job,
                        args,
                        options,
                        delay,
                        depends_on,
                        given,
                        submit=self.submit,
                        submitted=self.table.jobs,
                    )[-1]
                upstreams_of_results = job.result_upstreams(job_id_of)
                if upstreams_of_results:
                    marked = True
                    depends_on = [*depends_on, *upstreams_of_results]
            else:
                # `takes_results` is a class's (a ClassVar): asked once per job type.
                plain_types.add(cls)
        if upstreams is not None:
            if not depends_on:
                raise ValueError(f"trigger_rule={trigger_rule!r} needs depends_on")
            upstreams.waiting = len(set(depends_on))
        if result_ttl is not None:
            job.result_ttl = to_result_ttl(result_ttl)
            self.operations.need_reaper()
        if keep_result is not None:
            job.keep_result = to_keep_result(keep_result)
            self.operations.need_reaper()
        return self._accept(job, delay, depends_on, key, unique_key, rule, upstreams, marked)

    if TYPE_CHECKING:
        submit = _submit_with_options
    else:
        # At run time `submit` reads no option it was not given: CPython fills
        # each keyword-only default of a call from a dict, about 160
        # instructions each, and a plain ``submit(job)`` would pay for nine.
        def submit(self, /, job, *args, **options):
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

            `group` puts the job in a group (a tenant, a customer: a non-empty
            string of at most `MAX_GROUP_LENGTH` characters): ``Limits(group=N)``
            caps the jobs running per group, and groups take turns at the ready
            queue (docs/limits.md, "Tenant fairness").

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
            if (
                args
                or options
                or type(job) not in self._plain_types
                or type(job.retry) is not RetryPolicy
            ):
                return self._submit_with_options(job, *args, **options)
            return self._accept(job, 0.0, (), None, None, ALL_SUCCESS, None, False)

        submit.__signature__ = inspect.signature(_submit_with_options)

    def _accept(
        self,
        job: Job,
        delay: float,
        depends_on: Iterable[str],
        key: str | None,
        unique_key: str | None,
        rule: str,
        upstreams: Upstreams | None,
        marked: bool,
    ) -> str:
        """Record and queue `job`, whose options `submit` checked, or return
        the id of the job its `key` or `unique_key` names."""
        if self._stopping:
            raise SchedulerStoppedError(f"scheduler is stopping; {job.job_id} was not accepted")
        table = self.table
        if unique_key is not None:
            existing = table.holder_of(check_key(unique_key, "unique_key"))
            if existing is not None:
                return existing
        if key is not None:
            known = table.lookup(check_key(key, "key"))
            if known is not None:
                return known
        if job.status is not PENDING or job.attempts:
            raise SchedulerError(f"{job.job_id} was already submitted")
        if job.model not in self._executor_names:
            raise PluginError(f"{job!r}: {self.executors.unknown(job.model)}")
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
        extras = job_extras(job)  # None: the default queue, no group
        if (DEFAULT_QUEUE if extras is None else extras.queue) not in self._served:
            # Kept here, no other process would ever run it.
            self.backend.refused(job)
            raise ValueError(
                f"{job.job_id}: queue {job.queue!r} is not one this scheduler serves "
                f"({', '.join(sorted(self._served))}); add it to JobScheduler(queues=...)"
            )
        job_id = job.job_id
        jobs = table.jobs
        if job_id in jobs:
            self.backend.refused(job)
            raise SchedulerError(f"{job_id} was already submitted")
        deps = set(depends_on) if depends_on else None
        if deps:
            # No comprehension: one over `jobs` would make it a cell, built on every call.
            unknown = deps.difference(jobs)
            if unknown:
                self.backend.refused(job)
                # Requiring dependencies to exist first makes cycles impossible.
                raise UnknownJobError(f"{job_id}: unknown dependencies: {sorted(unknown)}")
        # Read, then called: ``self._now()`` would be a method lookup that
        # CPython cannot specialise for a function held by the instance.
        clock_now = self._now
        now = clock_now()
        job.seq = table.seq
        job.submitted_at = now
        # Share the float when there is no delay: 24 bytes per pending job.
        job.run_at = run_at = now + delay if delay else now
        # The key is computed before anything is recorded, for delayed and
        # blocked jobs too: a key() that raises refuses the submit and leaves
        # no trace, instead of failing later in a timer or a worker.
        entry = None
        heap = self._heap
        if heap is not None:
            try:
                entry = (*self._key(job), job)
            except BaseException:
                self.backend.refused(job)
                raise
        table.add(job, key, unique_key)
        if deps:
            graph = self.graph
            graph.link(job_id, deps, rule)
            held, reason = graph.wait(job_id, deps, upstreams)
            if reason is not None:
                self.finish(job, CANCELLED, error=reason)
            if held:
                return job_id
        if marked:
            job.resolve_results(self.result_for)
        queues = self.queues
        if run_at > now:
            queues.delay(job)
        else:
            if extras is not None and extras.group is not None:
                queues.push(job)  # to its group's turn (`GroupTurns`)
            elif heap is None:
                queues.ready.push(job)
            else:
                # A job without a group goes to the heap even once groups
                # take turns: the heap is the turns' `base`, for such jobs.
                heap.push_entry(entry)  # type: ignore[arg-type]
            if queues.waiting:
                queues.work.set()
        return job_id

    def result_for(self, upstream_id: str) -> Any:
        """An upstream's result for a dependent's `result_of` marker: None if
        it did not complete (a trigger rule released the dependent anyway);
        JSON only when the backend keeps jobs in a store."""
        job = self.table.find(upstream_id)
        if job is None:
            raise unavailable(
                upstream_id, "no such job here (purged, or past the scheduler's history_limit)"
            )
        if job.status is not COMPLETED:
            return None
        if not job.keep_result:
            raise unavailable(upstream_id, "its job keeps no result (keep_result=False)")
        # Past its time the result counts as gone, whether or not the reaper ran.
        ttl = self.operations.result_ttl_of(job)
        finished = job.finished_at
        if ttl is not None and finished is not None and finished + ttl <= self.clock.now():
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
        job = as_job(job, args, fn_kwargs, kwargs, scheduling, self.plugins, "submit_threadsafe")
        if isinstance(job, Workflow):
            raise TypeError("submit_threadsafe() takes a job: submit a workflow on the loop")
        self._loop.call_soon_threadsafe(self._submit_logged, job, options)
        return job.job_id

    def _submit_logged(self, job: Job, options: dict[str, Any]) -> None:
        try:
            self.submit(job, **options)
        except (SchedulerError, ValueError, TypeError):
            logger.exception("threadsafe submit failed", job_id=job.job_id, job_name=job.name)

    # ── jobs ──────────────────────────────────────────────────────────
    def cancel(self, job_id: str) -> bool:
        """Cancel a job. False if it is unknown or already finished (see
        `JobScheduler.cancel`)."""
        job = self.table.find(job_id)
        if job is None:
            return self.backend.cancel(job_id)
        if job.status.is_terminal:
            return False
        if job.status is RUNNING and self.workers.cancel(job):
            return True
        # Queued, or RUNNING but not started yet (a listener cancelled it on
        # its PENDING -> RUNNING transition): nothing is in flight to stop.
        self.finish(job, CANCELLED, error="cancelled")
        return True

    def cancel_job(self, job: Job, reason: str) -> None:
        """End the unfinished `job` CANCELLED with `reason`."""
        self.finish(job, CANCELLED, error=reason)

    def forget(self, job: Job) -> None:
        """Forget the unfinished `job`: a backend keeps it from now on."""
        job_id = job.job_id
        self.graph.forget(job_id)
        self.progress.forget(job_id)
        self.table.forget(job)

    def release(self, job: Job) -> None:
        """`job` may run: its `result_of` markers get their results, and it is queued."""
        if job.takes_results:
            job.resolve_results(self.result_for)
        self.queues.enqueue(job)

    def apply(self, settled: Settled) -> None:
        """Queue or cancel what the graph decided for some dependents."""
        for job, reason in settled:
            if reason is None:
                self.release(job)
            else:
                self.finish(job, CANCELLED, error=reason)

    async def join(self) -> None:
        """Wait until every submitted job has reached a terminal state.

        With a shared store: every job submitted by this process, wherever it runs.
        """
        await self.backend.join()

    def resolve(self, job_id: str) -> str:
        """The id under which the store keeps the job `submit` returned `job_id` for
        (see `JobScheduler.resolve`)."""
        return self.backend.resolve(job_id)

    async def flush(self) -> None:
        """Wait until every state change so far is committed to the store
        (see `JobScheduler.flush`)."""
        await self.backend.flush()

    def schedule_recurring(
        self,
        /,
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
        return self.backend.schedule_recurring(factory, interval, trigger, options)

    def cancel_recurring(self, schedule_id: str) -> bool:
        """Stop a recurring schedule; False if unknown or already cancelled."""
        if schedule_id in self.timers:
            return self.timers.cancel(schedule_id)
        return self.backend.cancel_recurring(schedule_id)

    # ── lifecycle ─────────────────────────────────────────────────────
    async def start(self) -> None:
        """Start the workers on the running loop (a durable store is opened and
        restored first)."""
        if self._stopping:
            raise SchedulerStoppedError("a stopped scheduler cannot be started again")
        if self._started:
            raise SchedulerError("already started")
        self._started = True
        self._loop = asyncio.get_running_loop()
        try:
            await self.backend.open()
        except BaseException:
            self._started = False
            raise
        self.started_at = self.clock.time()
        self.plugins.scheduler_started(self._subject)
        self.progress.bind_loop(self._loop)
        self.workers.start()
        self.queues.start()
        self.operations.start()
        self.timers.start(self._subject)

    async def stop(self, *, cancel_running: bool = False) -> None:
        """Graceful shutdown (see `JobScheduler.stop`)."""
        if self._stopped:
            return
        if cancel_running:
            self.workers.hand_back_running()
        if self._stopping:
            # Another stop() is under way (a signal handler's beside the context
            # manager's, say): wait for its teardown instead of running a second.
            await self._stop_done.wait()
            return
        self._stopping = True
        self.workers.stop()
        self.operations.stop()
        await self.backend.stop_claiming()
        self.timers.stop()
        self.queues.stop()
        await self.workers.join()
        self.operations.close()
        self._drop_waits_for_abandoned_calls()
        self.executors.shutdown()
        store_error = await self.backend.close() if self._started else None
        if store_error is None:
            store_error = self._failure
        self._stopped = True
        try:
            if self._started:
                self.plugins.scheduler_stopped(self._subject)
        finally:
            self._stop_done.set()
        if store_error is not None:
            raise store_error

    def _drop_waits_for_abandoned_calls(self) -> None:
        """At stop: a job whose timed-out call still runs ends as an attempt a
        shutdown tears down (its backend keeps it to run again); a retried
        job waiting for such a call stays PENDING, as queued jobs do."""
        for job_id in self.abandoned.drop_waits():
            job = self.table.find(job_id)
            if job is not None and job.status is RUNNING:
                self.backend.interrupted(job)
                self.finish(job, CANCELLED, error=SHUTDOWN)

    def fail(self, error: BaseException) -> None:
        """The backend cannot go on: `wait_failed` returns `error` and `stop`
        raises it. The first error is kept."""
        if self._failure is None:
            self._failure = error
            self._failed.set()

    async def wait_failed(self) -> BaseException:
        """Wait until the backend failed for good (`fail`); its error. A process
        that runs until told to stop (``jobsched worker``) waits for this too."""
        await self._failed.wait()
        assert self._failure is not None
        return self._failure

    def ask_stop(self) -> None:
        """Someone asked this scheduler's process to stop (an operator, through
        its store: ``jobsched workers stop ID``): `wait_stop_asked` returns.
        The backend has stopped claiming already; stopping is the process's."""
        self._stop_asked.set()

    async def wait_stop_asked(self) -> None:
        """Wait until `ask_stop` was called. ``jobsched worker`` waits for this
        and then stops warmly, as on SIGTERM; a program running its own
        `JobScheduler` may too (else the scheduler stays, drained)."""
        await self._stop_asked.wait()

    def transition(self, job: Job, new: JobStatus) -> None:
        """Move `job` to `new`, telling the listeners (`InvalidTransitionError`
        for an edge the state machine does not have)."""
        old = job.status
        if new not in old.allowed_next:
            raise InvalidTransitionError(f"{job.job_id}: {old.value} -> {new.value}")
        job.status = new
        if self.listeners.every:
            self.listeners.notify(job, old, new)

    def finish(self, job: Job, status: JobStatus, *, error: str | None = None) -> None:
        """End the unfinished `job` with the terminal `status`, then settle its dependents."""
        # Iterative, so a long chain of dependents cannot hit the recursion
        # limit; the work list exists only once a job has dependents to settle.
        work: list[tuple[Job, str]] | None = None
        listeners = self.listeners
        graph = self.graph
        table = self.table
        on_finished = self._on_finished
        while True:
            old = job.status
            if not old.is_terminal:
                if status not in old.allowed_next:
                    raise InvalidTransitionError(f"{job.job_id}: {old.value} -> {status.value}")
                if error is not None:
                    job.last_error = error
                job.finished_at = self.clock.now()
                job.status = status
                if listeners.every:
                    # `notify` inline: a job ends once, and an observer that
                    # listens only to ends (metrics) saves a call per job.
                    for listener, wanted in listeners.pairs:
                        if wanted is None or status in wanted:
                            try:
                                listener(job, old, status)
                            except Exception:  # a bad listener must not kill a worker
                                logger.exception(
                                    "listener failed", job_id=job.job_id, listener=repr(listener)
                                )
                job_id = job.job_id
                if graph.blocked or graph.waiters or on_finished is not None:
                    settled = graph.ended(job_id, status, held=on_finished is not None)
                    if on_finished is not None:
                        # Durable before visible: dependents wait for release_committed().
                        on_finished(job_id, status)
                    elif settled:
                        for dependent, reason in settled:
                            if reason is None:
                                self.release(dependent)
                            else:
                                if work is None:
                                    work = []
                                work.append((dependent, reason))
                # Bound memory: a recurring job would otherwise grow the table
                # forever. One in, at most one out.
                evicted = table.ended(job_id)
                if evicted is not None and (graph.upstreams or graph.downstream):
                    graph.forget(evicted)
                if evicted is not None and self.progress.reports:
                    self.progress.forget(evicted)
            if not work:
                return
            job, error = work.pop()
            status = CANCELLED
