"""A worker process for the cluster tests: ``python pg_worker.py URL WORKERS [SCHEDULE_S]``.

Runs `jobsched.worker.run_worker` with the test job types (their side
tables are at ``$PG_JOBS_DSN``, in schema ``$PG_JOBS_SCHEMA``); prints ``ready
<identity>`` once it is serving. With SCHEDULE_S it also registers the shared
recurring schedule "tick" every SCHEDULE_S seconds.
"""

from __future__ import annotations

import asyncio
import os
import sys

import structlog

import pg_jobs
from jobsched import JobScheduler, PluginManager
from jobsched.worker import run_worker


def main() -> None:
    # The application configures logging; stdout is kept for the "ready" line.
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    url, workers = sys.argv[1], int(sys.argv[2])
    schedule = float(sys.argv[3]) if len(sys.argv) > 3 else None
    schema = os.environ.get("PG_JOBS_SCHEMA", "")

    def started(scheduler: JobScheduler) -> None:
        if schedule is not None:
            job = pg_jobs.Record(dsn=os.environ["PG_JOBS_DSN"], schema=schema, tag="tick")
            scheduler.schedule_recurring(lambda: job, schedule)
        print("ready", scheduler.kernel.backend.identity, flush=True)  # type: ignore[attr-defined]

    asyncio.run(
        run_worker(
            url,
            workers=workers,
            plugins=PluginManager([pg_jobs], autoload=False),
            on_started=started,
        )
    )


if __name__ == "__main__":
    main()
