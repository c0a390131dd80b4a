"""The jobsched hook specifications: the contract between jobsched and its plugins.

A plugin is a module (or any object) with functions marked ``@hookimpl`` whose
names are the specs below. Publish it with an entry point in the ``jobsched``
group, naming the module::

    [project.entry-points.jobsched]
    fair-share = "my_package.fair_share"

Registration hooks are called once when a scheduler is composed, never per
job. Each receives a ``register(name, factory)`` callable: call it once for each
thing the plugin adds. Two plugins registering the same name in the same kind
is an error that names both. Listener hooks (and what `jobsched_submit_hook` returns)
are compiled into plain callables when a scheduler is composed: a hook no
plugin implements costs the per-job path nothing. `jobsched_register_commands`
adds subcommands to the ``jobsched`` command line.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

import pluggy

if TYPE_CHECKING:
    from ._job import Job
    from ._status import JobStatus

hookspec = pluggy.HookspecMarker("jobsched")

#: The callable a registration hook receives: ``register(name, factory)``.
Register = Callable[[str, Any], None]

#: A command's handler: ``handler(args)`` with the parsed `argparse.Namespace`,
#: returning the exit code (None means 0).
CommandHandler = Callable[[argparse.Namespace], "int | None"]


class SchedulerView(Protocol):
    """The scheduler a lifecycle or misfire hook receives: a `jobsched.JobScheduler`.

    The whole scheduler is passed; typed by what hooks use of it, so the hook
    specifications import nothing above the contracts.
    """

    @property
    def num_workers(self) -> int:
        """How many jobs it runs at once."""

    def add_listener(
        self,
        listener: Callable[[Job, JobStatus, JobStatus], None],
        *,
        statuses: Iterable[JobStatus] | None = None,
    ) -> None:
        """Call ``listener(job, old, new)`` after each transition (into `statuses` only)."""


class ScheduleView(Protocol):
    """The schedule `jobsched_schedule_misfired` receives: a `jobsched.RecurringSchedule`."""

    @property
    def schedule_id(self) -> str:
        """Its id, unique in its scheduler."""

    @property
    def name(self) -> str | None:
        """The name it was given, if any."""


class CommandLine(Protocol):
    """The ``jobsched`` command line, as `jobsched_register_commands` receives it."""

    @property
    def plugins(self) -> Any:
        """The `jobsched.PluginManager` of this invocation, already loaded.

        Pass it on (``JobScheduler(plugins=cli.plugins)``) rather than loading
        the plugins a second time.
        """

    def add_command(
        self,
        name: str,
        *,
        help: str,
        handler: CommandHandler,
        description: str | None = None,
    ) -> argparse.ArgumentParser:
        """Add ``jobsched NAME``; return its parser, to add arguments to.

        `name` is lowercase letters, digits and dashes, and not a command
        jobsched or another plugin already has (else `jobsched.PluginError`).
        `help` is the line ``jobsched --help`` shows (followed by the
        plugin's name), `description` the text of ``jobsched NAME --help``
        (default: `help`). `handler(args)` runs the command; its return value
        is the exit code (None means 0). ``parser.error(message)`` and the
        errors jobsched reports as bad input (`jobsched.PluginError`,
        `jobsched.StoreError`, ...) become one ``jobsched: error:`` line and
        exit code 2; any other exception is a crash (its traceback, exit code
        3). The parser may have subcommands of its own (``add_subparsers``).
        """
        ...


@hookspec
def jobsched_register_strategies(register: Register) -> None:
    """Register scheduling strategies by name.

    `factory` is called with no arguments when a scheduler is composed with
    ``strategy=name`` and must return a `SchedulingStrategy`: an object whose
    ``key(job)`` returns a sort key (smallest runs first). The key is computed
    once, when the job becomes runnable, so it must not depend on the current
    time or on other jobs; end it with ``job.seq`` to break ties in submit order.
    Give every key of a strategy the same length: the kernel flattens the key
    into its heap entry, ``(*key, seq, job)``. A strategy may also have
    ``ready_queue()`` return a fresh `ReadyQueue` that pops jobs in exactly
    the order of its key (the ``fifo`` and ``priority`` strategies return
    deques, cheaper than the heap); None, the default, keeps the heap.

    Example::

        class ShortestFirst(SchedulingStrategy):
            def key(self, job):
                return (job.estimated_seconds, job.seq)

        @hookimpl
        def jobsched_register_strategies(register):
            register("shortest-first", ShortestFirst)
    """


@hookspec
def jobsched_register_executors(register: Register) -> None:
    """Register executors by name: the places where jobs run.

    A job runs on the executor named by its ``model`` (``"async"``,
    ``"thread"``, ``"process"`` or any registered name). `factory` is called
    once per scheduler as ``factory(workers=N)`` (N is the scheduler's worker
    count) and returns an object with:

    - ``invoke(job) -> Awaitable``: start one attempt and return an awaitable of
      its result. The scheduler awaits it; on timeout or cancellation the
      awaitable is cancelled (``asyncio.CancelledError`` is raised in it), and an
      executor that can stop the work should do so there.
    - ``shutdown() -> None``: release pools; must not block the event loop.

    Example::

        class InlineExecutor:
            def __init__(self, workers):
                pass
            async def invoke(self, job):
                return job.run_sync()
            def shutdown(self):
                pass

        @hookimpl
        def jobsched_register_executors(register):
            register("inline", InlineExecutor)
    """


@hookspec
def jobsched_register_retry_policies(register: Register) -> None:
    """Register retry policies by name.

    `factory(**options)` returns a policy: an object with an integer
    ``max_retries`` and ``delay(attempt, rng) -> float``, the seconds to wait
    after the 1-based `attempt` failed (`rng` is the scheduler's
    ``random.Random``). Job files select one as
    ``retry = { policy = "name", ...options }``.

    Example::

        @attrs.frozen
        class Linear:
            max_retries: int = 3
            step: float = 1.0
            def delay(self, attempt, rng):
                return self.step * attempt

        @hookimpl
        def jobsched_register_retry_policies(register):
            register("linear", Linear)
    """


@hookspec
def jobsched_register_job_types(register: Register) -> None:
    """Register job types by name, so a job can be described as data.

    `factory` is a `Job` subclass. Its arguments (attrs fields or the
    parameters of its ``__init__``) are what a job file's ``args`` fill in.

    Example::

        @hookimpl
        def jobsched_register_job_types(register):
            register("resize-image", ResizeImageJob)
    """


@hookspec
def jobsched_register_triggers(register: Register) -> None:
    """Register triggers by name: rules that compute when a recurring job fires.

    `factory(value, **options)` returns a trigger (see `jobsched.contracts.Trigger`): an
    object with a `timebase` (``"monotonic"`` or ``"wall"``),
    ``first_fire(now)`` and ``next_fire(previous)``, each returning a time in
    that timebase or None when it never fires again. The mapping
    ``{"sunrise": "Berlin", "offset": 600}`` (from
    ``schedule_recurring(trigger=...)`` or a job file's ``trigger = {...}``)
    calls ``factory("Berlin", offset=600)``. Built in: ``interval``, ``cron``
    and ``date`` (docs/triggers.md).

    Example::

        @hookimpl
        def jobsched_register_triggers(register):
            register("sunrise", SunriseTrigger)
    """


@hookspec
def jobsched_schedule_misfired(
    scheduler: SchedulerView,
    schedule: ScheduleView,
    fire_time: float,
    lateness: float,
    fires: int,
) -> None:
    """Called when a recurring schedule skips fires that came too late.

    A fire is skipped when it is later than the schedule's
    ``misfire_grace_time``, or when several fires were missed at once under
    ``coalesce="none"``. `fire_time` is the latest skipped fire in the
    trigger's timebase (epoch seconds for cron and date triggers, monotonic
    seconds for intervals), `lateness` how late it was in seconds, `fires` how
    many fires were skipped. Called on the loop thread; rare, so it goes
    through pluggy.

    Example::

        @hookimpl
        def jobsched_schedule_misfired(schedule, lateness):
            alerts.send(f"{schedule.name} skipped a run {lateness:.0f}s late")
    """


@hookspec
def jobsched_register_stores(register: Register) -> None:
    """Register job stores by URL scheme (``"sqlite"``, ``"postgresql"``, ...).

    `factory(url)` returns a store (see `jobsched.store.Store`, whose docstring is
    the contract): ``JobScheduler(store="redis://host/0")`` resolves the
    scheme once and calls the factory with the whole URL. A store keeps jobs
    as data (`jobsched.store.JobRow`: registered type name, JSON arguments and
    options, state) and never pickles; ``open`` returns a `jobsched.store.Snapshot`
    to restore, ``write`` commits one batch in one transaction, and every
    failure is a `jobsched.StoreError` that names the store and leaves its
    data as it was. See docs/durability.md.

    Example::

        @hookimpl
        def jobsched_register_stores(register):
            register("redis", RedisStore)
    """


@hookspec
def jobsched_register_commands(cli: CommandLine) -> None:
    """Add subcommands to the ``jobsched`` command line, as llm and datasette do.

    Called once per ``jobsched`` invocation, before the arguments are parsed
    (so ``jobsched --help`` lists the plugin's commands), with a `CommandLine`:
    ``cli.add_command(name, help=..., handler=...)`` returns an
    `argparse.ArgumentParser` for the command's arguments, and
    ``cli.plugins`` is the invocation's plugin manager. A plugin whose hook
    raises is reported like any broken plugin: ``jobsched plugins list`` shows
    it as failed with the error, nothing it registers is used, and running a
    command it added says so with exit code 2; every other command works.

    Example::

        import argparse, asyncio
        from jobsched import JobScheduler, hookimpl

        @hookimpl
        def jobsched_register_commands(cli):
            parser = cli.add_command(
                "drain", help="run the jobs of a store until none is left", handler=drain
            )
            parser.add_argument("--store", required=True, metavar="URL")
            parser.set_defaults(plugins=cli.plugins)

        def drain(args: argparse.Namespace) -> int:
            async def main():
                scheduler = JobScheduler(store=args.store, plugins=args.plugins)
                await scheduler.start()
                await scheduler.join()
                await scheduler.stop()
            asyncio.run(main())
            return 0
    """


@hookspec
def jobsched_job_transition(job: Job, old: JobStatus, new: JobStatus) -> None:
    """Called after `job` moved from status `old` to `new`, on the loop thread.

    It runs on the scheduler's hot path: keep it fast and never block. An
    exception is logged and does not reach the scheduler or other listeners.
    Implement only the arguments you need.

    An implementation with a ``statuses`` attribute (a non-empty collection
    of `JobStatus` members) is called only for transitions into those
    statuses; the others cost it nothing, not even a call. Without one it
    hears every transition. A bad ``statuses`` makes composing a scheduler
    raise `PluginError` naming the plugin. ``scheduler.add_listener(fn,
    statuses=...)`` is the same for a listener added at run time.

    Example::

        @hookimpl
        def jobsched_job_transition(job, new):
            alerts.send(f"{job.name} failed: {job.last_error}")

        jobsched_job_transition.statuses = (JobStatus.FAILED,)
    """


@hookspec
def jobsched_job_progress(job: Job, done: float, total: float | None, message: str | None) -> None:
    """Called when a running `job` reported progress with `jobsched.progress`.

    On the scheduler's loop thread, whatever executor runs the job (a thread
    or process job's report crosses to the loop first). Throttled: at most 4
    calls a second per job, and the job's latest report always arrives
    (within 0.25 s, or when its attempt ends). Compiled into a plain call
    like `jobsched_job_transition`: when no plugin implements it, progress
    costs no hook call. Keep it fast; an exception is logged and dropped.
    Implement only the arguments you need.

    Example::

        @hookimpl
        def jobsched_job_progress(job, done, total):
            if total:
                gauge.labels(job.name).set(done / total)
    """


@hookspec
def jobsched_submit_hook() -> Callable[[Job], None] | None:
    """Return what ``submit`` should call for each job it accepts, or None.

    Called once when a `JobScheduler` or a `jobsched.Client` is composed; the
    callables returned are then called, as plain calls, for each job its
    ``submit`` accepts, before the job is queued or stored (on the
    scheduler's loop thread; for a `Client`, with the copy that will be
    stored). A plugin with nothing to do in this process returns None, and
    the submit path pays nothing for it. The callable may set what a store
    keeps of the job: ``job.traceparent``, the W3C trace context the job's
    attempts join (the ``otel`` plugin sets it when the submit runs inside a
    span). It must not change the job's arguments or execution state, and
    must be fast. An exception refuses the submit (it reaches the caller).

    Example::

        @hookimpl
        def jobsched_submit_hook():
            if not tracing_configured():
                return None

            def join_trace(job):
                job.traceparent = current_traceparent()

            return join_trace
    """


@hookspec
def jobsched_submit_batch_hook() -> Callable[[], AbstractContextManager[None]] | None:
    """Return what ``submit_many`` should enter around a batch, or None.

    Asked once, like `jobsched_submit_hook`, when a `JobScheduler` or a
    `jobsched.Client` is composed. ``submit_many`` calls the returned
    callable and enters the context manager it gives around the whole batch:
    every job's `jobsched_submit_hook` call happens inside it (for a
    `Client`, the store's write too). A plugin with nothing to do returns
    None, and ``submit_many`` pays nothing for it. The ``otel`` plugin
    records a batch's ``send`` span this way.

    Example::

        @hookimpl
        def jobsched_submit_batch_hook():
            if not tracing_configured():
                return None
            return open_batch_span  # a contextlib.contextmanager
    """


@hookspec
def jobsched_scheduler_started(scheduler: SchedulerView) -> None:
    """Called once when `scheduler` starts, before any job runs.

    A plugin may call ``scheduler.add_listener(fn)`` here, which is how a
    listener that is switched off can cost nothing at all.

    Example::

        @hookimpl
        def jobsched_scheduler_started(scheduler):
            metrics.gauge("jobsched.workers", scheduler.num_workers)
    """


@hookspec
def jobsched_scheduler_stopped(scheduler: SchedulerView) -> None:
    """Called once when `scheduler` has stopped and its workers have exited.

    Example::

        @hookimpl
        def jobsched_scheduler_stopped(scheduler):
            metrics.flush()
    """
