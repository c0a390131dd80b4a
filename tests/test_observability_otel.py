"""The ``otel`` plugin: one trace from a Client's submit to a worker's attempts.

Both processes configure the OpenTelemetry SDK with its in-memory exporter
(tests/otel_proc.py); the test compares the spans each recorded, on a SQLite
file in shared mode and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import baggage, propagate, trace
from opentelemetry import context as otel_context
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.semconv._incubating.attributes import error_attributes, messaging_attributes
from opentelemetry.trace import SpanKind, StatusCode

import obs_support
from jobsched import (
    FunctionJob,
    JobScheduler,
    PluginManager,
    SchedulerStoppedError,
    build_job,
    default_plugin_manager,
    hookimpl,
)
from jobsched._codec import JobCodec
from jobsched_plugins import otel
from worker_support import wait_started

HERE = Path(__file__).resolve().parent


@pytest.fixture(params=obs_support.STORES)
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return obs_support.store_url(request, tmp_path)


def otel_proc(*args: str, **kw: Any) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.Popen(
        [sys.executable, str(HERE / "otel_proc.py"), *args], text=True, env=env, **kw
    )


@pytest.mark.slow
def test_a_job_submitted_in_a_span_runs_in_the_same_trace_in_a_worker(
    shared_url: str, tmp_path: Path
) -> None:
    # The producer creates the store first (as a web app would), then the worker serves it.
    producer_out, worker_out = tmp_path / "producer.json", tmp_path / "worker.json"
    producer = otel_proc("submit", shared_url, str(producer_out), stdout=subprocess.PIPE)
    worker = otel_proc("worker", shared_url, str(worker_out), stderr=subprocess.PIPE)
    try:
        wait_started(worker)
        out, _ = producer.communicate(timeout=180)
        assert producer.returncode == 0
    finally:
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=120) == 0
    result = json.loads(out.strip().splitlines()[-1])  # after any log lines
    assert result["statuses"] == ["completed", "completed", "timed_out"]
    produced = json.loads(producer_out.read_text())
    ran = json.loads(worker_out.read_text())

    (request,) = [s for s in produced if s["name"] == "request"]
    (batch,) = [s for s in produced if s["name"] == "send"]  # mixed types: no type in the name
    creates = [s for s in produced if s["name"].startswith("create ")]
    assert len(creates) == 3
    assert all(s["kind"] == "PRODUCER" and s["parent"] == request["span_id"] for s in creates)
    assert batch["attributes"]["messaging.batch.message_count"] == 3
    assert sorted(batch["links"]) == sorted(s["span_id"] for s in creates)
    attempts = [s for s in ran if s["name"].startswith("process ")]
    assert len(attempts) == 4  # the flaky upload's retry is a second attempt
    # One trace: every attempt, in the other process, is a child of its creation span.
    assert {s["trace_id"] for s in attempts} == {request["trace_id"]}
    assert {s["parent"] for s in attempts} == {s["span_id"] for s in creates}
    assert all(s["kind"] == "CONSUMER" and s["links"] == [s["parent"]] for s in attempts)
    by_id = {result["ids"][i]: i for i in range(3)}
    for span in attempts:
        attrs = span["attributes"]
        assert attrs["messaging.message.id"] in by_id
        assert attrs["messaging.system"] == "jobsched"
        assert attrs["messaging.destination.name"] == "default"
        # The worker is known by its identity in the store.
        assert attrs["messaging.client.id"].startswith(socket.gethostname())
        assert attrs["jobsched.executor"] == "async"
    flaky = sorted(
        (s for s in attempts if s["name"] == "process flaky-upload"),
        key=lambda s: s["attributes"]["jobsched.job.attempt"],
    )
    assert [s["attributes"]["jobsched.job.attempt"] for s in flaky] == [1, 2]
    assert flaky[0]["status"] == "ERROR" and flaky[1]["status"] == "UNSET"
    assert flaky[0]["attributes"]["error.type"] == "ConnectionError"
    (exception,) = flaky[0]["events"]
    assert exception["name"] == "exception"
    assert exception["exception.type"] == "ConnectionError"
    assert "Traceback" in exception["exception.stacktrace"]
    (slow,) = [s for s in attempts if s["attributes"].get("jobsched.timed_out")]
    assert slow["status"] == "ERROR" and slow["attributes"]["error.type"] == "timeout"


def test_the_traceparent_option_survives_the_codec() -> None:
    codec = JobCodec(default_plugin_manager())
    job = build_job("sleep", {"name": "n", "seconds": 0})
    job.traceparent = "00-" + "ab" * 16 + "-" + "cd" * 8 + "-01"
    type_name, args, options = codec.describe_data(job, 0.0)
    assert options["traceparent"] == job.traceparent
    again = codec.build(type_name, args, options, 0.0, "job")
    assert again.traceparent == job.traceparent
    plain = build_job("sleep", {"name": "n", "seconds": 0})
    assert "traceparent" not in codec.describe_data(plain, 0.0)[2]


async def test_outside_a_span_submit_sets_no_traceparent() -> None:
    async def nothing() -> None:
        pass

    scheduler = JobScheduler()
    job = FunctionJob(nothing)
    scheduler.submit(job)
    assert job.traceparent is None
    await scheduler.start()
    await scheduler.join()
    await scheduler.stop()


NOT_CONFIGURED = """
import asyncio, json, sys
from jobsched import JobScheduler
from jobsched_plugins import otel

async def main():
    scheduler = JobScheduler()
    await scheduler.start()
    job_id = scheduler.submit(print, "job ran", file=sys.stderr)
    await scheduler.join()
    await scheduler.stop()
    print(json.dumps({
        "loaded": scheduler.plugins.loaded_plugin("otel") is otel,
        "imported": sorted(m for m in sys.modules if m.startswith("opentelemetry")),
        "traceparent": scheduler.get(job_id).traceparent,
    }))

asyncio.run(main())
"""


def test_without_opentelemetry_in_use_the_plugin_imports_nothing() -> None:
    # A fresh process: nothing imported opentelemetry, so nothing can be configured.
    run = subprocess.run(
        [sys.executable, "-c", NOT_CONFIGURED], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    assert "job ran" in run.stderr
    assert json.loads(run.stdout) == {"loaded": True, "imported": [], "traceparent": None}


API_ONLY = """
import json
from opentelemetry import trace
from jobsched import FunctionJob, JobScheduler

# OpenTelemetry's API in use, a valid span current, but no tracer provider set:
# the no-op tracer. The submit path must not pay for asking it anything.
scheduler = JobScheduler()
upstream = trace.SpanContext(trace_id=7, span_id=9, is_remote=True)
with trace.use_span(trace.NonRecordingSpan(upstream)):
    job = FunctionJob(print)
    scheduler.submit(job)
print(json.dumps({"traceparent": job.traceparent}))
"""


def test_with_the_api_but_no_tracer_provider_submit_joins_no_trace() -> None:
    run = subprocess.run(
        [sys.executable, "-c", API_ONLY], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == {"traceparent": None}


# ── in this process, checked with the SDK's in-memory exporter ─────────
@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """An SDK tracer provider with an in-memory exporter, for this test only.

    ``trace.set_tracer_provider`` may be called once per process; the provider
    is put in the API's global and taken out again, so later tests see no SDK.
    """
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    before = trace._TRACER_PROVIDER
    textmap = propagate.get_global_textmap()
    trace._TRACER_PROVIDER = provider
    try:
        yield exporter
    finally:
        trace._TRACER_PROVIDER = before
        propagate.set_global_textmap(textmap)
        otel.configure(new_trace_per_attempt=False)


def holds(attributes: Any, expected: dict[str, Any]) -> bool:
    """Whether `attributes` has every key of `expected`, with its value."""
    found = dict(attributes or {})
    return {key: found.get(key) for key in expected} == expected


def named(exporter: InMemorySpanExporter, prefix: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name.startswith(prefix)]


async def ok() -> int:
    return 1


async def bad() -> None:
    raise ValueError("no good")


async def hang() -> None:
    await asyncio.sleep(3600)


SEND_ATTRIBUTES = {
    "messaging.system",
    "messaging.operation.name",
    "messaging.operation.type",
    "messaging.destination.name",
    "messaging.message.id",
    "messaging.client.id",
    "jobsched.job.type",
    "jobsched.job.name",
}
PROCESS_ATTRIBUTES = {
    "messaging.system",
    "messaging.operation.name",
    "messaging.operation.type",
    "messaging.destination.name",
    "messaging.message.id",
    "messaging.client.id",
    "jobsched.job.type",
    "jobsched.job.attempt",
    "jobsched.executor",
    "jobsched.outcome",
}


def test_the_attribute_names_are_the_semantic_conventions() -> None:
    # Every messaging.* and error.* name the plugin sets, as the installed
    # opentelemetry-semantic-conventions package spells it.
    known = {
        value
        for module in (messaging_attributes, error_attributes)
        for value in vars(module).values()
        if isinstance(value, str)
    }
    ours = {a for a in SEND_ATTRIBUTES | PROCESS_ATTRIBUTES if not a.startswith("jobsched.")}
    assert ours | {"messaging.batch.message_count", "error.type"} <= known
    assert f"https://opentelemetry.io/schemas/{otel.SEMCONV_VERSION}" == otel.SCHEMA_URL


async def test_send_and_process_spans_follow_the_messaging_conventions(
    spans: InMemorySpanExporter,
) -> None:
    tracer = trace.get_tracer("test")
    scheduler = JobScheduler(num_workers=2)
    async with scheduler:
        with tracer.start_as_current_span("request") as request:
            done = scheduler.submit(ok)
            failed = scheduler.submit(
                bad, retry={"policy": "fixed", "seconds": 0, "max_retries": 1}
            )
            slow = scheduler.submit(hang, timeout=0.01, retry="none")
        await scheduler.join()
    (send_ok,) = named(spans, "send ok")
    assert send_ok.kind is SpanKind.PRODUCER
    assert send_ok.parent is not None
    assert send_ok.parent.span_id == request.get_span_context().span_id
    assert set(send_ok.attributes or {}) == SEND_ATTRIBUTES
    assert holds(
        send_ok.attributes,
        {
            "messaging.system": "jobsched",
            "messaging.operation.name": "send",
            "messaging.operation.type": "send",
            "messaging.destination.name": "default",
            "messaging.message.id": done,
            "messaging.client.id": f"{socket.gethostname()}:{os.getpid()}",
            "jobsched.job.type": "ok",
        },
    )
    (process_ok,) = named(spans, "process ok")
    assert process_ok.kind is SpanKind.CONSUMER
    assert set(process_ok.attributes or {}) == PROCESS_ATTRIBUTES
    assert holds(
        process_ok.attributes,
        {
            "messaging.operation.name": "process",
            "messaging.operation.type": "process",
            "messaging.message.id": done,
            "jobsched.job.attempt": 1,
            "jobsched.outcome": "completed",
        },
    )
    # A child of its creation context, and linked to it.
    assert process_ok.parent is not None
    assert process_ok.parent.span_id == send_ok.context.span_id
    assert [link.context.span_id for link in process_ok.links] == [send_ok.context.span_id]
    assert process_ok.status.status_code is StatusCode.UNSET

    first, retry = sorted(named(spans, "process bad"), key=lambda s: s.start_time or 0)
    for span in (first, retry):
        assert (span.attributes or {})["messaging.message.id"] == failed
        assert (span.attributes or {})["error.type"] == "ValueError"
        assert span.status.status_code is StatusCode.ERROR
        (event,) = span.events
        assert event.name == "exception"
        assert holds(
            event.attributes,
            {
                "exception.type": "ValueError",
                "exception.message": "no good",
            },
        )
        stacktrace = str((event.attributes or {})["exception.stacktrace"])
        assert stacktrace.startswith("Traceback") and ", in bad\n" in stacktrace
        assert stacktrace.endswith("ValueError: no good\n")
    assert (first.attributes or {})["jobsched.retry"] is True
    (timed_out,) = named(spans, "process hang")
    assert (timed_out.attributes or {})["messaging.message.id"] == slow
    assert (timed_out.attributes or {})["error.type"] == "timeout"
    assert timed_out.status.status_code is StatusCode.ERROR


async def test_submit_many_is_one_send_span_linked_to_a_create_span_per_job(
    spans: InMemorySpanExporter,
) -> None:
    tracer = trace.get_tracer("test")
    scheduler = JobScheduler(num_workers=2)
    async with scheduler:
        with tracer.start_as_current_span("request") as request:
            ids = scheduler.submit_many([ok, ok, ok])
        await scheduler.join()
    (send,) = named(spans, "send")
    assert send.name == "send ok"  # one job type: named as a single send
    assert send.kind is SpanKind.PRODUCER
    assert dict(send.attributes or {}) == {
        "messaging.system": "jobsched",
        "messaging.operation.name": "send",
        "messaging.operation.type": "send",
        "messaging.client.id": f"{socket.gethostname()}:{os.getpid()}",
        "messaging.destination.name": "default",
        "messaging.batch.message_count": 3,
    }
    creates = named(spans, "create ok")
    assert sorted((c.attributes or {})["messaging.message.id"] for c in creates) == sorted(ids)
    for create in creates:
        assert create.kind is SpanKind.PRODUCER
        assert (create.attributes or {})["messaging.operation.type"] == "create"
        assert create.parent is not None
        assert create.parent.span_id == request.get_span_context().span_id
    assert {link.context.span_id for link in send.links} == {c.context.span_id for c in creates}
    processes = named(spans, "process ok")
    assert {p.parent.span_id for p in processes if p.parent} == {c.context.span_id for c in creates}


async def test_outside_a_span_submit_many_records_nothing(spans: InMemorySpanExporter) -> None:
    scheduler = JobScheduler(num_workers=1)
    async with scheduler:
        ids = scheduler.submit_many([ok, ok])
        await scheduler.join()
        assert all(scheduler.get(i).traceparent is None for i in ids)
    assert not named(spans, "send") and not named(spans, "create")
    assert len(named(spans, "process ok")) == 2  # the attempts are recorded, as roots
    assert all(s.parent is None and not s.links for s in named(spans, "process ok"))


class SingleHeaderB3:
    """A propagator that speaks B3's single ``b3`` header and nothing else.

    Stands in for opentelemetry-propagator-b3 (not a dependency): what the
    plugin must get right is handing the configured propagator a carrier and
    keeping every header it writes.
    """

    fields = {"b3"}

    def inject(self, carrier: Any, context: Any = None, setter: Any = None) -> None:
        span_context = trace.get_current_span(context).get_span_context()
        carrier["b3"] = f"{span_context.trace_id:032x}-{span_context.span_id:016x}-1"

    def extract(self, carrier: Any, context: Any = None, getter: Any = None) -> Any:
        trace_id, span_id, _ = carrier["b3"].split("-")
        remote = trace.SpanContext(
            int(trace_id, 16), int(span_id, 16), is_remote=True, trace_flags=trace.TraceFlags(1)
        )
        return trace.set_span_in_context(trace.NonRecordingSpan(remote), context)


async def test_tracestate_and_baggage_reach_the_attempt(spans: InMemorySpanExporter) -> None:
    seen: dict[str, Any] = {}

    async def look() -> None:
        current = trace.get_current_span().get_span_context()
        seen["tenant"] = baggage.get_baggage("tenant")
        seen["tracestate"] = current.trace_state.get("vendor")

    upstream = trace.SpanContext(
        trace_id=0xABC,
        span_id=0xDEF,
        is_remote=True,
        trace_flags=trace.TraceFlags(1),
        trace_state=trace.TraceState([("vendor", "v1")]),
    )
    scheduler = JobScheduler(num_workers=1)
    async with scheduler:
        context = baggage.set_baggage(
            "tenant", "acme", trace.set_span_in_context(trace.NonRecordingSpan(upstream))
        )
        token = otel_context.attach(context)
        try:
            job_id = scheduler.submit(look)
        finally:
            otel_context.detach(token)
        await scheduler.join()
        kept = scheduler.get(job_id).traceparent
    assert kept is not None and otel.decode_carrier(kept).keys() == {
        "traceparent",
        "tracestate",
        "baggage",
    }
    assert seen == {"tenant": "acme", "tracestate": "v1"}
    (process,) = named(spans, "process ")
    assert process.name.endswith(".look")  # a local function's qualified name
    assert process.context.trace_id == 0xABC


async def test_another_propagator_carries_its_own_headers(spans: InMemorySpanExporter) -> None:
    propagate.set_global_textmap(SingleHeaderB3())
    scheduler = JobScheduler(num_workers=1)
    async with scheduler:
        with trace.get_tracer("test").start_as_current_span("request"):
            job_id = scheduler.submit(ok)
        await scheduler.join()
        kept = scheduler.get(job_id).traceparent
    assert kept is not None and otel.decode_carrier(kept).keys() == {"b3"}
    (send,) = named(spans, "send ok")
    (process,) = named(spans, "process ok")
    assert process.parent is not None and process.parent.span_id == send.context.span_id


async def test_each_attempt_can_start_a_trace_of_its_own(spans: InMemorySpanExporter) -> None:
    otel.configure(new_trace_per_attempt=True)
    scheduler = JobScheduler(num_workers=1)
    async with scheduler:
        with trace.get_tracer("test").start_as_current_span("request"):
            scheduler.submit(bad, retry={"policy": "fixed", "seconds": 0, "max_retries": 1})
        await scheduler.join()
    (send,) = named(spans, "send bad")
    attempts = named(spans, "process bad")
    assert len(attempts) == 2
    for attempt in attempts:
        assert attempt.parent is None  # a root: not parented...
        assert attempt.context.trace_id != send.context.trace_id
        assert [link.context.span_id for link in attempt.links] == [
            send.context.span_id
        ]  # ...linked
    assert attempts[0].context.trace_id != attempts[1].context.trace_id


async def test_a_bare_traceparent_of_an_earlier_version_still_parents_the_attempt(
    spans: InMemorySpanExporter,
) -> None:
    scheduler = JobScheduler(num_workers=1)
    async with scheduler:
        old, unreadable = FunctionJob(ok), FunctionJob(ok)
        old.traceparent = "00-" + "ab" * 16 + "-" + "cd" * 8 + "-01"
        unreadable.traceparent = "{not json"
        scheduler.submit(old)  # outside a span: the kept context is left as it is
        scheduler.submit(unreadable)
        await scheduler.join()
    by_parent = {s.parent.span_id if s.parent else None: s for s in named(spans, "process ok")}
    assert set(by_parent) == {0xCDCDCDCDCDCDCDCD, None}
    assert by_parent[None].links == ()  # unreadable: no creation context, no link
    assert by_parent[0xCDCDCDCDCDCDCDCD].context.trace_id == int("ab" * 16, 16)


def test_carriers_round_trip() -> None:
    assert otel.encode_carrier({}) is None
    assert otel.encode_carrier({"traceparent": "00-x"}) == "00-x"
    both = {"traceparent": "00-x", "tracestate": "a=b"}
    assert otel.decode_carrier(str(otel.encode_carrier(both))) == both
    assert otel.decode_carrier("00-x") == {"traceparent": "00-x"}
    assert otel.decode_carrier("[1]") == {"traceparent": "[1]"}
    assert otel.decode_carrier('{"a": 1, "b": "c"}') == {"b": "c"}
    assert otel.decode_carrier("{bad") == {}


class _BatchRecorder:
    """A plugin that records what happens inside each ``submit_many`` batch."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log

    @hookimpl
    def jobsched_submit_hook(self) -> Any:
        return lambda job: self.log.append(f"{self.name}: job")

    @hookimpl
    def jobsched_submit_batch_hook(self) -> Any:
        @contextmanager
        def batch() -> Iterator[None]:
            self.log.append(f"{self.name}: enter")
            try:
                yield
            except BaseException as exc:
                self.log.append(f"{self.name}: {type(exc).__name__}")
                raise
            self.log.append(f"{self.name}: exit")

        return batch


async def test_submit_batch_hooks_wrap_every_submit_of_a_batch() -> None:
    log: list[str] = []
    plugins = PluginManager([_BatchRecorder("a", log), _BatchRecorder("b", log)])
    scheduler = JobScheduler(plugins=plugins)
    scheduler.submit(ok)
    assert log == ["a: job", "b: job"]  # no batch for a plain submit
    log.clear()
    scheduler.submit_many([ok, ok])
    assert log[:2] == ["a: enter", "b: enter"] and log[-2:] == ["b: exit", "a: exit"]
    assert log[2:-2].count("a: job") == 2 and len(log) == 8
    log.clear()
    await scheduler.stop()
    with pytest.raises(SchedulerStoppedError):
        scheduler.submit_many([ok])
    assert log == ["a: enter", "b: enter", "b: SchedulerStoppedError", "a: SchedulerStoppedError"]
    assert JobScheduler(plugins=PluginManager([]))._submit_batch is None  # nothing to enter
