"""A job's dependency neighbourhood, through the operator API only.

Upstream is in the job itself (``JobInfo.depends_on``); downstream is
``client.dependents(job_id)``, one indexed store query however many jobs the
store holds. Each neighbour shown is then read with ``get`` for its type,
name and status.
"""

from __future__ import annotations

from jobsched import JobInfo, OperatorAPI, UnknownJobError


async def dependents(
    client: OperatorAPI, job: JobInfo, limit: int | None = None
) -> tuple[list[JobInfo], list[str]]:
    """The jobs that depend on `job`: the first `limit` of them (None: all) as
    `JobInfo` records in submit order, and the ids of all of them.

    A dependent purged between the two reads is left out of the records.
    """
    ids = await client.dependents(job.job_id)
    found = []
    for job_id in ids if limit is None else ids[:limit]:
        try:
            found.append(await client.get(job_id))
        except UnknownJobError:  # purged meanwhile
            continue
    return found, ids


async def upstream(client: OperatorAPI, job: JobInfo) -> list[JobInfo | None]:
    """What `job` depends on, in its order: a `JobInfo` each, None for one purged since."""
    found: list[JobInfo | None] = []
    for job_id in job.depends_on:
        try:
            found.append(await client.get(job_id))
        except UnknownJobError:
            found.append(None)
    return found
