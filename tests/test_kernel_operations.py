"""Operator actions on an in-process scheduler: retry, requeue, purge, pausing the
queue and schedules, triggering a schedule; in memory and journaled to SQLite."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from jobsched import (
    AsyncJob,
    InvalidTransitionError,
    JobScheduler,
    JobStatus,
    RetryPolicy,
    SchedulerError,
    UnknownJobError,
    UnknownScheduleError,
)
from jobsched.testing import VirtualClock
from kernel_support import NO_RETRY, Gate, Noop, Scripted, Transitions, join, settle, until
from store_support import Fail, Record, runs
from store_support import Noop as StoredNoop
from store_support import scheduler as stored_scheduler

PENDING, RUNNING, COMPLETED = JobStatus.PENDING, JobStatus.RUNNING, JobStatus.COMPLETED
FAILED, CANCELLED, TIMED_OUT = JobStatus.FAILED, JobStatus.CANCELLED, JobStatus.TIMED_OUT


class Flaky(AsyncJob):
    """Fails its first `failures` calls (whatever its attempt count says), then returns "ok"."""

    def __init__(self, failures: int, **options: Any) -> None:
        options.setdefault("timeout", None)
        super().__init__(options.pop("name", "flaky"), **options)
        self.failures = failures
        self.calls = 0

    async def run(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise ValueError(f"call {self.calls}")
        return "ok"


def make(**kwargs: Any) -> JobScheduler:
    kwargs.setdefault("num_workers", 2)
    return JobScheduler("fifo", **kwargs)


# ── retry ──────────────────────────────────────────────────────────────
async def test_retry_runs_a_failed_job_again_with_its_attempts_reset_and_history_kept() -> None:
    scheduler = make()
    job = Flaky(2, retry=RetryPolicy(1, 0.0))
    async with scheduler:
        job_id = scheduler.submit(job)
        await join(scheduler)
        assert job.status is FAILED and job.attempts == 2
        assert [(a.number, a.status, a.error) for a in scheduler.attempt_history(job_id)] == [
            (1, FAILED, "ValueError: call 1")
        ]
        retried = scheduler.retry_job(job_id)
        assert retried is job and job.status is PENDING
        assert job.attempts == 0 and job.last_error is None and job.finished_at is None
        await join(scheduler)
    assert job.status is COMPLETED and job.attempts == 1 and job.result == "ok"
    history = scheduler.attempt_history(job_id)
    assert [(a.number, a.status, a.error) for a in history] == [
        (1, FAILED, "ValueError: call 1"),
        (2, FAILED, "ValueError: call 2"),
    ]
    assert all(a.started_at is not None and a.finished_at >= a.started_at for a in history)


async def test_a_job_that_never_fails_records_no_history() -> None:
    scheduler = make()
    async with scheduler:
        job_id = scheduler.submit(Noop())
        await join(scheduler)
    assert scheduler.attempt_history(job_id) == []
    assert scheduler.job_progress(job_id) is None


@pytest.mark.parametrize("status", ["running", "completed", "pending"])
async def test_retry_refuses_a_job_that_is_not_failed_timed_out_or_cancelled(status: str) -> None:
    scheduler = make(num_workers=1)
    gate = Gate()
    async with scheduler:
        gate_id = scheduler.submit(gate)
        queued_id = scheduler.submit(Noop())
        await until(lambda: gate.waiting, "the gate job to start")
        if status == "completed":
            gate.open()
            await join(scheduler)
        job_id = queued_id if status == "pending" else gate_id
        with pytest.raises(InvalidTransitionError, match=f"{job_id} is {status}"):
            scheduler.retry_job(job_id)
        if gate.waiting:
            gate.open()
    assert scheduler.get(gate_id).status is COMPLETED


async def test_retry_and_history_of_an_unknown_job_raise_unknown_job() -> None:
    scheduler = make()
    async with scheduler:
        with pytest.raises(UnknownJobError, match="job-nope"):
            scheduler.retry_job("job-nope")
        with pytest.raises(UnknownJobError):
            scheduler.attempt_history("job-nope")


async def test_a_job_cancelled_while_queued_and_retried_runs_exactly_once() -> None:
    scheduler = make(num_workers=1)
    transitions = Transitions()
    scheduler.add_listener(transitions)
    gate = Gate()
    async with scheduler:
        scheduler.submit(gate)
        await until(lambda: gate.waiting, "the gate job to start")
        queued = scheduler.submit(Noop())
        assert scheduler.cancel(queued)  # stays in the ready heap, skipped when popped
        scheduler.retry_job(queued)
        gate.open()
        await join(scheduler)
    assert transitions.started().count(queued) == 1
    assert scheduler.get(queued).status is COMPLETED
    # The retry is reported as CANCELLED -> PENDING to the listeners.
    assert (queued, CANCELLED, PENDING) in transitions.events


async def test_retry_jobs_requeues_by_status_and_type() -> None:
    scheduler = make()
    async with scheduler:
        failed = scheduler.submit(Flaky(1, retry=NO_RETRY))
        other = scheduler.submit(Flaky(1, retry=NO_RETRY, name="other"))
        cancelled = scheduler.submit(Noop(), delay=60)
        scheduler.cancel(cancelled)
        done = scheduler.submit(Noop())
        await join(scheduler)
        assert scheduler.retry_jobs(["cancelled"]) == [cancelled]
        assert scheduler.retry_jobs(job_type="Nothing") == []
        assert scheduler.retry_jobs(FAILED, job_type="Flaky") == [failed, other]
        await join(scheduler)
        with pytest.raises(ValueError, match="'completed' cannot be retried"):
            scheduler.retry_jobs(["completed"])
        with pytest.raises(ValueError, match="'bogus'"):
            scheduler.retry_jobs(["bogus"])
    assert {scheduler.get(i).status for i in (failed, other, done)} == {COMPLETED}


async def test_retry_after_stop_is_refused() -> None:
    scheduler = make()
    async with scheduler:
        job_id = scheduler.submit(Scripted([ValueError("x")], retry=NO_RETRY))
        await join(scheduler)
    with pytest.raises(Exception, match="stopping"):
        scheduler.retry_job(job_id)


# ── purge ──────────────────────────────────────────────────────────────
async def test_purge_forgets_terminal_jobs_older_than_the_cutoff_and_keeps_unfinished() -> None:
    clock = VirtualClock()
    scheduler = make(clock=clock, num_workers=1)
    gate = Gate()
    async with scheduler:
        old_done = scheduler.submit(Noop(), key="old")
        old_failed = scheduler.submit(Scripted([ValueError("x")], retry=NO_RETRY))
        await join(scheduler)
        await clock.advance(100)
        recent = scheduler.submit(Noop())
        await join(scheduler)
        running = scheduler.submit(gate)
        waiting = scheduler.submit(Noop())
        await until(lambda: gate.waiting, "the gate job to start")
        await clock.advance(10)
        assert scheduler.purge(50, statuses=["completed"]) == 1
        assert scheduler.kernel.table.find(old_done) is None and scheduler.lookup("old") is None
        assert scheduler.kernel.table.find(old_failed) is not None
        assert scheduler.purge(50) == 1  # every terminal status
        assert scheduler.kernel.table.find(old_failed) is None
        assert scheduler.purge(0) == 1  # `recent`; never the unfinished ones
        assert scheduler.kernel.table.find(recent) is None
        assert scheduler.get(running).status is RUNNING
        assert scheduler.get(waiting).status is PENDING
        with pytest.raises(UnknownJobError):
            scheduler.retry_job(old_failed)
        gate.open()
        await join(scheduler)


@pytest.mark.parametrize(
    ("older_than", "statuses", "error"),
    [
        (-1, None, ValueError),
        (float("nan"), None, ValueError),
        ("7d", None, TypeError),
        (0, ["running"], ValueError),
        (0, ["pending", "completed"], ValueError),
    ],
)
async def test_purge_refuses_bad_arguments(older_than: Any, statuses: Any, error: type) -> None:
    scheduler = make()
    with pytest.raises(error):
        scheduler.purge(older_than, statuses)


# ── pausing the queue ──────────────────────────────────────────────────
async def test_a_paused_queue_starts_nothing_new_while_the_running_job_finishes() -> None:
    scheduler = make(num_workers=2)
    transitions = Transitions()
    scheduler.add_listener(transitions)
    gate = Gate()
    async with scheduler:
        running = scheduler.submit(gate)
        await until(lambda: gate.waiting, "the gate job to start")
        assert scheduler.pause_queue() is True
        assert scheduler.pause_queue() is False
        assert scheduler.queue_paused
        queued = scheduler.submit(Noop())
        gate.open()
        await until(lambda: scheduler.get(running).status is COMPLETED, "the gate job to end")
        await settle()
        assert scheduler.get(queued).status is PENDING
        assert queued not in transitions.started()
        assert scheduler.resume_queue() is True
        assert scheduler.resume_queue() is False
        await join(scheduler)
    assert scheduler.get(queued).status is COMPLETED
    assert transitions.problems == []


async def test_pausing_keeps_the_limited_dispatch_when_limits_are_set() -> None:
    scheduler = make(limits={"job_types": {"Noop": 1}})
    async with scheduler:
        scheduler.pause_queue()
        ids = [scheduler.submit(Noop()) for _ in range(3)]
        await settle()
        assert {scheduler.get(i).status for i in ids} == {PENDING}
        scheduler.resume_queue()
        await join(scheduler)
        assert {scheduler.get(i).status for i in ids} == {COMPLETED}
        assert scheduler.peak_running == 1


# ── schedules ──────────────────────────────────────────────────────────
async def test_a_paused_schedule_does_not_fire_and_resumes_after_now() -> None:
    clock = VirtualClock()
    scheduler = make(clock=clock)
    fired: list[float] = []

    def factory() -> Noop:
        fired.append(clock.now())
        return Noop()

    sched_id = scheduler.schedule_recurring(factory, 10, start_in=10)
    async with scheduler:
        await clock.advance(10)
        assert fired == [10]
        assert scheduler.pause_schedule(sched_id) is True
        assert scheduler.pause_schedule(sched_id) is False
        await clock.advance(45)  # t = 55: fires due at 20..50 are skipped
        assert fired == [10]
        assert scheduler.resume_schedule(sched_id) is True
        assert scheduler.resume_schedule(sched_id) is False
        (sched,) = scheduler.recurring()
        assert sched.next_fire == 60  # the next period after now, on the grid
        await clock.advance(5)
        assert fired == [10, 60]


async def test_trigger_fires_once_now_without_moving_the_period() -> None:
    clock = VirtualClock()
    scheduler = make(clock=clock)
    sched_id = scheduler.schedule_recurring(Noop, 10, start_in=10)
    async with scheduler:
        await clock.advance(3)
        job_id = scheduler.trigger_schedule(sched_id)
        await join(scheduler)
        assert scheduler.get(job_id).status is COMPLETED
        (sched,) = scheduler.recurring()
        assert (sched.next_fire, sched.fired, sched.last_job_id) == (10, 1, job_id)
        scheduler.pause_schedule(sched_id)
        assert scheduler.trigger_schedule(sched_id) != job_id  # a paused one too
        assert sched.fired == 2


async def test_unknown_schedules_are_refused() -> None:
    scheduler = make()
    for action in (
        scheduler.pause_schedule,
        scheduler.resume_schedule,
        scheduler.trigger_schedule,
    ):
        with pytest.raises(UnknownScheduleError, match="sched-nope"):
            action("sched-nope")


# ── journaled to a SQLite file the scheduler owns ─────────────────────
async def test_retry_and_purge_persist_in_a_single_owner_sqlite_store(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/jobs.db"
    log = tmp_path / "runs.log"
    first = stored_scheduler(url)
    async with first:
        flaky = first.submit(Record(log=str(log), tag="flaky", fail_times=1, retry="none"))
        broken = first.submit(Fail())
        done = first.submit(StoredNoop())
        await first.join()
        assert first.get(flaky).status is FAILED
        first.retry_job(flaky)
        await first.join()
        await first.flush()
        assert first.purge(0, ["completed"]) == 2  # `done`, and `flaky` after its retry
    assert runs(log) == ["flaky", "flaky"]

    second = stored_scheduler(url)
    async with second:
        assert second.kernel.table.find(flaky) is None and second.kernel.table.find(done) is None
        assert second.get(broken).status is FAILED
        second.retry_job(broken)
        await second.join()
        assert second.get(broken).status is FAILED and second.get(broken).attempts == 1
    third = stored_scheduler(url)
    async with third:
        assert third.get(broken).attempts == 1
        assert third.get(broken).status is FAILED


async def test_purge_spares_an_upstream_an_unfinished_job_still_needs(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/jobs.db"
    first = stored_scheduler(url)
    async with first:
        upstream = first.submit(StoredNoop())
        await first.join()
        await first.flush()  # committed: its dependents are no longer held back
        first.pause_queue()
        dependent = first.submit(StoredNoop(), depends_on=[upstream])
        assert first.purge(0) == 1  # the scheduler forgets it: the dependent was released
        await first.flush()
    second = stored_scheduler(url)
    async with second:
        # The store kept it: the restored dependent still has its upstream.
        assert second.get(upstream).status is COMPLETED
        await second.join()
        assert second.get(dependent).status is COMPLETED


async def test_a_shared_store_job_is_retried_through_the_store_not_the_kernel(
    tmp_path: Path,
) -> None:
    scheduler = stored_scheduler(f"sqlite:///{tmp_path}/jobs.db", shared=True)
    async with scheduler:
        job_id = scheduler.submit(Fail())
        await scheduler.flush()
        await scheduler.join()
        job_id = scheduler.resolve(job_id)
        job = scheduler.kernel.table.find(job_id)
        assert job is not None  # this process ran it: the kernel remembers it
        with pytest.raises(SchedulerError, match=r"Client\(store\).retry"):
            scheduler.retry_job(job_id)
        assert job.status is FAILED and scheduler.attempt_history(job_id) == []
