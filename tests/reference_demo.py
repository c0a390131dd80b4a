"""The reference design's demo, verbatim except for its imports.

The reference defined everything in one module; here the scheduler comes from
``jobsched`` and the example jobs from ``jobsched_contrib``. Nothing below the
imports is changed. ``tests/test_contrib.py`` runs this file as a script.
"""

from __future__ import annotations

import asyncio
import logging
import random
from typing import List  # noqa: UP035 - the reference's own spelling

from jobsched import Job, JobPriority, JobScheduler, JobStatus, PriorityStrategy, RetryPolicy
from jobsched_contrib import CsvExportJob, EmailJob, FlakyUploadJob, PrimeCountJob, SleepJob


async def _demo() -> None:
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
    beats: List[Job] = []  # noqa: UP006

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


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(_demo())


if __name__ == "__main__":
    main()
