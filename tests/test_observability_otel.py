"""The ``otel`` plugin: one trace from a Client's submit to a worker's attempts.

Both processes configure the OpenTelemetry SDK with its in-memory exporter
(tests/otel_proc.py); the test compares the spans each recorded, on a SQLite
file in shared mode and on PostgreSQL.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import obs_support
from jobsched import FunctionJob, JobScheduler, build_job, default_plugin_manager
from jobsched._codec import JobCodec
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
    submits = [s for s in produced if s["name"] == "jobsched.submit"]
    assert len(submits) == 3
    assert all(s["kind"] == "PRODUCER" and s["parent"] == request["span_id"] for s in submits)
    attempts = [s for s in ran if s["name"] == "jobsched.attempt"]
    assert len(attempts) == 4  # the flaky upload's retry is a second attempt
    # One trace: every attempt, in the other process, is a child of its submit.
    assert {s["trace_id"] for s in attempts} == {request["trace_id"]}
    assert {s["parent"] for s in attempts} == {s["span_id"] for s in submits}
    assert all(s["kind"] == "CONSUMER" for s in attempts)
    by_id = {result["ids"][i]: i for i in range(3)}
    for span in attempts:
        attrs = span["attributes"]
        assert attrs["jobsched.job.id"] in by_id
        assert attrs["jobsched.executor"] == "async"
    flaky = sorted(
        (s for s in attempts if s["attributes"]["jobsched.job.type"] == "flaky-upload"),
        key=lambda s: s["attributes"]["jobsched.job.attempt"],
    )
    assert [s["attributes"]["jobsched.job.attempt"] for s in flaky] == [1, 2]
    assert flaky[0]["status"] == "ERROR" and flaky[1]["status"] == "UNSET"
    (exception,) = flaky[0]["events"]
    assert exception["name"] == "exception"
    assert exception["exception.type"] == "ConnectionError"
    (slow,) = [s for s in attempts if s["attributes"].get("jobsched.timed_out")]
    assert slow["status"] == "ERROR" and slow["attributes"]["jobsched.outcome"] == "timed_out"


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
