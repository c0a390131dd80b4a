"""A job's dependency neighbourhood, through the operator API only.

Upstream is in the job itself (``JobInfo.depends_on``); downstream is
``client.dependents(job_id)``, one indexed store query however many jobs the
store holds. The neighbours are then read at once with ``client.jobs(ids=...)``
for their type, name and status. (The job page draws the whole workflow:
`jobsched.web._workflow`.)
"""

from __future__ import annotations

from jobsched import JobInfo, OperatorAPI


async def dependents(client: OperatorAPI, job: JobInfo) -> list[JobInfo]:
    """The jobs that depend on `job`, in submit order; one purged since is left out."""
    ids = await client.dependents(job.job_id)
    return await client.jobs(ids=ids) if ids else []


async def upstream(client: OperatorAPI, job: JobInfo) -> list[JobInfo | None]:
    """What `job` depends on, in its order: a `JobInfo` each, None for one purged since."""
    if not job.depends_on:
        return []
    found = {info.job_id: info for info in await client.jobs(ids=job.depends_on)}
    return [found.get(job_id) for job_id in job.depends_on]
