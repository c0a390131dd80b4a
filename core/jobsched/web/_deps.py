"""A job's dependency neighbourhood, through the operator API only.

Upstream is in the job itself (``JobInfo.depends_on``). Downstream has no
index in the operator API: a dependent is always submitted after what it
depends on, so the jobs submitted since the job are read back, newest first,
up to `DEPENDENT_SCAN` of them (listed rows come without ``depends_on``:
each candidate is read with ``get``).
"""

from __future__ import annotations

from typing import Any

from jobsched import UnknownJobError

#: How many jobs submitted after a job are looked through for its dependents.
DEPENDENT_SCAN = 500
_PAGE = 100


async def dependents(client: Any, job: Any, scan: int = DEPENDENT_SCAN) -> list[Any]:
    """The jobs (`JobInfo`) that depend on `job`, oldest first, among the `scan`
    jobs submitted last since it."""
    candidates: list[str] = []
    offset = 0
    while len(candidates) < scan:
        page = await client.page(limit=_PAGE, offset=offset)
        newer = [j for j in page.jobs if j.submitted_at >= job.submitted_at]
        candidates += [j.job_id for j in newer if j.job_id != job.job_id]
        if len(newer) < len(page.jobs) or len(page.jobs) < _PAGE:
            break  # reached jobs older than `job`, or the end
        offset += _PAGE
    found = []
    for job_id in reversed(candidates[:scan]):
        try:
            info = await client.get(job_id)
        except UnknownJobError:  # purged meanwhile
            continue
        if job.job_id in info.depends_on:
            found.append(info)
    return found


async def upstream(client: Any, job: Any) -> list[Any]:
    """What `job` depends on, in its order: a `JobInfo` each, None for one purged since."""
    found: list[Any] = []
    for job_id in job.depends_on:
        try:
            found.append(await client.get(job_id))
        except UnknownJobError:
            found.append(None)
    return found
