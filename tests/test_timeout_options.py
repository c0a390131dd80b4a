"""What timeout a job runs with: `timeout=False` means "no timeout" on every
submit (item 4), and tasks and plain functions have none unless asked, while
the reference facade's `Job` classes keep their 30 s (item 3's defaults).

A worker's view is checked by what it reads back from the store (the job it
builds from the row), never by waiting for a 30 s timeout.
"""

from __future__ import annotations

from typing import Any

import pytest

from jobsched import (
    BlockingClient,
    BlockingJob,
    Client,
    Job,
    JobScheduler,
    JobStatus,
    LocalClient,
    Submission,
    build_job,
    task,
)
from kernel_support import join
from shared_support import Target

pytestmark = pytest.mark.timeout(60)

NOT_GIVEN = object()  # leave the keyword out
#: submit(..., timeout=GIVEN) -> the job's timeout, for a job type whose own is 30 s.
CASES = [(NOT_GIVEN, 30.0), (False, None), (None, None), (5, 5.0)]
IDS = ["not given", "False", "None", "5"]


def email() -> Job:
    """A reference-style job type (`jobsched_contrib`): its own timeout is 30 s."""
    return build_job("email", {"to": "a@example.com", "subject": "hi", "latency": 0})


def timeout_option(given: Any) -> dict[str, Any]:
    return {} if given is NOT_GIVEN else {"timeout": given}


class TimeoutSeen:
    """A listener: the timeout of each job as a worker starts it."""

    def __init__(self) -> None:
        self.seen: dict[str, float | None] = {}

    def __call__(self, job: Job, old: JobStatus, new: JobStatus) -> None:
        if new is JobStatus.RUNNING:
            self.seen[job.job_id] = job.timeout


async def run_on_a_worker(url: str, job_ids: list[str]) -> dict[str, float | None]:
    """Run the stored jobs on a worker of the shared store at `url`; their timeouts."""
    worker = JobScheduler(store=url, shared=True, num_workers=2)
    seen = TimeoutSeen()
    worker.add_listener(seen)
    async with worker, Client(url) as client:
        await client.wait_many(job_ids, timeout=30)
    return seen.seen


@pytest.mark.parametrize(("given", "expected"), CASES, ids=IDS)
async def test_client_submit_timeout_is_stored_and_run_on_shared_stores(
    target: Target, given: Any, expected: float | None
) -> None:
    async with Client(target.url) as client:
        job_id = await client.submit(email(), **timeout_option(given))
        stored = (await client.get(job_id)).options.get("timeout", 30.0)
        (batch_id,) = await client.submit_many([_submission(given)])
    assert stored == expected, "as the store keeps it (left out: 30 s)"
    seen = await run_on_a_worker(target.url, [job_id, batch_id])
    assert seen == {job_id: expected, batch_id: expected}, "as the worker runs it"


def _submission(given: Any) -> Submission:
    return Submission(email(), **timeout_option(given))


@pytest.mark.parametrize(("given", "expected"), CASES, ids=IDS)
async def test_local_client_submit_timeout_in_memory(given: Any, expected: float | None) -> None:
    scheduler = JobScheduler(num_workers=2)
    seen = TimeoutSeen()
    scheduler.add_listener(seen)
    async with scheduler, LocalClient(scheduler) as client:
        job_id = await client.submit(email(), **timeout_option(given))
        (batch_id,) = await client.submit_many([_submission(given)])
        assert (await client.get(job_id)).options.get("timeout", 30.0) == expected
        await join(scheduler)
    assert seen.seen == {job_id: expected, batch_id: expected}


@pytest.mark.parametrize(("given", "expected"), CASES, ids=IDS)
def test_blocking_client_submit_timeout(tmp_path: Any, given: Any, expected: float | None) -> None:
    with BlockingClient(f"sqlite:///{tmp_path / 'jobs.db'}") as client:
        job_id = client.submit(email(), **timeout_option(given))
        assert client.get(job_id).options.get("timeout", 30.0) == expected


# ── the defaults ───────────────────────────────────────────────────────
@task
def plain_task(n: int) -> int:
    return n + 1


@task(timeout=5)
def timed_task(n: int) -> int:
    return n


def work() -> str:
    return "done"


class Reference(BlockingJob):
    def run_sync(self) -> str:
        return "done"


def test_a_task_has_no_timeout_unless_asked() -> None:
    assert plain_task.job(1).timeout is None
    assert plain_task.options(timeout=7).job(1).timeout == 7
    assert plain_task.options(timeout=False).job(1).timeout is None
    assert timed_task.job(1).timeout == 5
    assert timed_task.options(timeout=None).job(1).timeout is None


async def test_plain_functions_have_no_timeout_unless_asked() -> None:
    scheduler = JobScheduler()
    async with scheduler, LocalClient(scheduler) as client:
        ids = [
            scheduler.submit(work),
            await client.submit(work),
            scheduler.submit(work, timeout=3),
            scheduler.submit(work, timeout=False),
        ]
        await join(scheduler)
    assert [scheduler.get(i).timeout for i in ids] == [None, None, 3, None]


def test_the_reference_facades_jobs_keep_their_30_seconds() -> None:
    assert Reference("ref").timeout == 30.0
    assert email().timeout == 30.0
    assert Reference("ref", timeout=False).timeout is None


async def test_a_task_job_is_stored_and_run_without_a_timeout(target: Target) -> None:
    async with Client(target.url) as client:
        plain = await client.submit(plain_task.job(1))
        timed = await client.submit(timed_task.job(2))
        options = [(await client.get(i)).options for i in (plain, timed)]
    assert [o.get("timeout", 30.0) for o in options] == [None, 5]
    assert await run_on_a_worker(target.url, [plain, timed]) == {plain: None, timed: 5}
