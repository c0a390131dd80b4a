"""The ``prometheus`` plugin: metric names and counts, several schedulers, the CLI.

The end-to-end test scrapes ``/metrics`` from a real ``jobsched worker``
process (SQLite shared mode and PostgreSQL) after 1,000 jobs with failures,
retries and timeouts, and parses it with prometheus-client's own parser.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

import obs_support
from jobsched import Client, Job, JobScheduler, JobStatus, Limits, Submission, build_job
from jobsched import __version__ as jobsched_version
from jobsched.testing import VirtualClock
from jobsched_plugins import prometheus

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def samples(text: str) -> Samples:
    """Every sample of a scrape: (sample name, labels) -> value."""
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def total(found: Samples, name: str, /, **labels: str) -> float:
    """The sum of the samples called `name` whose labels include `labels`."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in found.items() if n == name and wanted <= ls)


def private_registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    prometheus.make_asgi_app(registry)  # enables the metrics, with the collector in it
    return registry


@pytest.fixture(autouse=True)
def metrics_off_afterwards() -> Iterator[None]:
    """Schedulers of later tests in this process are not counted."""
    yield
    prometheus.disable()


async def ok() -> int:
    return 1


async def bad() -> None:
    raise ValueError("no")


async def yield_once() -> None:
    await asyncio.sleep(0)


async def hang() -> None:
    await asyncio.sleep(3600)


# ── in one process ─────────────────────────────────────────────────────
async def test_counts_per_outcome_and_attempt_in_one_scheduler() -> None:
    registry = private_registry()
    scheduler = JobScheduler(num_workers=4)
    await scheduler.start()
    try:
        for _ in range(5):
            scheduler.submit(ok)
        for _ in range(3):
            scheduler.submit(bad, retry={"policy": "fixed", "seconds": 0, "max_retries": 1})
        scheduler.submit(
            hang, timeout=0.01, retry={"policy": "fixed", "seconds": 0, "max_retries": 1}
        )
        await scheduler.join()
        metrics = prometheus.metrics_for(scheduler)
        assert metrics is not None
        found = samples(generate_latest(registry).decode())
    finally:
        await scheduler.stop()
    mine = {"scheduler": metrics.label}
    assert total(found, "jobsched_jobs_total", **mine, type="ok", status="completed") == 5
    assert total(found, "jobsched_jobs_total", **mine, type="bad", status="failed") == 3
    assert total(found, "jobsched_jobs_total", **mine, type="hang", status="timed_out") == 1
    assert total(found, "jobsched_attempts_total", **mine, type="bad", outcome="failed") == 6
    # A timed-out attempt that is retried still counts as timed out.
    assert total(found, "jobsched_attempts_total", **mine, type="hang", outcome="timed_out") == 2
    assert total(found, "jobsched_attempt_duration_seconds_count", **mine) == 5 + 6 + 2
    assert total(found, "jobsched_queue_wait_seconds_count", **mine) == 5 + 6 + 2
    assert total(found, "jobsched_worker_slots", **mine) == 4
    assert total(found, "jobsched_unfinished_jobs", **mine) == 0
    # Histograms are cumulative: +Inf holds every observation.
    assert total(found, "jobsched_attempt_duration_seconds_bucket", **mine, le="+Inf") == 13
    # A failed attempt names its exception's type; the others have no error_type.
    failed = {"type": "bad", "outcome": "failed", "error_type": "ValueError"}
    assert total(found, "jobsched_attempts_total", **mine, **failed) == 6
    assert total(found, "jobsched_attempts_total", **mine, type="ok", error_type="") == 5


async def raises_timeout_error() -> None:
    raise TimeoutError("timed out after 5s")  # its own error, not the scheduler's timeout


async def test_the_attempt_outcome_comes_from_the_kernel_flag_not_the_error_text(
    virtual_clock: VirtualClock, virtual_scheduler: Any
) -> None:
    registry = private_registry()
    flags: list[tuple[str, str, bool]] = []

    def record(job: Job, old: JobStatus, new: JobStatus) -> None:
        if old is JobStatus.RUNNING and new is not JobStatus.COMPLETED:
            flags.append((job.name, new.value, job.last_failure_timed_out))

    retry_once = {"policy": "fixed", "seconds": 0, "max_retries": 1}
    scheduler = virtual_scheduler(num_workers=2)
    scheduler.add_listener(record)
    async with scheduler:
        scheduler.submit(hang, timeout=5, retry=retry_once)
        scheduler.submit(raises_timeout_error, timeout=5, retry=retry_once)
        await virtual_clock.advance(5)
        await virtual_clock.advance(5)
        await scheduler.join()
        metrics = prometheus.metrics_for(scheduler)
        assert metrics is not None
        found = samples(generate_latest(registry).decode())
    assert sorted(flags) == [
        ("hang", "retry_wait", True),
        ("hang", "timed_out", True),
        ("raises_timeout_error", "failed", False),
        ("raises_timeout_error", "retry_wait", False),
    ]
    mine = {"scheduler": metrics.label}
    hang_attempts = {"type": "hang", "outcome": "timed_out"}
    assert total(found, "jobsched_attempts_total", **mine, **hang_attempts) == 2
    raised = {"type": "raises_timeout_error", "outcome": "failed"}
    assert total(found, "jobsched_attempts_total", **mine, **raised) == 2
    assert total(found, "jobsched_attempts_total", **mine, outcome="timed_out") == 2
    # Virtual time: each timed-out attempt ran exactly its 5 s timeout.
    hang_runs = {"type": "hang"}
    duration = "jobsched_attempt_duration_seconds"
    assert total(found, f"{duration}_sum", **mine, **hang_runs) == 10
    assert total(found, f"{duration}_bucket", **mine, **hang_runs, le="2.5") == 0
    assert total(found, f"{duration}_bucket", **mine, **hang_runs, le="5.0") == 2
    raised_error = {"error_type": "TimeoutError"}
    assert total(found, "jobsched_attempts_total", **mine, **raised, **raised_error) == 2


async def test_a_job_cancelled_while_waiting_is_a_job_not_an_attempt() -> None:
    registry = private_registry()
    scheduler = JobScheduler(num_workers=1)
    await scheduler.start()
    try:
        scheduler.cancel(scheduler.submit(ok, delay=3600))
        metrics = prometheus.metrics_for(scheduler)
        assert metrics is not None
        found = samples(generate_latest(registry).decode())
    finally:
        await scheduler.stop()
    mine = {"scheduler": metrics.label, "type": "ok"}
    assert total(found, "jobsched_jobs_total", **mine, status="cancelled") == 1
    assert total(found, "jobsched_attempts_total", **mine) == 0
    assert total(found, "jobsched_queue_wait_seconds_count", **mine) == 0


async def test_unfinished_jobs_gauge_by_status() -> None:
    registry = private_registry()
    scheduler = JobScheduler(num_workers=1)
    await scheduler.start()
    try:
        first = scheduler.submit(hang, timeout=None)
        scheduler.submit(ok)
        scheduler.submit(ok, delay=3600)
        scheduler.submit(ok, depends_on=[first])
        while scheduler.kernel.running == 0:
            await asyncio.sleep(0)
        metrics = prometheus.metrics_for(scheduler)
        assert metrics is not None
        found = samples(generate_latest(registry).decode())
        label = metrics.label
        by_status = {
            status: total(found, "jobsched_unfinished_jobs", scheduler=label, status=status)
            for status in prometheus.GAUGE_STATUSES
        }
        assert by_status == {
            "pending": 1,
            "delayed": 1,
            "blocked": 1,
            "retry_wait": 0,
            "running": 1,
        }
        assert total(found, "jobsched_workers_busy", scheduler=label) == 1
    finally:
        await scheduler.stop(cancel_running=True)


async def test_two_schedulers_in_one_process_have_their_own_series() -> None:
    registry = private_registry()
    one, two = JobScheduler(num_workers=1), JobScheduler(num_workers=2)
    await one.start()
    await two.start()
    try:
        one.submit(ok)
        for _ in range(3):
            two.submit(ok)
        await one.join()
        await two.join()
        found = samples(generate_latest(registry).decode())
    finally:
        await one.stop()
        await two.stop()
    first, second = prometheus.metrics_for(one), prometheus.metrics_for(two)
    assert first is not None and second is not None and first.label != second.label
    assert total(found, "jobsched_jobs_total", scheduler=first.label) == 1
    assert total(found, "jobsched_jobs_total", scheduler=second.label) == 3
    assert total(found, "jobsched_worker_slots", scheduler=second.label) == 2


async def test_limits_held_back_are_counted_by_limit() -> None:
    registry = private_registry()
    scheduler = JobScheduler(num_workers=4, limits=Limits(executors={"async": 1}))
    await scheduler.start()
    try:
        for _ in range(3):
            scheduler.submit(yield_once)  # the first holds the one slot while the others come
        await scheduler.join()
        metrics = prometheus.metrics_for(scheduler)
        assert metrics is not None
        found = samples(generate_latest(registry).decode())
    finally:
        await scheduler.stop()
    mine = {"scheduler": metrics.label}
    held = total(found, "jobsched_limit_held_back_total", **mine, kind="executor", name="async")
    assert held >= 1
    # The deprecated label names the same series.
    assert total(found, "jobsched_limit_held_back_total", **mine, limit="executor:async") == held


def sync_ok() -> int:
    return 1  # a plain function: runs on the thread executor


async def test_transitions_reach_the_counters_from_the_loop_thread_only() -> None:
    # The counters are plain ints and lists bumped without a lock: that is
    # only safe because every transition (hence every listener call) is made
    # on the scheduler's loop thread, whichever thread ran the job or submitted it.
    registry = private_registry()
    loop_thread = threading.get_ident()
    seen: set[int] = set()

    def record(job: Job, old: JobStatus, new: JobStatus) -> None:
        seen.add(threading.get_ident())

    retry_once = {"policy": "fixed", "seconds": 0, "max_retries": 1}
    scheduler = JobScheduler(num_workers=4)
    await scheduler.start()
    scheduler.add_listener(record)
    try:
        for _ in range(10):
            scheduler.submit(ok)
            scheduler.submit(sync_ok)
        scheduler.submit(bad, retry=retry_once)
        scheduler.submit(hang, timeout=0.01, retry="none")
        scheduler.cancel(scheduler.submit(ok, delay=3600))

        def from_another_thread() -> None:
            for _ in range(10):
                scheduler.submit_threadsafe(sync_ok)

        await asyncio.to_thread(from_another_thread)
        await scheduler.join()
        metrics = prometheus.metrics_for(scheduler)
        assert metrics is not None
        found = samples(generate_latest(registry).decode())
    finally:
        await scheduler.stop()
    assert seen == {loop_thread}
    mine = {"scheduler": metrics.label}
    assert total(found, "jobsched_jobs_total", **mine, type="sync_ok", status="completed") == 20
    assert total(found, "jobsched_jobs_total", **mine) == 10 + 20 + 1 + 1 + 1
    assert total(found, "jobsched_attempts_total", **mine) == 10 + 20 + 2 + 1
    assert total(found, "jobsched_queue_wait_seconds_count", **mine) == 33
    assert total(found, "jobsched_attempt_duration_seconds_count", **mine) == 33
    assert total(found, "jobsched_unfinished_jobs", **mine) == 0
    assert total(found, "jobsched_workers_busy", **mine) == 0


def test_store_metrics_text_reports_every_status() -> None:
    found = samples(prometheus.store_metrics_text({"pending": 3, "completed": 2}))
    assert total(found, "jobsched_store_jobs", status="pending") == 3
    assert total(found, "jobsched_store_jobs", status="completed") == 2
    assert total(found, "jobsched_store_jobs", status="failed") == 0


# ── opt-in: installed is not enabled ─────────────────────────────────
NOT_ENABLED = """
import asyncio, json, sys
from jobsched import JobScheduler
from jobsched_plugins import prometheus

async def main():
    scheduler = JobScheduler()
    await scheduler.start()
    scheduler.submit(print, "job ran", file=sys.stderr)
    await scheduler.join()
    await scheduler.stop()
    print(json.dumps({
        "loaded": scheduler.plugins.loaded_plugin("prometheus") is prometheus,
        "imported": "prometheus_client" in sys.modules,
        "counted": prometheus.metrics_for(scheduler) is not None,
    }))

asyncio.run(main())
"""


def test_installed_but_not_enabled_imports_nothing_and_counts_nothing() -> None:
    # A fresh process: this one imported prometheus_client for the other tests.
    run = subprocess.run(
        [sys.executable, "-c", NOT_ENABLED], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    assert "job ran" in run.stderr
    assert json.loads(run.stdout) == {"loaded": True, "imported": False, "counted": False}


async def test_not_enabled_then_enabled_counts_running_and_later_schedulers() -> None:
    early = JobScheduler()
    await early.start()
    try:
        early.submit(ok)
        await early.join()
        assert prometheus.metrics_for(early) is None  # not enabled: no listener
        registry = CollectorRegistry()
        assert prometheus.enable(registry) is registry
        # Enabled on this loop's thread: the running scheduler is counted at once.
        metrics = prometheus.metrics_for(early)
        assert metrics is not None
        early.submit(ok)
        await early.join()
        late = JobScheduler()
        await late.start()
        try:
            late.submit(ok)
            late.submit(ok)
            await late.join()
        finally:
            await late.stop()
        found = samples(generate_latest(registry).decode())
    finally:
        await early.stop()
    late_metrics = prometheus.metrics_for(late)
    assert late_metrics is not None
    # Jobs before enable() are not counted; jobs after it are.
    assert total(found, "jobsched_jobs_total", scheduler=metrics.label) == 1
    assert total(found, "jobsched_jobs_total", scheduler=late_metrics.label) == 2


async def test_enable_from_another_thread_attaches_on_the_scheduler_loop() -> None:
    scheduler = JobScheduler()
    await scheduler.start()
    try:
        await asyncio.to_thread(prometheus.enable, CollectorRegistry())
        await asyncio.sleep(0)  # the attach was queued onto this loop
        assert prometheus.metrics_for(scheduler) is not None
    finally:
        await scheduler.stop()


def test_disabled_again_new_schedulers_are_not_counted() -> None:
    async def run() -> JobScheduler:
        scheduler = JobScheduler()
        await scheduler.start()
        await scheduler.stop()
        return scheduler

    prometheus.enable(CollectorRegistry())
    prometheus.disable()
    assert prometheus.metrics_for(asyncio.run(run())) is None


# ── without the extra, and switched off ────────────────────────────────
def jobsched(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jobsched", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def test_without_prometheus_client_the_plugin_is_a_failed_row_and_nothing_breaks() -> None:
    # prometheus_client made unimportable, as if the extra were not installed.
    code = (
        "import sys; sys.modules['prometheus_client'] = None\n"
        "from jobsched.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code, "plugins", "list", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    rows = {row["name"]: row for row in json.loads(run.stdout)}
    assert rows["prometheus"]["status"] == "failed"
    assert "pip install 'jobsched[prometheus]'" in rows["prometheus"]["error"]
    assert all(r["status"] == "loaded" for n, r in rows.items() if n != "prometheus")


def test_metrics_port_without_the_plugin_is_one_clear_line(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/jobs.db"
    run = jobsched(
        "worker", "--store", url, "--metrics-port", "0",
        env={"JOBSCHED_DISABLE_PLUGINS": "prometheus"},
    )  # fmt: skip
    assert run.returncode == 2
    assert run.stderr.startswith("jobsched: error: --metrics-port needs the prometheus plugin")
    assert len(run.stderr.strip().splitlines()) == 1


def test_metrics_port_out_of_range_is_refused(tmp_path: Path) -> None:
    run = jobsched("worker", "--store", f"sqlite:///{tmp_path}/j.db", "--metrics-port", "70000")
    assert run.returncode == 2
    assert "--metrics-port must be 0 to 65535, got 70000" in run.stderr


# ── a real worker process, scraped ─────────────────────────────────────
JOBS = 1000


def workload() -> Iterator[Submission]:
    """1,000 jobs: 700 complete, 100 fail once then complete, 100 fail, 100 time out."""
    for i in range(JOBS):
        kind = i % 10
        if kind == 0:  # one failure, then a retry that completes
            job = build_job("flaky-upload", {"path": f"f{i}", "failures": 1})
            yield Submission(job, retry={"policy": "fixed", "seconds": 0, "max_retries": 1})
        elif kind == 1:  # fails, never retried
            job = build_job("flaky-upload", {"path": f"f{i}", "failures": 9})
            yield Submission(job, retry="none")
        elif kind == 2:  # times out
            job = build_job("sleep", {"name": f"s{i}", "seconds": 3600})
            yield Submission(job, timeout=0.05, retry="none")
        else:
            yield Submission(build_job("sleep", {"name": f"s{i}", "seconds": 0}), retry="none")


@pytest.fixture(params=obs_support.STORES)
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return obs_support.store_url(request, tmp_path)


@pytest.mark.slow
async def test_scraped_worker_counts_equal_the_jobs_run(shared_url: str) -> None:
    async with Client(shared_url) as client:
        with obs_support.worker_process(shared_url, "--metrics-port", "0") as (_, port):
            assert port is not None
            ids = await client.submit_many(workload())
            infos = await client.wait_many(ids, timeout=300)
            # Every outcome is in the store, so the worker counted it already.
            text = await asyncio.to_thread(obs_support.scrape, port)
        # The cluster view, from the store alone (no worker needed).
        run = await asyncio.to_thread(jobsched, "status", "--store", shared_url, "--metrics")
    statuses: dict[str, int] = {}
    for info in infos:
        statuses[info.status.value] = statuses.get(info.status.value, 0) + 1
    assert statuses == {"completed": 800, "failed": 100, "timed_out": 100}

    found = samples(text)
    jobs_total = "jobsched_jobs_total"
    assert total(found, jobs_total) == JOBS
    assert total(found, jobs_total, type="sleep", status="completed") == 700
    assert total(found, jobs_total, type="flaky-upload", status="completed") == 100
    assert total(found, jobs_total, type="flaky-upload", status="failed") == 100
    assert total(found, jobs_total, type="sleep", status="timed_out") == 100
    attempts = "jobsched_attempts_total"
    assert total(found, attempts) == JOBS + 100  # the 100 retries
    assert total(found, attempts, type="flaky-upload", outcome="failed") == 200
    assert total(found, attempts, type="sleep", outcome="timed_out") == 100
    assert total(found, attempts, type="flaky-upload", error_type="ConnectionError") == 200
    assert total(found, "jobsched_attempt_duration_seconds_count") == JOBS + 100
    assert total(found, "jobsched_queue_wait_seconds_count") == JOBS + 100
    assert total(found, "jobsched_worker_slots") == 8
    assert total(found, "jobsched_oldest_due_age_seconds") == 0
    assert total(found, "jobsched_build_info", version=jobsched_version) == 1
    assert total(found, "jobsched_leases_held") == 0
    assert total(found, "jobsched_unfinished_jobs") == 0

    assert run.returncode == 0, run.stderr
    store = samples(run.stdout)
    assert total(store, "jobsched_store_jobs", status="completed") == 800
    assert total(store, "jobsched_store_jobs", status="failed") == 100
    assert total(store, "jobsched_store_jobs", status="timed_out") == 100
    assert total(store, "jobsched_store_jobs", status="pending") == 0


async def test_a_retried_attempt_waits_from_its_own_due_time_not_the_retrys(
    virtual_clock: VirtualClock, virtual_scheduler: Any
) -> None:
    # The listener hears an attempt only at its end: by a retry, run_at is
    # already the retry's due time, and the wait comes from previous_run_at.
    registry = private_registry()
    scheduler = virtual_scheduler(num_workers=1)
    async with scheduler:
        scheduler.submit(hang, timeout=3, retry="none")  # holds the only worker 3 s
        scheduler.submit(bad, retry={"policy": "fixed", "seconds": 2, "max_retries": 1})
        await virtual_clock.advance(3)  # bad's first attempt: due at 0, starts at 3
        await virtual_clock.advance(2)  # its retry: due at 5, starts at 5
        await scheduler.join()
        metrics = prometheus.metrics_for(scheduler)
        assert metrics is not None
        found = samples(generate_latest(registry).decode())
    waits = {"scheduler": metrics.label, "type": "bad"}
    assert total(found, "jobsched_queue_wait_seconds_count", **waits) == 2
    assert total(found, "jobsched_queue_wait_seconds_sum", **waits) == 3
    assert total(found, "jobsched_queue_wait_seconds_bucket", **waits, le="0.005") == 1
    assert total(found, "jobsched_queue_wait_seconds_bucket", **waits, le="2.5") == 1
    assert total(found, "jobsched_queue_wait_seconds_bucket", **waits, le="5.0") == 2
    hang_waits = {"scheduler": metrics.label, "type": "hang"}
    assert total(found, "jobsched_queue_wait_seconds_sum", **hang_waits) == 0


# ── the names of issue 24, and the ones kept for a release ────────────
async def test_deprecated_names_repeat_the_new_ones() -> None:
    registry = private_registry()
    scheduler = JobScheduler(num_workers=3)
    async with scheduler:
        for _ in range(4):
            scheduler.submit(ok)
        await scheduler.join()
        text = generate_latest(registry).decode()
    metrics = prometheus.metrics_for(scheduler)
    assert metrics is not None
    found = samples(text)
    mine = {"scheduler": metrics.label}
    new = {
        (n.replace("jobsched_attempt_duration", "jobsched_job_duration"), ls): v
        for (n, ls), v in found.items()
        if n.startswith("jobsched_attempt_duration_seconds") and ("scheduler", metrics.label) in ls
    }
    old = {
        key: v
        for key, v in found.items()
        if key[0].startswith("jobsched_job_duration_seconds")
        and ("scheduler", metrics.label) in key[1]
    }
    assert new == old and total(found, "jobsched_job_duration_seconds_count", **mine) == 4
    assert total(found, "jobsched_workers_total", **mine) == 3
    assert total(found, "jobsched_worker_slots", **mine) == 3
    # The help text says what replaces a deprecated name.
    assert "# HELP jobsched_workers_total Deprecated: jobsched_worker_slots" in text
    assert (
        "# HELP jobsched_job_duration_seconds Deprecated: jobsched_attempt_duration_seconds" in text
    )


async def test_build_info_names_the_versions() -> None:
    registry = private_registry()
    families = {
        f.name: f for f in text_string_to_metric_families(generate_latest(registry).decode())
    }
    (sample,) = families["jobsched_build_info"].samples
    assert families["jobsched_build_info"].type == "gauge"
    assert sample.value == 1
    assert sample.labels == {"version": jobsched_version, "python": platform.python_version()}


def failing(name: str) -> Any:
    error = type(name, (Exception,), {})

    async def fail() -> None:
        raise error("a message that differs every time")

    fail.__qualname__ = "fail"  # one job type, many exception types
    return fail


async def test_error_type_keeps_its_cardinality_capped() -> None:
    registry = private_registry()
    scheduler = JobScheduler(num_workers=4)
    names = [f"Error{i:02d}" for i in range(prometheus.MAX_ERROR_TYPES + 5)]
    async with scheduler:
        for name in names:
            scheduler.submit(failing(name), retry="none")
        scheduler.submit(failing(names[0]), retry="none")  # a name seen before: its own series
        await scheduler.join()
        found = samples(generate_latest(registry).decode())
    metrics = prometheus.metrics_for(scheduler)
    assert metrics is not None
    by_error = {
        dict(ls)["error_type"]: v
        for (n, ls), v in found.items()
        if n == "jobsched_attempts_total" and ("scheduler", metrics.label) in ls
    }
    assert len(by_error) == prometheus.MAX_ERROR_TYPES + 1
    assert sum(by_error.values()) == len(names) + 1
    assert by_error["other"] == 5
    # Which names got a series depends on the order the attempts ended in;
    # the total per name does not.
    assert set(by_error) <= {*names, "other"}


async def test_an_error_that_names_no_exception_type_is_other(
    virtual_clock: VirtualClock, virtual_scheduler: Any
) -> None:
    registry = private_registry()
    scheduler = virtual_scheduler(num_workers=1)
    async with scheduler:
        job_id = scheduler.submit(hang, timeout=None, retry="none")
        await virtual_clock.advance(0)
        await scheduler.stop(cancel_running=True)  # the attempt ends "cancelled"
        metrics = prometheus.metrics_for(scheduler)
        assert metrics is not None
        found = samples(generate_latest(registry).decode())
    assert scheduler.get(job_id).status is JobStatus.CANCELLED
    mine = {"scheduler": metrics.label}
    assert total(found, "jobsched_attempts_total", **mine, outcome="cancelled", error_type="") == 1
    # The error_type of free text, checked on the parser the fold uses.
    assert metrics._error_type("lease expired 3 times") == "other"
    assert metrics._error_type("pkg.mod.CustomError: boom") == "pkg.mod.CustomError"


async def test_queue_wait_buckets_reach_an_hour(
    virtual_clock: VirtualClock, virtual_scheduler: Any
) -> None:
    registry = private_registry()
    scheduler = virtual_scheduler(num_workers=1)
    async with scheduler:
        scheduler.pause_queue()
        scheduler.submit(ok)
        await virtual_clock.advance(1000)
        scheduler.resume_queue()
        await scheduler.join()
        metrics = prometheus.metrics_for(scheduler)
        assert metrics is not None
        found = samples(generate_latest(registry).decode())
    waits = {"scheduler": metrics.label, "type": "ok"}
    name = "jobsched_queue_wait_seconds_bucket"
    assert max(prometheus.WAIT_BUCKETS) == 3600
    assert total(found, name, **waits, le="600.0") == 0
    assert total(found, name, **waits, le="1200.0") == 1
    assert total(found, "jobsched_queue_wait_seconds_sum", **waits) == 1000
    # Run times keep their own buckets, which end at five minutes.
    assert total(found, "jobsched_attempt_duration_seconds_bucket", **waits, le="3600.0") == 0


async def test_oldest_due_age_counts_due_jobs_only(
    virtual_clock: VirtualClock, virtual_scheduler: Any
) -> None:
    registry = private_registry()
    scheduler = virtual_scheduler(num_workers=1)
    async with scheduler:
        scheduler.pause_queue()  # nothing starts: every due job waits
        blocker = scheduler.submit(ok)
        await virtual_clock.advance(10)
        scheduler.submit(ok, depends_on=[blocker])  # older than the next, but blocked
        await virtual_clock.advance(5)
        scheduler.submit(ok)
        scheduler.submit(ok, delay=3600)  # not due
        await virtual_clock.advance(20)
        metrics = prometheus.metrics_for(scheduler)
        assert metrics is not None
        label = {"scheduler": metrics.label}
        found = samples(generate_latest(registry).decode())
        assert total(found, "jobsched_oldest_due_age_seconds", **label) == 35  # the blocker
        scheduler.cancel(blocker)  # its dependent is cancelled with it
        found = samples(generate_latest(registry).decode())
        assert total(found, "jobsched_oldest_due_age_seconds", **label) == 20
        scheduler.resume_queue()
        await virtual_clock.advance(0)
        found = samples(generate_latest(registry).decode())
        assert total(found, "jobsched_oldest_due_age_seconds", **label) == 0
        await scheduler.stop(cancel_running=True)


async def test_limit_and_in_use_gauges() -> None:
    registry = private_registry()
    limits = Limits(executors={"async": 3}, job_types={"hang": 1})
    scheduler = JobScheduler(num_workers=4, limits=limits)
    await scheduler.start()
    try:
        scheduler.submit(hang, timeout=None)
        scheduler.submit(hang, timeout=None)  # parked: the job-type limit is 1
        while scheduler.kernel.running == 0:
            await asyncio.sleep(0)
        metrics = prometheus.metrics_for(scheduler)
        assert metrics is not None
        found = samples(generate_latest(registry).decode())
    finally:
        await scheduler.stop(cancel_running=True)
    mine = {"scheduler": metrics.label}
    assert total(found, "jobsched_limit", **mine, kind="executor", name="async") == 3
    assert total(found, "jobsched_limit", **mine, kind="job_type", name="hang") == 1
    assert total(found, "jobsched_limit_in_use", **mine, kind="executor", name="async") == 1
    assert total(found, "jobsched_limit_in_use", **mine, kind="job_type", name="hang") == 1
    held = {"kind": "job_type", "name": "hang", "limit": "job_type:hang"}
    assert total(found, "jobsched_limit_held_back_total", **mine, **held) == 1


# ── recorded on the loop, folded elsewhere ────────────────────────────
async def test_records_wait_for_a_scrape_and_a_stop_folds_them() -> None:
    scheduler = JobScheduler(num_workers=2)
    prometheus.enable(CollectorRegistry())
    await scheduler.start()
    metrics = prometheus.metrics_for(scheduler)
    assert metrics is not None
    for _ in range(5):
        scheduler.submit(ok)
    scheduler.submit(bad, retry={"policy": "fixed", "seconds": 0, "max_retries": 1})
    await scheduler.join()
    # Recorded, not counted: the loop did no counting per attempt.
    assert metrics.pending_records() == 5 + 2
    assert metrics._by_name == {}
    await scheduler.stop()
    assert metrics.pending_records() == 0  # a stopped scheduler's jobs are not held
    (counts,) = [c for c in metrics.types() if c.name == "ok"]
    assert counts.jobs() == [5, 0, 0, 0]


async def test_a_loop_with_no_scrape_folds_what_piled_up(monkeypatch: pytest.MonkeyPatch) -> None:
    scheduler = JobScheduler(num_workers=2)
    prometheus.enable(CollectorRegistry())
    async with scheduler:
        metrics = prometheus.metrics_for(scheduler)
        assert metrics is not None
        scheduler.submit(ok)
        await scheduler.join()
        loop = asyncio.get_running_loop()
        metrics._check(loop)  # the once-a-second check: 1 record is below FOLD_AT
        assert metrics.pending_records() == 1
        monkeypatch.setattr(prometheus, "FOLD_AT", 1)
        metrics._check(loop)
        assert metrics.pending_records() == 0
        assert [c.jobs() for c in metrics._by_name.values()] == [[1, 0, 0, 0]]


def test_a_scrape_from_another_thread_while_jobs_end_loses_nothing() -> None:
    # Appends on the loop thread and folds on this one interleave; every
    # attempt is counted exactly once in the end.
    registry = private_registry()
    done = threading.Event()
    scrapes = 0

    def scrape_until_done() -> None:
        nonlocal scrapes
        while not done.is_set():
            generate_latest(registry)
            scrapes += 1

    async def run() -> JobScheduler:
        scheduler = JobScheduler(num_workers=8)
        async with scheduler:
            for _ in range(20_000):
                scheduler.submit(ok)
            await scheduler.join()
        return scheduler

    scraper = threading.Thread(target=scrape_until_done)
    scraper.start()
    try:
        scheduler = asyncio.run(run())
    finally:
        done.set()
        scraper.join()
    metrics = prometheus.metrics_for(scheduler)
    assert metrics is not None and scrapes >= 1
    found = samples(generate_latest(registry).decode())
    mine = {"scheduler": metrics.label}
    assert total(found, "jobsched_jobs_total", **mine) == 20_000
    assert total(found, "jobsched_attempt_duration_seconds_count", **mine) == 20_000
    assert total(found, "jobsched_queue_wait_seconds_count", **mine) == 20_000
