"""The status state machine, and one-shot and delayed submits."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from jobsched import (
    InvalidTransitionError,
    JobScheduler,
    JobStatus,
    SchedulerError,
    UnknownJobError,
)
from jobsched.testing import VirtualClock
from kernel_support import Gate, Noop, make_scheduler, settle

# A hang is a failure, not a stuck suite.
pytestmark = pytest.mark.timeout(30)

S = JobStatus
# The reference design's _TRANSITIONS table, written out independently.
LEGAL = {
    (S.PENDING, S.RUNNING),
    (S.PENDING, S.CANCELLED),
    (S.RUNNING, S.COMPLETED),
    (S.RUNNING, S.FAILED),
    (S.RUNNING, S.TIMED_OUT),
    (S.RUNNING, S.CANCELLED),
    (S.RUNNING, S.RETRY_WAIT),
    (S.RETRY_WAIT, S.RUNNING),
    (S.RETRY_WAIT, S.CANCELLED),
}
TERMINAL = {S.COMPLETED, S.FAILED, S.TIMED_OUT, S.CANCELLED}


def test_status_values_are_the_references() -> None:
    assert {s.name: s.value for s in S} == {
        "PENDING": "pending",
        "RUNNING": "running",
        "RETRY_WAIT": "retry_wait",
        "COMPLETED": "completed",
        "FAILED": "failed",
        "TIMED_OUT": "timed_out",
        "CANCELLED": "cancelled",
    }


@pytest.mark.parametrize(("old", "new"), list(itertools.product(S, S)))
def test_allowed_next_is_exactly_the_legal_edges(old: JobStatus, new: JobStatus) -> None:
    assert (new in old.allowed_next) == ((old, new) in LEGAL)


@pytest.mark.parametrize("status", list(S))
def test_terminal_statuses_have_no_way_out(status: JobStatus) -> None:
    assert status.is_terminal == (status in TERMINAL)
    if status.is_terminal:
        assert status.allowed_next == ()


@pytest.mark.parametrize(("old", "new"), list(itertools.product(S, S)))
def test_the_kernel_refuses_every_illegal_edge(old: JobStatus, new: JobStatus) -> None:
    scheduler, recorder = make_scheduler()
    job = Noop()
    job.status = old
    if (old, new) in LEGAL:
        scheduler.kernel.transition(job, new)
        assert job.status is new
        assert recorder.events == [(job.job_id, old, new)]
    else:
        with pytest.raises(InvalidTransitionError, match=f"{old.value} -> {new.value}"):
            scheduler.kernel.transition(job, new)
        assert job.status is old, "a refused transition must not change the status"
        assert recorder.events == [], "listeners must not hear of a refused transition"


async def test_one_shot_submit_runs_once_and_completes() -> None:
    scheduler, recorder = make_scheduler()
    job = Noop(value=42)
    job_id = scheduler.submit(job)
    assert job_id == job.job_id
    assert scheduler.get(job_id) is job
    assert job.status is S.PENDING
    async with scheduler:
        await scheduler.join()
    assert job.status is S.COMPLETED
    assert job.result == 42
    assert job.attempts == 1
    assert job.last_error is None
    assert job.started_at is not None and job.finished_at is not None
    assert job.submitted_at <= job.started_at <= job.finished_at
    assert recorder.path(job_id) == [S.PENDING, S.RUNNING, S.COMPLETED]
    assert recorder.problems == []


async def test_job_ids_are_unique_and_jobs_lists_every_job() -> None:
    scheduler, _ = make_scheduler()
    jobs = [Noop(str(i)) for i in range(5)]
    ids = [scheduler.submit(j) for j in jobs]
    assert len(set(ids)) == 5
    assert {j.job_id for j in scheduler.jobs()} == set(ids)
    assert [j.seq for j in jobs] == sorted(j.seq for j in jobs)  # submit order
    async with scheduler:
        await scheduler.join()


async def test_join_returns_at_once_when_nothing_was_submitted() -> None:
    scheduler, _ = make_scheduler()
    async with scheduler:
        await scheduler.join()
    assert scheduler.jobs() == []


def test_get_of_an_unknown_id_raises_unknown_job_error() -> None:
    scheduler, _ = make_scheduler()
    with pytest.raises(UnknownJobError, match="job-nope") as info:
        scheduler.get("job-nope")
    assert isinstance(info.value, KeyError), "the reference's UnknownJobError is also a KeyError"


async def test_a_job_cannot_be_submitted_twice() -> None:
    scheduler, _ = make_scheduler()
    job = Noop()
    scheduler.submit(job)
    with pytest.raises(SchedulerError, match=f"{job.job_id} was already submitted"):
        scheduler.submit(job)
    async with scheduler:
        await scheduler.join()
    other, _ = make_scheduler()
    with pytest.raises(SchedulerError, match="already submitted"):
        other.submit(job)  # finished elsewhere: its state is not PENDING any more


def test_bad_constructor_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="num_workers"):
        JobScheduler(num_workers=0)
    with pytest.raises(ValueError, match="num_workers"):
        JobScheduler(num_workers=2.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="history_limit"):
        JobScheduler(history_limit=-1)
    with pytest.raises(ValueError, match="timeout"):
        Noop(timeout=0)
    with pytest.raises(ValueError, match="timeout"):
        Noop(timeout=-1.0)


@pytest.mark.parametrize("delay", [-1.0, float("nan")])
def test_bad_delay_is_refused_and_nothing_is_recorded(delay: float) -> None:
    scheduler, _ = make_scheduler()
    job = Noop()
    with pytest.raises(ValueError, match="delay"):
        scheduler.submit(job, delay=delay)
    assert scheduler.jobs() == []
    with pytest.raises(UnknownJobError):
        scheduler.get(job.job_id)


async def test_delayed_submit_waits_for_its_run_time() -> None:
    clock = VirtualClock()
    scheduler, recorder = make_scheduler(clock=clock)
    t0 = clock.now()
    job = Noop(value="late")
    async with scheduler:
        scheduler.submit(job, delay=10.0)
        assert job.run_at == t0 + 10.0
        assert clock.timer_times() == [t0 + 10.0]  # one timer, no polling
        await settle()
        await clock.advance(9.5)
        await settle()
        assert job.status is S.PENDING and job.attempts == 0
        await clock.advance(0.5)
        await settle()
        assert job.status is S.COMPLETED
        assert job.started_at == t0 + 10.0
        await scheduler.join()
    assert recorder.path(job.job_id) == [S.PENDING, S.RUNNING, S.COMPLETED]


async def test_delayed_jobs_submitted_before_start_wait_too() -> None:
    clock = VirtualClock()
    scheduler, _ = make_scheduler(clock=clock)
    job = Noop()
    scheduler.submit(job, delay=3.0)
    assert clock.timer_times() == []  # nothing is armed before start()
    async with scheduler:
        assert clock.timer_times() == [clock.now() + 3.0]
        await settle()
        assert job.status is S.PENDING
        await clock.advance(3.0)
        await scheduler.join()
    assert job.status is S.COMPLETED


async def test_delayed_jobs_run_in_run_time_order_with_one_timer() -> None:
    clock = VirtualClock()
    scheduler, recorder = make_scheduler("fifo", clock=clock, num_workers=1)
    t0 = clock.now()
    async with scheduler:
        late = scheduler.submit(Noop("late"), delay=8.0)
        soon = scheduler.submit(Noop("soon"), delay=2.0)  # re-arms the timer earlier
        mid = scheduler.submit(Noop("mid"), delay=5.0)
        now = scheduler.submit(Noop("now"))
        assert clock.timer_times() == [t0 + 2.0], "the earlier run time replaces the armed timer"
        await settle()
        assert recorder.started() == [now]
        for step in (2.0, 3.0, 3.0):
            await clock.advance(step)
            await settle()
        await scheduler.join()
    assert recorder.started() == [now, soon, mid, late]


async def test_zero_delay_is_an_immediate_submit() -> None:
    clock = VirtualClock()
    scheduler, _ = make_scheduler(clock=clock)
    job = Noop()
    async with scheduler:
        scheduler.submit(job, delay=0.0)
        assert clock.timer_times() == []
        await scheduler.join()
    assert job.status is S.COMPLETED


async def test_a_job_with_no_timeout_is_allowed_to_run_long() -> None:
    clock = VirtualClock()
    scheduler, _ = make_scheduler(clock=clock)
    job = Gate(timeout=None)
    async with scheduler:
        scheduler.submit(job)
        await settle()
        assert clock.timer_times() == [], "no watchdog for a job without a timeout"
        await clock.advance(1e9)
        await settle()
        assert job.status is S.RUNNING
        job.open("done")
        await scheduler.join()
    assert job.result == "done"


async def test_with_the_system_clock_a_delayed_job_never_starts_early() -> None:
    scheduler = JobScheduler(num_workers=1)  # SystemClock, real loop timers
    job = Noop(timeout=5.0)
    async with scheduler:
        scheduler.submit(job, delay=0.02)
        await asyncio.wait_for(scheduler.join(), 10)
    assert job.status is S.COMPLETED
    assert job.started_at is not None and job.started_at >= job.run_at
