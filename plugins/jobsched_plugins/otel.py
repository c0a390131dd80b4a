"""The ``otel`` plugin: OpenTelemetry traces of submits and attempts.

Installed with ``pip install 'jobsched[otel]'`` (opentelemetry-api only; the
application brings the SDK and configures it). Without opentelemetry-api the
plugin does not load and ``jobsched plugins list`` shows it as failed with the
install line; everything else works. The API is imported on first use.

The spans follow OpenTelemetry's messaging semantic conventions
(`SEMCONV_VERSION`; docs/observability.md lists every attribute):

- ``submit`` inside an active span (a `JobScheduler`'s or a `Client`'s)
  records a ``send {job type}`` span of kind PRODUCER, and keeps the context
  the configured propagator injects (``opentelemetry.propagate.inject``:
  ``traceparent``, and ``tracestate``, ``baggage``, B3 headers when they are
  configured) with the job, as ``job.traceparent`` (stores keep it as the
  ``traceparent`` option), so the job's attempts, in this process or in a
  worker on another host, find their creation context. Outside a span it
  does nothing. ``submit_many`` inside a span records one ``send`` span with
  ``messaging.batch.message_count``, linked to a ``create {job type}`` span
  per job, which is that job's creation context.
- Each attempt is a ``process {job type}`` span of kind CONSUMER with a link
  to the creation context, and by default that context as its parent (every
  retry too: one trace); after ``configure(new_trace_per_attempt=True)``,
  each attempt starts a trace of its own, linked and not parented, so a
  schedule that runs for months does not grow one giant trace. A failure is
  recorded with ``span.record_exception`` and ``error.type``, status ERROR;
  a timeout has ``error.type = "timeout"``. While an async attempt runs, its
  span is the current span (with the submit's baggage): the job's own spans
  are its children.

Attempt spans are recorded by schedulers started after a tracer provider was
set (``trace.set_tracer_provider``), submit spans by schedulers and clients
composed after it; with none (the API's no-op tracer), the plugin adds no
listener and no submit hook, and costs the per-job path nothing. Until the
application imports ``opentelemetry.trace`` (it must, to configure anything),
the plugin does not import it either.
"""

from __future__ import annotations

import asyncio
import contextvars
import importlib.util
import json
import os
import socket
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from jobsched import FunctionJob, Job, JobScheduler, JobStatus, hookimpl, job_type_of

if importlib.util.find_spec("opentelemetry") is None:
    # Reported by `jobsched plugins list` as this plugin's error.
    raise ImportError(
        "the otel plugin needs opentelemetry-api: pip install 'jobsched[otel]' "
        "(or disable it: JOBSCHED_DISABLE_PLUGINS=otel)"
    )

__all__ = [
    "DEFAULT_DESTINATION",
    "MESSAGING_SYSTEM",
    "SCHEMA_URL",
    "SEMCONV_VERSION",
    "TRACER_NAME",
    "JobError",
    "configure",
    "decode_carrier",
    "encode_carrier",
    "format_traceparent",
    "parse_traceparent",
]

#: The instrumentation scope of every span this plugin records.
TRACER_NAME = "jobsched"
#: The OpenTelemetry semantic conventions the spans follow (messaging spans,
#: status "development" there: names may still change upstream).
SEMCONV_VERSION = "1.44.0"
#: The schema URL the tracer declares.
SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"
#: ``messaging.system`` of every span.
MESSAGING_SYSTEM = "jobsched"
#: ``messaging.destination.name`` of a job with no ``queue``.
DEFAULT_DESTINATION = "default"

RUNNING = JobStatus.RUNNING
RETRY_WAIT = JobStatus.RETRY_WAIT
COMPLETED = JobStatus.COMPLETED
TIMED_OUT = JobStatus.TIMED_OUT
CANCELLED = JobStatus.CANCELLED

_api: Any = None  # the opentelemetry modules, imported on first use
_new_trace_per_attempt = False
# The creation contexts of the jobs a `submit_many` inside a span submitted so far.
_batch: contextvars.ContextVar[list[tuple[Any, str, str]] | None] = contextvars.ContextVar(
    "jobsched_otel_batch", default=None
)
_CLIENT_ID = f"{socket.gethostname()}:{os.getpid()}"


class JobError(Exception):
    """A failed attempt's error as `span.record_exception` records it.

    The exception object itself stays where the job ran (another thread, a
    process, a worker on another host); the span gets its type name,
    message and traceback as the job recorded them.
    """


def configure(*, new_trace_per_attempt: bool) -> None:
    """Choose how attempts of schedulers started from now on relate to their submit.

    False (the default): an attempt is a child of its creation context and
    linked to it, so a job and its retries are one trace with the request
    that submitted it. True: each attempt is the root of a trace of its own,
    linked to the creation context: for long-lived recurring schedules,
    whose runs would otherwise all join one trace.
    """
    global _new_trace_per_attempt
    _new_trace_per_attempt = bool(new_trace_per_attempt)


def _otel() -> Any:
    global _api
    if _api is None:
        from types import SimpleNamespace

        from opentelemetry import context, propagate, trace

        _api = SimpleNamespace(trace=trace, context=context, propagate=propagate)
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


def encode_carrier(carrier: dict[str, str]) -> str | None:
    """What `job.traceparent` keeps of a propagator's carrier (None: nothing to keep).

    A carrier that holds only ``traceparent`` (W3C trace context, the
    default propagator with no baggage) is kept as that bare value, which
    every jobsched version reads; any other (``tracestate``, ``baggage``,
    B3 headers) as a JSON object.
    """
    if not carrier:
        return None
    if carrier.keys() == {"traceparent"}:
        return carrier["traceparent"]
    return json.dumps(carrier, sort_keys=True, separators=(",", ":"))


def decode_carrier(value: str) -> dict[str, str]:
    """The carrier `encode_carrier` made (a bare value is a ``traceparent``); {} if unreadable."""
    if not value.startswith("{"):
        return {"traceparent": value}
    try:
        loaded = json.loads(value)
    except ValueError:
        return {}
    if not isinstance(loaded, dict):
        return {}
    return {k: v for k, v in loaded.items() if isinstance(k, str) and isinstance(v, str)}


def _destination(job: Job) -> str:
    """``messaging.destination.name``: the job's queue, when jobs have one."""
    queue = getattr(job, "queue", None)
    return queue if isinstance(queue, str) and queue else DEFAULT_DESTINATION


def _error_type(error: str) -> str:
    """``error.type`` of a failed attempt: its exception's type name, else ``_OTHER``."""
    head = error.partition(":")[0]
    return head if all(part.isidentifier() for part in head.split(".")) else "_OTHER"


def _configurable() -> bool:
    """Whether OpenTelemetry can be in use: the application imported its trace API.

    Nothing can set a tracer provider or open a span without importing
    ``opentelemetry.trace``, so until then the plugin imports nothing (the
    API alone takes tens of milliseconds to import) and does nothing.
    """
    return _api is not None or "opentelemetry.trace" in sys.modules


def _tracing() -> bool:
    """Whether a tracer provider is set (not the API's no-op one)."""
    if not _configurable():
        return False
    trace = _otel().trace
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


@hookimpl
def jobsched_submit_hook() -> Callable[[Job], None] | None:
    # Asked once per scheduler or client: without a tracer provider set, submit
    # pays nothing (asking the API for the current span costs half a microsecond).
    return _send if _tracing() else None


@hookimpl
def jobsched_submit_batch_hook() -> Callable[[], AbstractContextManager[None]] | None:
    return _send_batch if _tracing() else None


def _send(job: Job) -> None:
    """Record the job's ``send`` (or, in a batch, ``create``) span and keep its context."""
    api = _api or _otel()
    trace = api.trace
    if not trace.get_current_span().get_span_context().is_valid:
        return  # not inside a span: nothing to join
    kind = job_type_of(job)
    batch = _batch.get()
    operation = "send" if batch is None else "create"
    attributes = {
        "messaging.system": MESSAGING_SYSTEM,
        "messaging.operation.name": operation,
        "messaging.operation.type": operation,
        "messaging.destination.name": _destination(job),
        "messaging.message.id": job.job_id,
        "messaging.client.id": _CLIENT_ID,
        "jobsched.job.type": kind,
        "jobsched.job.name": job.name,
    }
    tracer = trace.get_tracer(TRACER_NAME, schema_url=SCHEMA_URL)
    with tracer.start_as_current_span(
        f"{operation} {kind}", kind=trace.SpanKind.PRODUCER, attributes=attributes
    ) as span:
        carrier: dict[str, str] = {}
        api.propagate.inject(carrier)
        job.traceparent = encode_carrier(carrier)
        if batch is not None:
            batch.append((span.get_span_context(), kind, _destination(job)))


@contextmanager
def _send_batch() -> Iterator[None]:
    """One ``send`` span for a ``submit_many``, linked to each job's ``create`` span."""
    trace = (_api or _otel()).trace
    if not trace.get_current_span().get_span_context().is_valid or _batch.get() is not None:
        yield  # outside a span nothing is recorded; a nested batch is the outer one's
        return
    created: list[tuple[Any, str, str]] = []
    token = _batch.set(created)
    # Started first, not current: the create spans are children of the caller's span.
    span = trace.get_tracer(TRACER_NAME, schema_url=SCHEMA_URL).start_span(
        "send",
        kind=trace.SpanKind.PRODUCER,
        attributes={
            "messaging.system": MESSAGING_SYSTEM,
            "messaging.operation.name": "send",
            "messaging.operation.type": "send",
            "messaging.client.id": _CLIENT_ID,
        },
    )
    try:
        yield
    except BaseException as exc:
        span.set_attribute("error.type", type(exc).__qualname__)
        span.record_exception(exc)
        span.set_status(trace.Status(trace.StatusCode.ERROR, str(exc)))
        raise
    finally:
        _batch.reset(token)
        for context, _, _ in created:
            span.add_link(context)
        attributes: dict[str, Any] = {"messaging.batch.message_count": len(created)}
        destinations = {destination for _, _, destination in created}
        if len(destinations) == 1:
            attributes["messaging.destination.name"] = destinations.pop()
        kinds = {kind for _, kind, _ in created}
        if len(kinds) == 1:  # named as a single send is; a mixed batch is plain "send"
            span.update_name(f"send {kinds.pop()}")
        span.set_attributes(attributes)
        span.end()


@hookimpl
def jobsched_scheduler_started(scheduler: JobScheduler) -> None:
    if not _tracing():
        return  # OpenTelemetry is not in use or not configured: no listener, no cost
    scheduler.add_listener(_AttemptSpans(scheduler).on_transition)


class _AttemptSpans:
    """One scheduler's attempt spans, opened and ended by its transition listener."""

    def __init__(self, scheduler: JobScheduler) -> None:
        api = _otel()
        self._trace = api.trace
        self._context = api.context
        self._extract = api.propagate.extract
        self._tracer = api.trace.get_tracer(TRACER_NAME, schema_url=SCHEMA_URL)
        self._new_trace = _new_trace_per_attempt
        backend = scheduler.kernel.backend
        # A shared store's worker is known there by its identity (its leases' holder).
        identity = getattr(backend, "identity", None)
        self._client_id = identity if isinstance(identity, str) else _CLIENT_ID
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
        # Never the worker task's own context: an attempt belongs to its submit.
        context = self._root
        if job.traceparent:
            carrier = decode_carrier(job.traceparent)
            if carrier:
                context = self._extract(carrier, context=self._root)
        creation = trace.get_current_span(context).get_span_context()
        links = None
        parent = context
        if creation.is_valid:
            links = [trace.Link(creation)]
            if self._new_trace:  # a root span; the extracted baggage stays
                parent = trace.set_span_in_context(trace.INVALID_SPAN, context)
        kind = self._type_name(job)
        model = job.model
        span = self._tracer.start_span(
            f"process {kind}",
            context=parent,
            kind=trace.SpanKind.CONSUMER,
            links=links,
            attributes={
                "messaging.system": MESSAGING_SYSTEM,
                "messaging.operation.name": "process",
                "messaging.operation.type": "process",
                "messaging.destination.name": _destination(job),
                "messaging.message.id": job.job_id,
                "messaging.client.id": self._client_id,
                "jobsched.job.type": kind,
                "jobsched.job.attempt": job.attempts + 1,  # counted when it starts
                "jobsched.executor": str(getattr(model, "value", model)),
            },
        )
        task = _current_task()
        token = None
        if task is not None:
            token = self._context.attach(trace.set_span_in_context(span, context))
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
            attributes = {
                "jobsched.outcome": "timed_out",
                "jobsched.timed_out": True,
                "error.type": "timeout",
            }
            span.set_status(trace.Status(trace.StatusCode.ERROR, error))
        else:
            kind = _error_type(error)
            attributes = {"jobsched.outcome": "failed", "error.type": kind}
            message = error.partition(": ")[2] if kind != "_OTHER" else error
            recorded = {"exception.type": kind if kind != "_OTHER" else "JobError"}
            if job.last_traceback:
                recorded["exception.stacktrace"] = job.last_traceback
            span.record_exception(JobError(message), attributes=recorded)
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
