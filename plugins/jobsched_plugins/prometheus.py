"""The ``prometheus`` plugin: Prometheus metrics for every scheduler in the process.

Installed with ``pip install 'jobsched[prometheus]'``. Without prometheus-client
the plugin does not load, and ``jobsched plugins list`` shows it as failed with
the install line; everything else works.

Counting is opt-in: installed, the plugin does nothing until metrics are asked
for, by `enable`, `start_http_server` or `make_asgi_app` (``jobsched worker
--metrics-port`` calls `start_http_server`). Until then a scheduler start
imports nothing and adds no listener, so the extra costs nothing where it is
merely installed. Once enabled, every running scheduler and every scheduler
started later is counted.

A counted scheduler gets a listener (added with ``scheduler.add_listener(...,
statuses=STATUSES)``, called once per attempt, at its end) that only records
what happened: a completed attempt appends the job to a list, any other end
appends a tuple of the figures that will change before the job's next
attempt. Nothing is counted on the loop thread per attempt: the collector
folds the records into the counts when Prometheus scrapes (or, if nobody
scrapes, the scheduler's loop folds them once a second when many have piled
up), then reports every counted scheduler with a ``scheduler`` label: ``"1"``
for the first scheduler counted in the process, ``"2"`` for the next. The
metric names are API; docs/observability.md lists them, with the names kept
for one more release as deprecated aliases.

Expose them with `start_http_server` (what ``jobsched worker --metrics-port``
does), `make_asgi_app` (mount it in an ASGI app), or call `enable` and read
prometheus-client's ``REGISTRY`` with any exporter. `store_metrics_text`
renders a store's own counts (``jobsched status --store URL --metrics``).
"""

from __future__ import annotations

import asyncio
import importlib.util
import itertools
import platform
import threading
import weakref
from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping
from heapq import heapify, heappop
from typing import TYPE_CHECKING, Any

import jobsched
from jobsched import (
    FunctionJob,
    Job,
    JobScheduler,
    JobStatus,
    RecurringSchedule,
    hookimpl,
    job_type_of,
)

if importlib.util.find_spec("prometheus_client") is None:
    # Reported by `jobsched plugins list` as this plugin's error.
    raise ImportError(
        "the prometheus plugin needs prometheus-client: pip install 'jobsched[prometheus]' "
        "(or disable it: JOBSCHED_DISABLE_PLUGINS=prometheus)"
    )

if TYPE_CHECKING:
    from prometheus_client.registry import CollectorRegistry

__all__ = [
    "BUCKETS",
    "FOLD_AT",
    "MAX_ERROR_TYPES",
    "OUTCOMES",
    "STATUSES",
    "WAIT_BUCKETS",
    "SchedulerMetrics",
    "TypeCounts",
    "disable",
    "enable",
    "make_asgi_app",
    "metrics_for",
    "start_http_server",
    "store_metrics_text",
]

#: Buckets (seconds) of the attempt-duration histogram.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
#: Buckets (seconds) of the queue-wait histogram: a backlog is measured in
#: minutes, so they reach an hour.
WAIT_BUCKETS = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
    300.0,
    600.0,
    1200.0,
    1800.0,
    3600.0,
)
_BOUNDS = (*BUCKETS, float("inf"))
_WAIT_BOUNDS = (*WAIT_BUCKETS, float("inf"))
#: The statuses of the ``jobsched_unfinished_jobs`` gauge (`JobScheduler.job_counts`).
GAUGE_STATUSES = ("pending", "delayed", "blocked", "retry_wait", "running")
#: Terminal statuses (``jobsched_jobs_total``) and attempt outcomes
#: (``jobsched_attempts_total``), in the order of `TypeCounts.ended`.
OUTCOMES = ("completed", "failed", "timed_out", "cancelled")
_FAILED, _TIMED_OUT, _CANCELLED = 1, 2, 3  # indexes into OUTCOMES
_WAITING = -1  # a record's outcome: cancelled before it was ever taken
#: The most distinct ``error_type`` values a scheduler reports; later
#: exception type names are counted as ``"other"``.
MAX_ERROR_TYPES = 20
#: Records a scheduler's loop lets pile up before folding them itself (checked
#: once a second), for a process whose metrics nobody scrapes.
FOLD_AT = 16_384
_FOLD_EVERY = 1.0  # seconds between those checks

RUNNING = JobStatus.RUNNING
RETRY_WAIT = JobStatus.RETRY_WAIT
COMPLETED = JobStatus.COMPLETED
PENDING = JobStatus.PENDING
#: The target statuses the listener is added for: an attempt's end and a
#: cancel, not an attempt's start (the kernel then skips that call).
#: COMPLETED first: the kernel tests ``status in STATUSES`` per job end.
STATUSES = (
    COMPLETED,
    RETRY_WAIT,
    JobStatus.FAILED,
    JobStatus.TIMED_OUT,
    JobStatus.CANCELLED,
)
_OUTCOME_INDEX = {status: OUTCOMES.index(status.value) for status in STATUSES if status.is_terminal}

_labels = itertools.count(1)
_metrics: weakref.WeakKeyDictionary[JobScheduler, SchedulerMetrics] = weakref.WeakKeyDictionary()
_registered_lock = threading.Lock()
# The registries the collector is in. Weak, not ids: a collected registry's
# id is reused by the next one, which would then never get the collector.
_registered: weakref.WeakSet[CollectorRegistry] = weakref.WeakSet()
# `enable` and the scheduler hooks run on different threads: this lock makes
# "not enabled yet, remember the scheduler" and "enable, take the remembered
# ones" exclusive, so no scheduler is missed or counted twice.
_state_lock = threading.Lock()
_enabled = False
# Running schedulers not counted (metrics not enabled yet), with their loop:
# `enable` attaches to them there. Weak: the plugin keeps no scheduler alive.
_uncounted: weakref.WeakKeyDictionary[JobScheduler, asyncio.AbstractEventLoop] = (
    weakref.WeakKeyDictionary()
)


class TypeCounts:
    """One job type's counts in one scheduler, as folded from the listener's records.

    ``ended[i]`` counts attempts that ended the job with `OUTCOMES` status i
    (one attempt and one job each), ``retried[i]`` attempts that failed or
    timed out and were retried, ``cancelled_waiting`` jobs cancelled with no
    attempt running, ``errors`` failed attempts by ``error_type``. The
    histograms are per-bucket counts over `BUCKETS` (duration) and
    `WAIT_BUCKETS` (queue wait), +Inf last, plus the sum of the
    observations; the scrape makes them cumulative.
    """

    __slots__ = (
        "cancelled_waiting",
        "duration_buckets",
        "duration_sum",
        "ended",
        "errors",
        "name",
        "retried",
        "wait_buckets",
        "wait_sum",
    )

    def __init__(self, name: str) -> None:
        self.name = name
        self.ended = [0] * len(OUTCOMES)
        self.retried = [0] * len(OUTCOMES)
        self.cancelled_waiting = 0
        self.errors: dict[str, int] = {}
        self.duration_buckets = [0] * len(_BOUNDS)
        self.duration_sum = 0.0
        self.wait_buckets = [0] * len(_WAIT_BOUNDS)
        self.wait_sum = 0.0

    def jobs(self) -> list[int]:
        """Jobs that reached each `OUTCOMES` status."""
        jobs = list(self.ended)
        jobs[_CANCELLED] += self.cancelled_waiting
        return jobs

    def attempts(self) -> list[int]:
        """Attempts that ended with each `OUTCOMES` outcome."""
        return [a + b for a, b in zip(self.ended, self.retried, strict=True)]

    def observe(self, due: float, started: float | None, ended: float | None) -> None:
        """One attempt's queue wait and run time (no run time if it never started)."""
        if started is None or ended is None:
            # Taken, then cancelled before its attempt started: it waited
            # until the cancel, and there is no run time to observe.
            wait = (ended if ended is not None else due) - due
        else:
            wait = started - due
            ran = ended - started
            self.duration_buckets[bisect_left(_BOUNDS, ran) if ran > BUCKETS[0] else 0] += 1
            if ran > 0.0:
                self.duration_sum += ran
        # A clock read just before run_at is no wait: the sum never goes down.
        self.wait_buckets[bisect_left(_WAIT_BOUNDS, wait) if wait > WAIT_BUCKETS[0] else 0] += 1
        if wait > 0.0:
            self.wait_sum += wait


class SchedulerMetrics:
    """One counted scheduler's metrics: the listener's records and what they fold into.

    The listener runs on the scheduler's loop thread and only appends. `fold`
    (a scrape, on the HTTP server's thread, or the loop's own check) takes
    what was appended so far, each list in two C calls (a copy, then a
    ``del`` of that many from the front, so an append in between is kept for
    the next fold), and counts it under a lock, so two folds never take the
    same records.
    """

    def __init__(self, scheduler: JobScheduler, label: str) -> None:
        self.label = label
        self._scheduler = weakref.ref(scheduler)  # the collector must not keep it alive
        registered = scheduler.plugins.registry["job_types"].values()
        self._registered = {r.factory: r.name for r in registered if isinstance(r.factory, type)}
        self._by_key: dict[Any, TypeCounts] = {}  # job class or function -> its counts
        self._by_name: dict[str, TypeCounts] = {}
        self._error_names: dict[str, str] = {}  # exception type name -> its error_type
        self.misfires: dict[str, int] = {}
        #: Completed jobs not folded yet: nothing about a completed job changes.
        self._completed: list[Job] = []
        #: Other ends not folded yet, as (job, outcome index, retried, due,
        #: started, ended, error): a retried job's figures change at its next attempt.
        self._other: list[tuple[Any, ...]] = []
        self._fold_lock = threading.Lock()
        self._now = scheduler.kernel.clock.now
        self._timer: asyncio.TimerHandle | None = None
        #: The transition listener (``listener(job, old, new)``) that records
        #: attempts' ends, for transitions into `STATUSES` only.
        self.on_transition = self._listener()

    @property
    def scheduler(self) -> JobScheduler | None:
        return self._scheduler()

    def types(self) -> list[TypeCounts]:
        """Every job type counted so far, records folded first (safe from any thread)."""
        self.fold()
        return list(self._by_name.copy().values())

    def pending_records(self) -> int:
        """Attempt ends recorded and not folded into the counts yet."""
        return len(self._completed) + len(self._other)

    def _listener(self) -> Callable[[Job, JobStatus, JobStatus], None]:
        """The listener, a closure over two locals: it runs once per attempt.

        A completed attempt (nearly every one) costs one identity comparison
        and one ``list.append``; the figures are read when the record is
        folded, as a completed job's never change again.
        """
        append = self._completed.append
        record = self._record
        completed = COMPLETED

        def on_transition(job: Job, old: JobStatus, new: JobStatus) -> None:
            if new is completed:
                append(job)
            else:
                record(job, old, new)

        return on_transition

    def _record(self, job: Job, old: JobStatus, new: JobStatus) -> None:
        """Record an end that is not a completion, with the figures as they are now."""
        if old is not RUNNING:  # cancelled while it waited: no attempt ended
            self._other.append((job, _WAITING, False, 0.0, None, None, None))
            return
        if new is RETRY_WAIT:
            outcome = _TIMED_OUT if job.last_failure_timed_out else _FAILED
            previous = job.previous_run_at  # run_at is the retry's time by now
            due = job.run_at if previous is None else previous
            ended: float | None = self._now()
            retried = True
        else:  # failed, timed out or cancelled: the attempt's outcome is the job's
            outcome = _OUTCOME_INDEX[new]
            due = job.run_at
            ended = job.finished_at
            if ended is None:
                ended = self._now()
            retried = False
        # Every failed attempt gets an error_type ("other" when it has no error text).
        error = (job.last_error or "") if outcome == _FAILED else None
        self._other.append((job, outcome, retried, due, job.started_at, ended, error))

    def fold(self) -> None:
        """Count the records appended so far (from any thread)."""
        with self._fold_lock:
            completed = self._completed
            done = completed[:]
            del completed[: len(done)]
            other = self._other
            ends = other[:]
            del other[: len(ends)]
            counts_for = self._counts_for
            last: Any = None
            counts: TypeCounts | None = None
            for job in done:
                key = job.__class__
                if key is FunctionJob:
                    key = job.fn  # type: ignore[attr-defined]
                if key is not last or counts is None:  # runs of one type are common
                    counts = counts_for(job, key)
                    last = key
                counts.ended[0] += 1
                counts.observe(job.run_at, job.started_at, job.finished_at)
            for job, outcome, retried, due, started, ended, error in ends:
                key = job.__class__
                if key is FunctionJob:
                    key = job.fn
                counts = counts_for(job, key)
                if outcome == _WAITING:
                    counts.cancelled_waiting += 1
                    continue
                if retried:
                    counts.retried[outcome] += 1
                else:
                    counts.ended[outcome] += 1
                if error is not None:
                    name = self._error_type(error)
                    counts.errors[name] = counts.errors.get(name, 0) + 1
                counts.observe(due, started, ended)

    def _counts_for(self, job: Job, key: Any) -> TypeCounts:
        try:
            return self._by_key[key]
        except KeyError:
            counts = self._counts_named(job_type_of(job, self._registered))
            self._by_key[key] = counts
            return counts
        except TypeError:  # an unhashable callable: its name is worked out each time
            return self._counts_named(job_type_of(job, self._registered))

    def _counts_named(self, name: str) -> TypeCounts:
        counts = self._by_name.get(name)
        if counts is None:  # two classes or functions may share a name: one series
            counts = self._by_name[name] = TypeCounts(name)
        return counts

    def _error_type(self, error: str) -> str:
        """The ``error_type`` of a failed attempt: its exception's type name, capped.

        The kernel writes an attempt's error as ``"TypeName: message"`` (or
        the bare type name). Text that names no exception type, and any
        name after the first `MAX_ERROR_TYPES`, is ``"other"``: a label
        value per distinct message would grow without bound.
        """
        head = error.partition(":")[0]
        found = self._error_names.get(head)
        if found is None:
            named = all(part.isidentifier() for part in head.split("."))
            if not named or len(self._error_names) >= MAX_ERROR_TYPES:
                return "other"  # not remembered: the table never grows past the cap
            found = self._error_names[head] = head
        return found

    def misfired(self, schedule: RecurringSchedule, fires: int) -> None:
        name = schedule.name or schedule.schedule_id
        self.misfires[name] = self.misfires.get(name, 0) + fires

    # ── folding when nobody scrapes ───────────────────────────────────
    def start_checks(self, loop: asyncio.AbstractEventLoop) -> None:
        """Check once a second on `loop` whether `FOLD_AT` records piled up."""
        if self._timer is None:
            self._timer = loop.call_later(_FOLD_EVERY, self._check, loop)

    def stop_checks(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.fold()  # a stopped scheduler holds no job in the records

    def _check(self, loop: asyncio.AbstractEventLoop) -> None:
        if self.pending_records() >= FOLD_AT:
            self.fold()
        self._timer = loop.call_later(_FOLD_EVERY, self._check, loop)

    # ── read at a scrape ──────────────────────────────────────────────
    def oldest_due_age(self, scheduler: JobScheduler) -> float:
        """Seconds the oldest job that is due and not started has waited (0: none).

        A job is due once its run time came (submitted, delay or retry
        backoff over) and nothing it depends on is unfinished; it waits in
        the ready queue, or parked by a limit, or for the queue's pause.
        Read from `JobScheduler.jobs` at a scrape, so it costs the scrape a
        pass over the jobs this scheduler holds, and the loop nothing.
        """
        now = self._now()
        candidates = [
            (job.run_at, job.job_id)
            for job in scheduler.jobs()
            if (job.status is PENDING or job.status is RETRY_WAIT) and job.run_at <= now
        ]
        heapify(candidates)  # oldest first, popped only past the blocked ones
        while candidates:
            run_at, job_id = heappop(candidates)
            try:
                blocked = scheduler.waiting_on(job_id)
            except Exception:  # gone since the listing (purged): not waiting any more
                continue
            if not blocked:
                return now - run_at
        return 0.0


def metrics_for(scheduler: JobScheduler) -> SchedulerMetrics | None:
    """A scheduler's metrics, or None while it is not counted (`enable` not called yet)."""
    return _metrics.get(scheduler)


def enable(registry: CollectorRegistry | None = None) -> CollectorRegistry:
    """Count every scheduler from now on; returns the registry the metrics are in.

    Schedulers running now are counted from their next transition (attached
    on their own event loop), and schedulers started later from their start.
    `registry` defaults to prometheus-client's default registry. Calling it
    again, from any thread, is harmless; `start_http_server` and
    `make_asgi_app` call it.
    """
    global _enabled
    registry = _ensure_registered(registry)
    with _state_lock:
        _enabled = True
        running = list(_uncounted.items())
        _uncounted.clear()
    for scheduler, loop in running:
        _attach_on(loop, scheduler)
    return registry


def disable() -> None:
    """Stop counting schedulers started from now on (those counted go on counting).

    For tests, and for an application that wants a scheduler left out.
    """
    global _enabled
    with _state_lock:
        _enabled = False


def _attach_on(loop: asyncio.AbstractEventLoop, scheduler: JobScheduler) -> None:
    """Start counting `scheduler` on its loop's thread, where its listeners run."""
    try:
        current = asyncio.get_running_loop()
    except RuntimeError:
        current = None
    if current is loop:
        _attach(scheduler)
    elif not loop.is_closed():
        loop.call_soon_threadsafe(_attach, scheduler)


def _attach(scheduler: JobScheduler) -> None:
    metrics = _metrics.get(scheduler)
    if metrics is None:
        metrics = SchedulerMetrics(scheduler, str(next(_labels)))
        _metrics[scheduler] = metrics
        scheduler.add_listener(metrics.on_transition, statuses=STATUSES)
    metrics.start_checks(asyncio.get_running_loop())


@hookimpl
def jobsched_scheduler_started(scheduler: JobScheduler) -> None:
    with _state_lock:
        if not _enabled:
            # Nothing imported, no listener: remembered in case `enable` comes.
            _uncounted[scheduler] = asyncio.get_running_loop()
            return
    _attach(scheduler)


@hookimpl
def jobsched_scheduler_stopped(scheduler: JobScheduler) -> None:
    with _state_lock:
        _uncounted.pop(scheduler, None)
    metrics = _metrics.get(scheduler)
    if metrics is not None:
        metrics.stop_checks()


@hookimpl
def jobsched_schedule_misfired(
    scheduler: JobScheduler, schedule: RecurringSchedule, fires: int
) -> None:
    metrics = _metrics.get(scheduler)
    if metrics is not None:
        metrics.misfired(schedule, fires)


# ── the collector ──────────────────────────────────────────────────────
def _limit_labels(label: str) -> tuple[str, str]:
    """``"executor:async"`` -> ``("executor", "async")``: the limiter's key as kind, name."""
    kind, _, name = label.partition(":")
    return kind, name


class _Collector:
    """At a scrape: folds every live scheduler's records, then reports its metrics."""

    def describe(self) -> list[Any]:
        return []  # no fixed names to check at registration: all are ours

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            HistogramMetricFamily,
        )

        build = GaugeMetricFamily(
            "jobsched_build_info",
            "Always 1: the jobsched and Python versions of this process",
            labels=["version", "python"],
        )
        build.add_metric([jobsched.__version__, platform.python_version()], 1)
        jobs = CounterMetricFamily(
            "jobsched_jobs",
            "Jobs that reached a terminal status",
            labels=["scheduler", "type", "status"],
        )
        attempts = CounterMetricFamily(
            "jobsched_attempts",
            "Attempts that ended, by outcome (completed, failed, timed_out, cancelled) "
            "and, for failed ones, the exception's type",
            labels=["scheduler", "type", "outcome", "error_type"],
        )
        duration = HistogramMetricFamily(
            "jobsched_attempt_duration_seconds",
            "How long attempts ran",
            labels=["scheduler", "type"],
        )
        old_duration = HistogramMetricFamily(
            "jobsched_job_duration_seconds",
            "Deprecated: jobsched_attempt_duration_seconds (how long attempts ran)",
            labels=["scheduler", "type"],
        )
        wait = HistogramMetricFamily(
            "jobsched_queue_wait_seconds",
            "From when a job was due (submitted, delay or backoff over, or claimed) to its start",
            labels=["scheduler", "type"],
        )
        oldest = GaugeMetricFamily(
            "jobsched_oldest_due_age_seconds",
            "How long the oldest job that is due and not started has waited (0: none)",
            labels=["scheduler"],
        )
        # Not "jobsched_jobs": that is the family of the jobsched_jobs_total
        # counter, and a second TYPE line for one name fails the scrape.
        depth = GaugeMetricFamily(
            "jobsched_unfinished_jobs",
            "Unfinished jobs this scheduler holds, by status",
            labels=["scheduler", "status"],
        )
        busy = GaugeMetricFamily(
            "jobsched_workers_busy", "Attempts running now", labels=["scheduler"]
        )
        slots = GaugeMetricFamily(
            "jobsched_worker_slots", "Attempts the scheduler runs at once", labels=["scheduler"]
        )
        old_slots = GaugeMetricFamily(
            "jobsched_workers_total",
            "Deprecated: jobsched_worker_slots (attempts the scheduler runs at once)",
            labels=["scheduler"],
        )
        leases = GaugeMetricFamily(
            "jobsched_leases_held",
            "Jobs claimed from a shared store and not yet written back",
            labels=["scheduler"],
        )
        misfires = CounterMetricFamily(
            "jobsched_schedule_misfires",
            "Recurring-schedule fires skipped as too late",
            labels=["scheduler", "schedule"],
        )
        held = CounterMetricFamily(
            "jobsched_limit_held_back",
            "Times a limit held a job back (parked, or delayed for a rate token); "
            "the limit label is deprecated (kind:name)",
            labels=["scheduler", "kind", "name", "limit"],
        )
        limit = GaugeMetricFamily(
            "jobsched_limit",
            "The most attempts a concurrency limit lets run at once",
            labels=["scheduler", "kind", "name"],
        )
        in_use = GaugeMetricFamily(
            "jobsched_limit_in_use",
            "Attempts running under a concurrency limit",
            labels=["scheduler", "kind", "name"],
        )
        for metrics in sorted(_metrics.values(), key=lambda m: int(m.label)):
            label = metrics.label
            for counts in sorted(metrics.types(), key=lambda c: c.name):
                kind = counts.name
                for outcome, n in zip(OUTCOMES, counts.jobs(), strict=True):
                    if n:
                        jobs.add_metric([label, kind, outcome], n)
                errors = sorted(counts.errors.copy().items())
                for outcome, n in zip(OUTCOMES, counts.attempts(), strict=True):
                    if outcome == "failed" and errors:
                        for error_type, failed in errors:
                            attempts.add_metric([label, kind, outcome, error_type], failed)
                    elif n:
                        attempts.add_metric([label, kind, outcome, ""], n)
                buckets = list(counts.duration_buckets)
                if any(buckets):
                    cumulative = _cumulative(_BOUNDS, buckets)
                    duration.add_metric([label, kind], cumulative, counts.duration_sum)
                    old_duration.add_metric([label, kind], cumulative, counts.duration_sum)
                buckets = list(counts.wait_buckets)
                if any(buckets):
                    wait.add_metric(
                        [label, kind], _cumulative(_WAIT_BOUNDS, buckets), counts.wait_sum
                    )
            for name, n in sorted(metrics.misfires.copy().items()):
                misfires.add_metric([label, name], n)
            scheduler = metrics.scheduler
            if scheduler is None:
                continue
            held_now = scheduler.job_counts()
            for status in GAUGE_STATUSES:
                depth.add_metric([label, status], held_now[status])
            busy.add_metric([label], held_now["running"])
            slots.add_metric([label], scheduler.num_workers)
            old_slots.add_metric([label], scheduler.num_workers)
            oldest.add_metric([label], metrics.oldest_due_age(scheduler))
            held_leases = getattr(scheduler.kernel.backend, "leases_held", None)
            if held_leases is not None:
                leases.add_metric([label], held_leases)
            limiter = scheduler.limiter
            if limiter is not None:
                for key, n in sorted(limiter.held_back.copy().items()):
                    held.add_metric([label, *_limit_labels(key), key], n)
                configured = limiter.limits
                for name, most in sorted(configured.executors.items()):
                    limit.add_metric([label, "executor", name], most)
                    in_use.add_metric([label, "executor", name], limiter.running(executor=name))
                for name, most in sorted(configured.job_types.items()):
                    limit.add_metric([label, "job_type", name], most)
                    in_use.add_metric([label, "job_type", name], limiter.running(job_type=name))
        yield from (
            build,
            jobs,
            attempts,
            duration,
            wait,
            oldest,
            depth,
            busy,
            slots,
            leases,
            misfires,
            held,
            limit,
            in_use,
            old_duration,
            old_slots,
        )


def _cumulative(bounds: tuple[float, ...], buckets: list[int]) -> list[tuple[str, int]]:
    """Per-bucket counts as Prometheus wants them: (le, observations <= le)."""
    return [(_le(bound), n) for bound, n in zip(bounds, itertools.accumulate(buckets), strict=True)]


def _le(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(bound)


_collector = _Collector()


def _ensure_registered(registry: CollectorRegistry | None) -> CollectorRegistry:
    """Put the collector into `registry` (default: prometheus-client's) once."""
    if registry is None:
        import prometheus_client

        registry = prometheus_client.REGISTRY
    with _registered_lock:
        if registry not in _registered:
            registry.register(_collector)
            _registered.add(registry)
    return registry


# ── exposing ───────────────────────────────────────────────────────────
def start_http_server(
    port: int, host: str = "127.0.0.1", *, registry: CollectorRegistry | None = None
) -> tuple[Any, threading.Thread]:
    """Serve ``/metrics`` on `host`:`port` from a daemon thread; returns (server, thread).

    Enables the metrics (`enable`) in `registry`, by default
    prometheus-client's default registry. Port 0 picks a free port:
    ``server.server_port`` is the one it got. Stop it with
    ``server.shutdown()``.
    """
    import prometheus_client

    registry = enable(registry)
    server, thread = prometheus_client.start_http_server(port, addr=host, registry=registry)
    return server, thread


def make_asgi_app(registry: CollectorRegistry | None = None) -> Any:
    """An ASGI app serving the metrics: ``app.mount("/metrics", make_asgi_app())``.

    Enables the metrics (`enable`) in `registry`, by default
    prometheus-client's default registry.
    """
    import prometheus_client

    return prometheus_client.make_asgi_app(registry=enable(registry))


def store_metrics_text(counts: Mapping[str, int]) -> str:
    """Prometheus text of a store's jobs per status: ``jobsched_store_jobs{status}``.

    Every status is reported (0 when the store has none), so a dashboard's
    series never disappear. The store's URL is not a label: it may hold a
    password.
    """
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.core import GaugeMetricFamily

    family = GaugeMetricFamily(
        "jobsched_store_jobs", "Jobs the store holds, by status", labels=["status"]
    )
    for status in JobStatus:
        family.add_metric([status.value], counts.get(status.value, 0))

    class _Once:
        def collect(self) -> Iterator[Any]:
            yield family

    registry = CollectorRegistry()
    registry.register(_Once())
    return generate_latest(registry).decode()
