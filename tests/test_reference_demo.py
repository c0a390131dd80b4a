"""The reference design's demo program, run on jobsched by changing only its imports.

The example jobs and `_demo` below are the reference's (job_scheduler.py),
line for line, except that `_demo` returns what it printed so the test can
check every outcome the reference describes.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import pytest

from jobsched import (
    AsyncJob,
    BlockingJob,
    CpuBoundJob,
    Job,
    JobPriority,
    JobScheduler,
    JobStatus,
    PriorityStrategy,
    RetryPolicy,
)

pytestmark = pytest.mark.timeout(60)


# ════════════════════════════════════════════════════════════════════════
# EXAMPLE JOBS (the reference's)
# ════════════════════════════════════════════════════════════════════════
class EmailJob(AsyncJob):
    """I/O-bound: awaits the network, so it belongs on the event loop."""

    def __init__(self, to: str, subject: str, latency: float = 0.05, **kw: Any) -> None:
        super().__init__(f"email {to}: {subject}", **kw)
        self.to = to
        self.latency = latency

    async def run(self) -> str:
        await asyncio.sleep(self.latency)
        return f"sent to {self.to}"


class FlakyUploadJob(AsyncJob):
    """Fails its first `failures` attempts, then succeeds. Exercises retries."""

    def __init__(self, path: str, failures: int, **kw: Any) -> None:
        super().__init__(f"upload {path}", **kw)
        self.failures = failures

    async def run(self) -> str:
        await asyncio.sleep(0.01)
        if self.attempts <= self.failures:
            raise ConnectionError(f"attempt {self.attempts}: connection reset")
        return "uploaded"


class SleepJob(AsyncJob):
    def __init__(self, name: str, seconds: float, **kw: Any) -> None:
        super().__init__(name, **kw)
        self.seconds = seconds

    async def run(self) -> float:
        await asyncio.sleep(self.seconds)
        return self.seconds


class CsvExportJob(BlockingJob):
    """Blocking I/O (a sync DB driver, say): runs in the thread pool."""

    def __init__(self, table: str, rows: int = 1_000, **kw: Any) -> None:
        super().__init__(f"export {table}", **kw)
        self.rows = rows

    def run_sync(self) -> int:
        time.sleep(0.02)  # releases the GIL while "waiting on the DB"
        return self.rows


class PrimeCountJob(CpuBoundJob):
    """CPU-bound: counts primes below n. Runs in a separate process."""

    def __init__(self, n: int, **kw: Any) -> None:
        super().__init__(f"count primes < {n}", **kw)
        self.n = n

    def run_sync(self) -> int:
        sieve = bytearray([1]) * self.n
        sieve[:2] = b"\x00\x00"
        for i in range(2, int(self.n**0.5) + 1):
            if sieve[i]:
                sieve[i * i :: i] = bytearray(len(range(i * i, self.n, i)))
        return sum(sieve)


# ════════════════════════════════════════════════════════════════════════
# DEMO (the reference's)
# ════════════════════════════════════════════════════════════════════════
async def _demo() -> dict[str, Any]:
    scheduler = JobScheduler(PriorityStrategy(), num_workers=3, rng=random.Random(7))
    fast_retry = RetryPolicy(max_retries=3, base_delay=0.02, jitter=False)
    export = CsvExportJob("orders", rows=4_200)
    primes = PrimeCountJob(200_000, timeout=30)
    report = EmailJob("finance@corp", "daily report")
    alert = EmailJob("oncall@corp", "disk 91%", priority=JobPriority.CRITICAL)
    flaky = FlakyUploadJob("s3://bucket/report.csv", failures=2, retry=fast_retry)
    dead = FlakyUploadJob("s3://bucket/broken.csv", failures=99, retry=fast_retry)
    slow = SleepJob("slow-endpoint", 5.0, timeout=0.1, retry=RetryPolicy(max_retries=0))
    notify = EmailJob("team@corp", "upload done")
    later = EmailJob("me@corp", "reminder")
    for job in (export, primes, alert, flaky, dead, slow, later):
        scheduler.submit(job)
    scheduler.submit(report, depends_on=[export.job_id, primes.job_id])
    scheduler.submit(notify, depends_on=[dead.job_id])  # upstream will fail -> cancelled
    scheduler.cancel(later.job_id)
    # Recurring: stop after the third heartbeat completes (fires at ~0, 0.1, 0.2 s).
    beats_done = asyncio.Event()
    beats: list[Job] = []

    def count_heartbeats(job: Job, old: JobStatus, new: JobStatus) -> None:
        if job.name == "email ops@corp: heartbeat" and new is JobStatus.COMPLETED:
            beats.append(job)
            if len(beats) == 3:
                beats_done.set()

    scheduler.add_listener(count_heartbeats)
    heartbeat = scheduler.schedule_recurring(
        lambda: EmailJob("ops@corp", "heartbeat"), interval=0.1
    )
    await scheduler.start()
    await beats_done.wait()
    scheduler.cancel_recurring(heartbeat)
    await scheduler.join()
    await scheduler.stop()
    print("=" * 72)
    print(" JOB SCHEDULER DEMO")
    print("=" * 72)
    shown = [export, primes, report, alert, flaky, dead, slow, notify, later]
    for job in shown:
        detail = job.result if job.status is JobStatus.COMPLETED else job.last_error
        print(f" {job.name:<34} {job.status.value:<10} attempts={job.attempts} {detail}")
    print(f" recurring heartbeat completed {len(beats)} runs, then was cancelled")
    print(f" peak concurrent jobs: {scheduler.peak_running} (workers: 3)")
    return {"scheduler": scheduler, "beats": beats, **{j.name: j for j in shown}}


async def test_the_reference_demo_runs_on_jobsched(capsys: pytest.CaptureFixture[str]) -> None:
    out = await _demo()
    printed = capsys.readouterr().out

    def outcome(name: str) -> tuple[JobStatus, int, Any]:
        job = out[name]
        detail = job.result if job.status is JobStatus.COMPLETED else job.last_error
        return job.status, job.attempts, detail

    c, f, t, x = JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.TIMED_OUT, JobStatus.CANCELLED
    assert outcome("export orders") == (c, 1, 4200)
    assert outcome("count primes < 200000") == (c, 1, 17984)
    assert outcome("email finance@corp: daily report") == (c, 1, "sent to finance@corp")
    assert outcome("email oncall@corp: disk 91%") == (c, 1, "sent to oncall@corp")
    assert outcome("upload s3://bucket/report.csv") == (c, 3, "uploaded")
    dead = out["upload s3://bucket/broken.csv"]
    assert outcome(dead.name) == (f, 4, "ConnectionError: attempt 4: connection reset")
    assert outcome("slow-endpoint") == (t, 1, "timed out after 0.1s")
    assert outcome("email team@corp: upload done") == (x, 0, f"upstream {dead.job_id} failed")
    assert outcome("email me@corp: reminder") == (x, 0, "cancelled")

    report = out["email finance@corp: daily report"]
    for upstream in ("export orders", "count primes < 200000"):
        assert out[upstream].finished_at <= report.started_at, "the report waited for both"
    assert len(out["beats"]) == 3
    assert all(b.status is JobStatus.COMPLETED for b in out["beats"])
    assert out["scheduler"].peak_running == 3
    assert "recurring heartbeat completed 3 runs, then was cancelled" in printed
    assert "peak concurrent jobs: 3 (workers: 3)" in printed
    assert " count primes < 200000" in printed and "17984" in printed
