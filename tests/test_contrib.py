"""The contrib job types: the reference's example jobs, registered by entry point."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from jobsched import JobScheduler, JobStatus, PluginManager, RetryPolicy, job_type_info
from jobsched_contrib import CsvExportJob, EmailJob, FlakyUploadJob, PrimeCountJob, SleepJob

HERE = Path(__file__).resolve().parent


@pytest.mark.slow
def test_the_reference_demo_runs_with_only_its_imports_changed() -> None:
    result = subprocess.run(
        [sys.executable, str(HERE / "reference_demo.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    rows = {}
    for line in result.stdout.splitlines()[3:12]:
        name, rest = line[1:35].strip(), line[36:].split(maxsplit=2)
        rows[name] = (rest[0], rest[1], rest[2] if len(rest) > 2 else "")
    notify = rows.pop("email team@corp: upload done")
    assert notify[:2] == ("cancelled", "attempts=0")
    assert notify[2].startswith("upstream job-") and notify[2].endswith(" failed")
    assert rows == {
        "export orders": ("completed", "attempts=1", "4200"),
        "count primes < 200000": ("completed", "attempts=1", "17984"),
        "email finance@corp: daily report": ("completed", "attempts=1", "sent to finance@corp"),
        "email oncall@corp: disk 91%": ("completed", "attempts=1", "sent to oncall@corp"),
        "upload s3://bucket/report.csv": ("completed", "attempts=3", "uploaded"),
        "upload s3://bucket/broken.csv": (
            "failed",
            "attempts=4",
            "ConnectionError: attempt 4: connection reset",
        ),
        "slow-endpoint": ("timed_out", "attempts=1", "timed out after 0.1s"),
        "email me@corp: reminder": ("cancelled", "attempts=0", "cancelled"),
    }
    assert " recurring heartbeat completed 3 runs, then was cancelled" in result.stdout
    assert " peak concurrent jobs: 3 (workers: 3)" in result.stdout


def test_the_contrib_plugin_registers_the_five_job_types() -> None:
    plugins = PluginManager(autoload=False)
    record = next(r for r in plugins.records() if r.name == "contrib")
    assert record.builtin and record.status == "loaded"
    assert record.provides == {
        "job_types": ("csv-export", "email", "flaky-upload", "prime-count", "sleep")
    }
    expected = {
        "email": (EmailJob, "async", ["to", "subject", "latency"]),
        "flaky-upload": (FlakyUploadJob, "async", ["path", "failures"]),
        "sleep": (SleepJob, "async", ["name", "seconds"]),
        "csv-export": (CsvExportJob, "thread", ["table", "rows"]),
        "prime-count": (PrimeCountJob, "process", ["n"]),
    }
    for name, (cls, model, arguments) in expected.items():
        info = job_type_info(name, plugins)
        assert info.factory is cls
        assert info.model == model
        assert [a.name for a in info.arguments] == arguments


def test_reference_constructor_signatures_and_names() -> None:
    assert EmailJob("a@corp", "hi").name == "email a@corp: hi"
    assert EmailJob("a@corp", "hi").latency == 0.05
    assert FlakyUploadJob("s3://x", failures=1).name == "upload s3://x"
    assert SleepJob("nap", 0.5, timeout=1).name == "nap"
    assert CsvExportJob("orders").rows == 1_000
    assert CsvExportJob("orders").name == "export orders"
    assert PrimeCountJob(10).name == "count primes < 10"
    assert PrimeCountJob(100).run_sync() == 25
    assert PrimeCountJob(2).run_sync() == 0


async def test_the_contrib_jobs_behave_like_the_reference() -> None:
    scheduler = JobScheduler("fifo", num_workers=4, rng=random.Random(1))
    fast = RetryPolicy(max_retries=2, base_delay=0.001, jitter=False)
    ids = {
        "email": scheduler.submit(EmailJob("a@corp", "s", latency=0.001)),
        "flaky": scheduler.submit(FlakyUploadJob("p", failures=2, retry=fast)),
        "dead": scheduler.submit(FlakyUploadJob("p", failures=3, retry=fast)),
        "sleep": scheduler.submit(SleepJob("nap", 0.001)),
        "csv": scheduler.submit(CsvExportJob("t", rows=7)),
    }
    async with scheduler:
        await scheduler.join()
    jobs = {key: scheduler.get(job_id) for key, job_id in ids.items()}
    assert jobs["email"].result == "sent to a@corp"
    assert (jobs["flaky"].status, jobs["flaky"].attempts, jobs["flaky"].result) == (
        JobStatus.COMPLETED,
        3,
        "uploaded",
    )
    assert jobs["dead"].status is JobStatus.FAILED
    assert jobs["dead"].last_error == "ConnectionError: attempt 3: connection reset"
    assert jobs["sleep"].result == 0.001
    assert jobs["csv"].result == 7
