"""Submit jobs once a Django transaction commits (docs/integrations.md).

``submit_on_commit(client, job)`` inside ``transaction.atomic()`` submits the
job when the transaction commits, through Django's
``transaction.on_commit``: a rolled-back transaction submits nothing, and a
worker never runs a job for a row it cannot see yet. It works with every
store, as the submit happens after the commit: a `BlockingClient` (a
PostgreSQL or shared SQLite store), or an in-process `JobScheduler` or
`LocalClient` (whose ``submit_threadsafe`` hands the job to its loop).

On PostgreSQL a job can also be inserted *in* the transaction, so that the
row and the job commit or vanish together (``client.submit(job,
conn=...)``, docs/client.md); this helper is for the other stores, and for
jobs that should not hold up the commit.

This module uses jobsched's public names only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from jobsched import BlockingClient, Client, Job, JobScheduler, LocalClient, Submission, Workflow

try:
    from django.db import transaction
except ImportError as exc:
    raise ImportError("jobsched.integrations.django needs Django: pip install django") from exc

__all__ = ["submit_many_on_commit", "submit_on_commit"]

#: What the helpers submit through.
OnCommitClient = BlockingClient | JobScheduler | LocalClient


def submit_on_commit(
    client: OnCommitClient,
    job: Job | Workflow,
    *,
    using: str | None = None,
    robust: bool = False,
    then: Callable[[str], object] | None = None,
    **options: Any,
) -> None:
    """Submit `job` through `client` when the current transaction of the
    database `using` (Django's default: ``"default"``) commits.

    `options` are `Client.submit`'s (``delay``, ``depends_on``, ``key``,
    ``unique_key``, ``priority``...). `then` is called with the job's id
    once it is submitted. Outside ``atomic()`` (autocommit) the job is
    submitted at once, as Django runs such callbacks. A submit that fails
    after the commit raises from the commit, as every ``on_commit`` callback
    does, or, with `robust`, is logged by Django and the other callbacks
    still run. `client` is a `BlockingClient`, a `JobScheduler` or a
    `LocalClient` (an in-process scheduler's job is handed to its loop: an
    error found there, such as an unknown dependency, is logged, not raised).
    """
    submit = _submitter(client)

    def on_commit() -> None:
        job_id = submit(job, **options)
        if then is not None:
            then(job_id)

    transaction.on_commit(on_commit, using=using, robust=robust)


def submit_many_on_commit(
    client: BlockingClient,
    jobs: Iterable[Job | Submission | Workflow],
    *,
    using: str | None = None,
    robust: bool = False,
    then: Callable[[list[str]], object] | None = None,
) -> None:
    """`BlockingClient.submit_many` of `jobs` when the current transaction of
    `using` commits (all or none of them, as `submit_many` stores them);
    `then` gets their ids."""
    if not isinstance(client, BlockingClient):
        raise TypeError(
            f"submit_many_on_commit() takes a BlockingClient, got {client!r}; "
            "for an in-process scheduler, use submit_on_commit() per job"
        )
    batch = list(jobs)

    def on_commit() -> None:
        job_ids = client.submit_many(batch)
        if then is not None:
            then(job_ids)

    transaction.on_commit(on_commit, using=using, robust=robust)


def _submitter(client: object) -> Callable[..., str]:
    """The plain call that submits through `client` from Django's thread."""
    if isinstance(client, BlockingClient):
        return client.submit
    if isinstance(client, JobScheduler):
        return client.submit_threadsafe
    if isinstance(client, LocalClient):
        return client.scheduler.submit_threadsafe
    if isinstance(client, Client):
        raise TypeError(
            f"{client!r} is an async Client, whose calls are coroutines of its own loop; "
            "Django runs on_commit callbacks as plain calls: give a BlockingClient on the "
            "same store"
        )
    raise TypeError(
        f"submit_on_commit() takes a BlockingClient, a JobScheduler or a LocalClient, "
        f"got {client!r}"
    )
