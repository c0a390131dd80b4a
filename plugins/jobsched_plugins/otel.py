"""The ``otel`` plugin: OpenTelemetry traces of submits and attempts.

Installed with ``pip install 'jobsched[otel]'`` (opentelemetry-api only; the
application brings the SDK and configures it). Without opentelemetry-api the
plugin does not load and ``jobsched plugins list`` shows it as failed with the
install line; everything else works. The API is imported on first use.

Following the OpenTelemetry messaging conventions:

- ``submit`` inside an active span (a `JobScheduler`'s or a `Client`'s)
  records a ``jobsched.submit`` span of kind PRODUCER and keeps its W3C
  ``traceparent`` with the job (``job.traceparent``; stores keep it as the
  ``traceparent`` option), so the job's attempts, in this process or in a
  worker on another host, belong to the same trace. Outside a span it does
  nothing.
- Each attempt is a ``jobsched.attempt`` span of kind CONSUMER, a child of
  the submit span (every retry too), with ``jobsched.job.id``,
  ``jobsched.job.type``, ``jobsched.job.attempt``, ``jobsched.executor`` and,
  when it ends, ``jobsched.outcome`` (``completed``, ``failed``,
  ``timed_out``, ``cancelled``). A failure is recorded as an ``exception``
  event with status ERROR; a timeout has status ERROR and
  ``jobsched.timed_out = true``; a cancellation ``jobsched.cancelled = true``.
  While an async attempt runs, its span is the current span: the job's own
  spans are its children.

Attempt spans are recorded by schedulers started after a tracer provider was
set (``trace.set_tracer_provider``), submit spans by schedulers and clients
composed after it; with none (the API's no-op tracer), the plugin adds no
listener and no submit hook, and costs the per-job path nothing. Until the
application imports ``opentelemetry.trace`` (it must, to configure anything),
the plugin does not import it either. A scheduler or client composed before
OpenTelemetry is configured pays nothing per submit (and joins no trace), so
configure OpenTelemetry first.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from collections.abc import Callable
from typing import Any

from jobsched import FunctionJob, Job, JobScheduler, JobStatus, hookimpl, job_type_of

if importlib.util.find_spec("opentelemetry") is None:
    # Reported by `jobsched plugins list` as this plugin's error.
    raise ImportError(
        "the otel plugin needs opentelemetry-api: pip install 'jobsched[otel]' "
        "(or disable it: JOBSCHED_DISABLE_PLUGINS=otel)"
    )

__all__ = ["TRACER_NAME", "format_traceparent", "parse_traceparent"]

#: The instrumentation scope of every span this plugin records.
TRACER_NAME = "jobsched"

RUNNING = JobStatus.RUNNING
RETRY_WAIT = JobStatus.RETRY_WAIT
COMPLETED = JobStatus.COMPLETED
TIMED_OUT = JobStatus.TIMED_OUT
CANCELLED = JobStatus.CANCELLED

_api: Any = None  # the opentelemetry modules, imported on first use


def _otel() -> Any:
    global _api
    if _api is None:
        from types import SimpleNamespace

        from opentelemetry import context, trace

        _api = SimpleNamespace(trace=trace, context=context)
    return _api


def format_traceparent(span_context: Any) -> str:
    """The W3C ``traceparent`` of a span context: ``00-<trace>-<span>-<flags>``."""
    return (
        f"00-{span_context.trace_id:032x}-{span_context.span_id:016x}-"
        f"{int(span_context.trace_flags):02x}"
    )


def parse_traceparent(value: str) -> Any:
    """The remote span context a ``traceparent`` names, or None if it is malformed."""
    trace = _otel().trace
    parts = value.split("-")
    if len(parts) != 4 or len(parts[1]) != 32 or len(parts[2]) != 16:
        return None
    try:
        trace_id, span_id, flags = int(parts[1], 16), int(parts[2], 16), int(parts[3], 16)
    except ValueError:
        return None
    context = trace.SpanContext(
        trace_id, span_id, is_remote=True, trace_flags=trace.TraceFlags(flags)
    )
    return context if context.is_valid else None


def _configurable() -> bool:
    """Whether OpenTelemetry can be in use: the application imported its trace API.

    Nothing can set a tracer provider or open a span without importing
    ``opentelemetry.trace``, so until then the plugin imports nothing (the
    API alone takes tens of milliseconds to import) and does nothing.
    """
    return _api is not None or "opentelemetry.trace" in sys.modules


@hookimpl
def jobsched_submit_hook() -> Callable[[Job], None] | None:
    # Asked once per scheduler or client: without a tracer provider set, submit
    # pays nothing (asking the API for the current span costs half a microsecond).
    if not _configurable():
        return None
    trace = _otel().trace
    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return None  # the no-op tracer: no span to record, no trace to join
    return _join_trace


def _join_trace(job: Job) -> None:
    """Record a ``jobsched.submit`` span and keep its trace context on the job."""
    trace = (_api or _otel()).trace
    if not trace.get_current_span().get_span_context().is_valid:
        return  # not inside a span: nothing to join
    tracer = trace.get_tracer(TRACER_NAME)
    attributes = {"jobsched.job.type": job_type_of(job), "jobsched.job.name": job.name}
    with tracer.start_as_current_span(
        "jobsched.submit", kind=trace.SpanKind.PRODUCER, attributes=attributes
    ) as span:
        job.traceparent = format_traceparent(span.get_span_context())


@hookimpl
def jobsched_scheduler_started(scheduler: JobScheduler) -> None:
    if not _configurable():
        return  # OpenTelemetry is not in use: no import, no listener
    trace = _otel().trace
    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return  # OpenTelemetry is not configured: no listener, no cost
    scheduler.add_listener(_AttemptSpans(scheduler).on_transition)


class _AttemptSpans:
    """One scheduler's attempt spans, opened and ended by its transition listener."""

    def __init__(self, scheduler: JobScheduler) -> None:
        api = _otel()
        self._trace = api.trace
        self._context = api.context
        self._tracer = api.trace.get_tracer(TRACER_NAME)
        registered = scheduler.plugins.registry["job_types"].values()
        self._registered = {r.factory: r.name for r in registered if isinstance(r.factory, type)}
        self._type_names: dict[type, str] = {}  # job class -> its type name (not function jobs)
        # Contexts are immutable: one empty context serves as every attempt's root.
        self._root = api.context.Context()
        # id(job) -> (span, context token, the task it was attached in)
        self._open: dict[int, tuple[Any, Any, Any]] = {}

    def on_transition(self, job: Job, old: JobStatus, new: JobStatus) -> None:
        if new is RUNNING:
            self._start(job)
        elif old is RUNNING:
            self._end(job, new)

    def _start(self, job: Job) -> None:
        trace = self._trace
        parent = parse_traceparent(job.traceparent) if job.traceparent else None
        # Never the worker task's own context: an attempt belongs to its submit.
        context = self._root
        if parent is not None:
            context = trace.set_span_in_context(trace.NonRecordingSpan(parent), context)
        model = job.model
        span = self._tracer.start_span(
            "jobsched.attempt",
            context=context,
            kind=trace.SpanKind.CONSUMER,
            attributes={
                "jobsched.job.id": job.job_id,
                "jobsched.job.type": self._type_name(job),
                "jobsched.job.attempt": job.attempts + 1,  # counted when it starts
                "jobsched.executor": str(getattr(model, "value", model)),
            },
        )
        task = _current_task()
        token = self._context.attach(trace.set_span_in_context(span)) if task else None
        self._open[id(job)] = (span, token, task)

    def _type_name(self, job: Job) -> str:
        cls = job.__class__
        name = self._type_names.get(cls)
        if name is None:
            name = job_type_of(job, self._registered)
            if cls is not FunctionJob:  # a function job's name is its function's
                self._type_names[cls] = name
        return name

    def _end(self, job: Job, new: JobStatus) -> None:
        entry = self._open.pop(id(job), None)
        if entry is None:
            return
        span, token, task = entry
        trace = self._trace
        error = job.last_error or ""
        timed_out = new is TIMED_OUT or (new is RETRY_WAIT and job.last_failure_timed_out)
        # One set_attributes call: the SDK takes the span's lock once per call.
        attributes: dict[str, Any]
        if new is COMPLETED:
            attributes = {"jobsched.outcome": "completed"}
        elif new is CANCELLED:
            attributes = {"jobsched.outcome": "cancelled", "jobsched.cancelled": True}
        elif timed_out:
            attributes = {"jobsched.outcome": "timed_out", "jobsched.timed_out": True}
            span.set_status(trace.Status(trace.StatusCode.ERROR, error))
        else:
            attributes = {"jobsched.outcome": "failed"}
            kind, _, message = error.partition(": ")
            span.add_event("exception", {"exception.type": kind, "exception.message": message})
            span.set_status(trace.Status(trace.StatusCode.ERROR, error))
        if new is RETRY_WAIT:
            attributes["jobsched.retry"] = True
        span.set_attributes(attributes)
        if token is not None and task is _current_task():
            self._context.detach(token)
        span.end()


def _current_task() -> Any:
    try:
        return asyncio.current_task()
    except RuntimeError:  # no running loop (a transition made off the loop)
        return None
