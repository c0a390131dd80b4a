"""The ``structlog`` listener: logs every job transition through structlog.

Each transition is one event, ``job.transition``, at INFO level, with the job
id, name, old and new status, attempt and error; a job a shutdown hands back
to its store (to run again) is ``job.handed_back`` instead of a transition to
``cancelled``. The listener is added when a
scheduler starts, and only if structlog is configured (jobsched is a library:
it never configures structlog, and an unconfigured structlog would print
everything) and INFO is enabled. Otherwise it is not installed at all and
costs nothing.
"""

from __future__ import annotations

import logging
from typing import Any

import structlog

from jobsched import Job, JobScheduler, JobStatus, hookimpl

LEVEL = logging.INFO
logger = structlog.get_logger("jobsched.transitions")


def enabled() -> bool:
    """True when structlog is configured and lets INFO through."""
    if not structlog.is_configured():
        return False
    bound: Any = logger.bind()
    check = getattr(bound, "is_enabled_for", None) or getattr(bound, "isEnabledFor", None)
    return bool(check(LEVEL)) if check is not None else True


def log_transition(job: Job, old: JobStatus, new: JobStatus) -> None:
    if job.handed_back:
        # A shutdown ended the attempt and the store keeps the job to run
        # again: not a cancel, whatever this scheduler's own record says.
        logger.info(
            "job.handed_back",
            job_id=job.job_id,
            job_name=job.name,
            old=old.value,
            attempt=job.attempts,
            reason=job.last_error,
        )
        return
    logger.info(
        "job.transition",
        job_id=job.job_id,
        job_name=job.name,
        old=old.value,
        new=new.value,
        attempt=job.attempts,
        error=job.last_error if new is not JobStatus.COMPLETED else None,
    )


@hookimpl
def jobsched_scheduler_started(scheduler: JobScheduler) -> None:
    if enabled():
        scheduler.add_listener(log_transition)
