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

A counted scheduler gets its own counters (a listener added with
``scheduler.add_listener(..., statuses=STATUSES)``, called once per attempt,
at its end: plain int increments on the loop thread, no prometheus-client
call per job). One collector, registered in the registry
metrics were enabled for (prometheus-client's default one unless told
otherwise), reports every counted scheduler with a ``scheduler`` label:
``"1"`` for the first scheduler counted in the process, ``"2"`` for the next,
so several schedulers in one process never collide. The metric names are API
(docs/observability.md):

==================================== ========= ===============================
``jobsched_jobs_total``              counter   terminal outcomes {type, status}
``jobsched_attempts_total``          counter   ended attempts {type, outcome}
``jobsched_job_duration_seconds``    histogram attempt run time {type}
``jobsched_queue_wait_seconds``      histogram due -> start {type}
``jobsched_unfinished_jobs``         gauge     unfinished jobs held {status}
``jobsched_workers_busy``            gauge     attempts running
``jobsched_workers_total``           gauge     worker slots
``jobsched_leases_held``             gauge     claimed jobs (shared stores)
``jobsched_schedule_misfires_total`` counter   skipped fires {schedule}
``jobsched_limit_held_back_total``   counter   jobs a limit held back {limit}
==================================== ========= ===============================

Expose them with `start_http_server` (what ``jobsched worker --metrics-port``
does), `make_asgi_app` (mount it in an ASGI app), or call `enable` and read
prometheus-client's ``REGISTRY`` with any exporter. `store_metrics_text`
renders a store's own counts (``jobsched status --store URL --metrics``).
"""

from __future__ import annotations

import asyncio
import importlib.util
import itertools
import threading
import weakref
from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

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
    "OUTCOMES",
    "STATUSES",
    "SchedulerMetrics",
    "TypeCounts",
    "disable",
    "enable",
    "make_asgi_app",
    "metrics_for",
    "start_http_server",
    "store_metrics_text",
]

#: Histogram buckets (seconds) of the duration and queue-wait histograms.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
_BOUNDS = (*BUCKETS, float("inf"))
#: The statuses of the ``jobsched_unfinished_jobs`` gauge (`JobScheduler.job_counts`).
GAUGE_STATUSES = ("pending", "delayed", "blocked", "retry_wait", "running")
#: Terminal statuses (``jobsched_jobs_total``) and attempt outcomes
#: (``jobsched_attempts_total``), in the order of `TypeCounts.ended`.
OUTCOMES = ("completed", "failed", "timed_out", "cancelled")
_FAILED, _TIMED_OUT, _CANCELLED = 1, 2, 3  # indexes into OUTCOMES

RUNNING = JobStatus.RUNNING
RETRY_WAIT = JobStatus.RETRY_WAIT
COMPLETED = JobStatus.COMPLETED
#: The target statuses the listener is added for: an attempt's end and a
#: cancel, not an attempt's start (the kernel then skips that call).
STATUSES = (
    RETRY_WAIT,
    COMPLETED,
    JobStatus.FAILED,
    JobStatus.TIMED_OUT,
    JobStatus.CANCELLED,
)

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
    """One job type's counters in one scheduler: list slots and floats, nothing else.

    Counters a scrape can add up are not kept twice, so an attempt's end
    costs one increment: ``ended[i]`` counts attempts that ended the job with
    `OUTCOMES` status i (one attempt and one job each), ``retried[i]``
    attempts that failed or timed out and were retried, ``cancelled_waiting``
    jobs cancelled with no attempt running. The histograms are per-bucket
    counts over `BUCKETS` and +Inf plus the sum of the observations; the scrape
    makes them cumulative. An observation is one comparison (most fall in the
    first bucket), at worst one bisect, and two adds.
    """

    __slots__ = (
        "cancelled_waiting",
        "duration_buckets",
        "duration_sum",
        "ended",
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
        self.duration_buckets = [0] * len(_BOUNDS)
        self.duration_sum = 0.0
        self.wait_buckets = [0] * len(_BOUNDS)
        self.wait_sum = 0.0

    def jobs(self) -> list[int]:
        """Jobs that reached each `OUTCOMES` status."""
        jobs = list(self.ended)
        jobs[_CANCELLED] += self.cancelled_waiting
        return jobs

    def attempts(self) -> list[int]:
        """Attempts that ended with each `OUTCOMES` outcome."""
        return [a + b for a, b in zip(self.ended, list(self.retried), strict=True)]


class SchedulerMetrics:
    """One counted scheduler's metrics, written by its listener on the loop thread.

    A job's counters are found by its class (a function job: its function),
    the type name worked out once per class. A scrape (another thread) copies
    each list and dict in one C call, so it never sees one change size under it.
    """

    def __init__(self, scheduler: JobScheduler, label: str) -> None:
        self.label = label
        self._scheduler = weakref.ref(scheduler)  # the collector must not keep it alive
        registered = scheduler.plugins.registry["job_types"].values()
        self._registered = {r.factory: r.name for r in registered if isinstance(r.factory, type)}
        self._by_key: dict[Any, TypeCounts] = {}  # job class or function -> its counters
        self._by_name: dict[str, TypeCounts] = {}
        self.misfires: dict[str, int] = {}
        #: The transition listener (``listener(job, old, new)``) that keeps these
        #: counts, for transitions into `STATUSES` only.
        self.on_transition = self._listener(scheduler.kernel.clock.now)

    @property
    def scheduler(self) -> JobScheduler | None:
        return self._scheduler()

    def types(self) -> list[TypeCounts]:
        """Every job type counted so far (safe from any thread)."""
        return list(self._by_name.copy().values())

    def _listener(self, now: Callable[[], float]) -> Callable[[Job, JobStatus, JobStatus], None]:
        """The listener, a closure: it runs once per attempt, so it reads only locals.

        Added for `STATUSES` only: an attempt's end (or a cancel before
        one), never its start. The queue wait is worked out at the end too,
        from the attempt's start and the time it was due (`Job.run_at`, or
        for an attempt that is retried `Job.previous_run_at`, as `run_at`
        already holds the retry's time). A bound method would look up
        ``self`` attributes and module globals on every call; here every
        name is a closure cell. Counters are list slots and float adds,
        compared by identity (an enum hashes slowly).
        """
        by_key = self._by_key
        add_key = self._add_key
        counts_named = self._counts_named
        registered = self._registered
        function_job, running, retry_wait, completed = FunctionJob, RUNNING, RETRY_WAIT, COMPLETED
        first, bounds = _BOUNDS[0], _BOUNDS
        failed, timed_out, index_of = _FAILED, _TIMED_OUT, OUTCOMES.index

        def on_transition(job: Job, old: JobStatus, new: JobStatus) -> None:
            key = job.__class__
            if key is function_job:
                key = job.fn  # type: ignore[attr-defined]
            try:
                counts = by_key[key]
            except KeyError:
                counts = add_key(job, key)
            except TypeError:  # an unhashable callable: its name is worked out each time
                counts = counts_named(job_type_of(job, registered))
            if old is not running:  # cancelled while it waited: no attempt ended
                counts.cancelled_waiting += 1
                return
            if new is completed:
                counts.ended[0] += 1
                ended_at = job.finished_at  # set just before a terminal transition: no clock read
                due = job.run_at
            elif new is retry_wait:
                counts.retried[timed_out if job.last_failure_timed_out else failed] += 1
                ended_at = now()
                previous = job.previous_run_at  # run_at is the retry's time by now
                due = job.run_at if previous is None else previous
            else:  # failed, timed out or cancelled: the attempt's outcome is the job's
                counts.ended[index_of(new.value)] += 1
                ended_at = job.finished_at
                due = job.run_at
            started = job.started_at
            if started is None or ended_at is None:
                # Taken, then cancelled before its attempt started: it waited
                # until the cancel, and there is no run time to observe.
                wait = (now() if ended_at is None else ended_at) - due
                counts.wait_buckets[bisect_left(bounds, wait) if wait > first else 0] += 1
                if wait > 0.0:
                    counts.wait_sum += wait
                return
            # started_at is read right after the RUNNING transition: the same
            # wait as a clock read there, without a second call per attempt.
            wait = started - due
            if wait <= first:  # one comparison: with idle workers, most waits
                counts.wait_buckets[0] += 1
                if wait > 0.0:  # a clock read just before run_at is no wait
                    counts.wait_sum += wait
            else:
                counts.wait_buckets[bisect_left(bounds, wait)] += 1
                counts.wait_sum += wait
            ran = ended_at - started
            if ran <= first:
                counts.duration_buckets[0] += 1
            else:
                counts.duration_buckets[bisect_left(bounds, ran)] += 1
            counts.duration_sum += ran

        return on_transition

    def _add_key(self, job: Job, key: Any) -> TypeCounts:
        counts = self._counts_named(job_type_of(job, self._registered))
        self._by_key[key] = counts
        return counts

    def _counts_named(self, name: str) -> TypeCounts:
        counts = self._by_name.get(name)
        if counts is None:  # two classes or functions may share a name: one series
            counts = self._by_name[name] = TypeCounts(name)
        return counts

    def misfired(self, schedule: RecurringSchedule, fires: int) -> None:
        name = schedule.name or schedule.schedule_id
        self.misfires[name] = self.misfires.get(name, 0) + fires


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
    if scheduler in _metrics:
        return
    metrics = SchedulerMetrics(scheduler, str(next(_labels)))
    _metrics[scheduler] = metrics
    scheduler.add_listener(metrics.on_transition, statuses=STATUSES)


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


@hookimpl
def jobsched_schedule_misfired(
    scheduler: JobScheduler, schedule: RecurringSchedule, fires: int
) -> None:
    metrics = _metrics.get(scheduler)
    if metrics is not None:
        metrics.misfired(schedule, fires)


# ── the collector ──────────────────────────────────────────────────────
class _Collector:
    """Reports every live scheduler's metrics when prometheus-client collects."""

    def describe(self) -> list[Any]:
        return []  # no fixed names to check at registration: all are ours

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            HistogramMetricFamily,
        )

        jobs = CounterMetricFamily(
            "jobsched_jobs",
            "Jobs that reached a terminal status",
            labels=["scheduler", "type", "status"],
        )
        attempts = CounterMetricFamily(
            "jobsched_attempts",
            "Attempts that ended, by outcome (completed, failed, timed_out, cancelled)",
            labels=["scheduler", "type", "outcome"],
        )
        duration = HistogramMetricFamily(
            "jobsched_job_duration_seconds",
            "How long attempts ran",
            labels=["scheduler", "type"],
        )
        wait = HistogramMetricFamily(
            "jobsched_queue_wait_seconds",
            "From when a job was due (submitted, delay or backoff over, or claimed) to its start",
            labels=["scheduler", "type"],
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
        total = GaugeMetricFamily("jobsched_workers_total", "Worker slots", labels=["scheduler"])
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
            "Times a limit held a job back (parked, or delayed for a rate token)",
            labels=["scheduler", "limit"],
        )
        for metrics in sorted(_metrics.values(), key=lambda m: int(m.label)):
            label = metrics.label
            for counts in sorted(metrics.types(), key=lambda c: c.name):
                kind = counts.name
                for outcome, n in zip(OUTCOMES, counts.jobs(), strict=True):
                    if n:
                        jobs.add_metric([label, kind, outcome], n)
                for outcome, n in zip(OUTCOMES, counts.attempts(), strict=True):
                    if n:
                        attempts.add_metric([label, kind, outcome], n)
                for family, buckets, summed in (
                    (duration, list(counts.duration_buckets), counts.duration_sum),
                    (wait, list(counts.wait_buckets), counts.wait_sum),
                ):
                    if any(buckets):
                        family.add_metric([label, kind], _cumulative(buckets), summed)
            for name, n in sorted(metrics.misfires.copy().items()):
                misfires.add_metric([label, name], n)
            scheduler = metrics.scheduler
            if scheduler is None:
                continue
            held_now = scheduler.job_counts()
            for status in GAUGE_STATUSES:
                depth.add_metric([label, status], held_now[status])
            busy.add_metric([label], held_now["running"])
            total.add_metric([label], scheduler.num_workers)
            held_leases = getattr(scheduler.kernel.backend, "leases_held", None)
            if held_leases is not None:
                leases.add_metric([label], held_leases)
            if scheduler.limiter is not None:
                for limit, n in sorted(scheduler.limiter.held_back.copy().items()):
                    held.add_metric([label, limit], n)
        yield from (jobs, attempts, duration, wait, depth, busy, total, leases, misfires, held)


def _cumulative(buckets: list[int]) -> list[tuple[str, int]]:
    """Per-bucket counts as Prometheus wants them: (le, observations <= le)."""
    return [
        (_le(bound), n) for bound, n in zip(_BOUNDS, itertools.accumulate(buckets), strict=True)
    ]


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
