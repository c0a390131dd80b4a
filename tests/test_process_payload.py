"""Process jobs cross to the worker as their class and set slots (`pack_job`):
the job the worker runs has every field the scheduler's job had."""

from __future__ import annotations

import asyncio
import pickle

import pytest

from jobsched import JobPriority, JobStatus, RetryPolicy
from jobsched_plugins.process_executor import pack_job, unpack_job
from kernel_support import make_scheduler
from process_payload_jobs import AttrsJob, Fields, Reduced, WithDict

pytestmark = pytest.mark.timeout(60)


def _round_trip(job: object) -> object:
    return unpack_job(pickle.loads(pickle.dumps(pack_job(job))))  # type: ignore[arg-type]


def test_a_slotted_job_keeps_every_set_slot_enum_and_policy() -> None:
    job = Fields("f", 4, priority="high", timeout=5, retry={"policy": "fixed", "seconds": 2})
    job.attempts = 2
    job.status = JobStatus.RUNNING
    copy = _round_trip(job)
    assert type(copy) is Fields and copy is not job
    assert copy.run_sync() == {  # type: ignore[attr-defined]
        "factor": 4,
        "secret": 40,
        "unset": False,
        "attempts": 2,
        "job_id": job.job_id,
        "priority": JobPriority.HIGH,
        "status": JobStatus.RUNNING,
        "retry": job.retry,
        "timeout": 5.0,
    }
    assert copy.priority is JobPriority.HIGH  # type: ignore[attr-defined]
    assert copy.status is JobStatus.RUNNING  # type: ignore[attr-defined]


def test_the_default_retry_policy_comes_back_equal() -> None:
    copy = _round_trip(Fields("f", 1))
    assert copy.retry == RetryPolicy()  # type: ignore[attr-defined]


def test_a_job_with_a_dict_keeps_its_attributes() -> None:
    copy = _round_trip(WithDict("d", [1, 2]))
    assert copy.run_sync() == [2, 4]  # type: ignore[attr-defined]
    assert copy.name == "d"  # type: ignore[attr-defined]


def test_a_job_that_pickles_itself_is_sent_as_it_is() -> None:
    # Its __reduce__ adds one to the value: proof it was used.
    job = Reduced(1)
    assert pack_job(job) is job
    assert _round_trip(job).run_sync() == 2  # type: ignore[attr-defined]


def test_an_attrs_job_type_comes_back_with_its_fields() -> None:
    attrs_job = AttrsJob(n=2)
    copy = _round_trip(attrs_job)
    assert copy.n == 2 and copy.job_id == attrs_job.job_id  # type: ignore[attr-defined]
    assert copy.run_sync() == 6  # type: ignore[attr-defined]


async def test_process_jobs_run_with_their_fields_in_a_worker_process() -> None:
    scheduler, _ = make_scheduler(num_workers=2)
    async with scheduler:
        fields = scheduler.submit(Fields("f", 3, priority="low"))
        with_dict = scheduler.submit(WithDict("d", [5]))
        attrs_id = scheduler.submit(AttrsJob(n=4))
        await asyncio.wait_for(scheduler.join(), 50)
    result = scheduler.get(fields).result
    assert result["factor"] == 3 and result["secret"] == 30 and result["attempts"] == 1
    assert result["status"] is JobStatus.RUNNING and result["priority"] is JobPriority.LOW
    assert result["job_id"] == fields
    assert scheduler.get(with_dict).result == [10]
    assert scheduler.get(attrs_id).result == 12
