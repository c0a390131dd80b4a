"""depends_on: jobs wait for their upstreams; an upstream that did not complete cancels them."""

from __future__ import annotations

import pytest

from jobsched import JobStatus, UnknownJobError
from jobsched.testing import VirtualClock
from kernel_support import NO_RETRY, Gate, Noop, Scripted, make_scheduler, settle

# A hang is a failure, not a stuck suite.
pytestmark = pytest.mark.timeout(30)

S = JobStatus


async def test_unknown_dependency_is_refused_and_the_job_is_not_recorded() -> None:
    scheduler, _ = make_scheduler()
    known = scheduler.submit(Noop("known"))
    job = Noop("orphan")
    with pytest.raises(UnknownJobError, match=r"unknown dependencies: \['job-missing'\]") as info:
        scheduler.submit(job, depends_on=[known, "job-missing"])
    assert job.job_id in str(info.value), "the error names the job that was refused"
    assert [j.job_id for j in scheduler.jobs()] == [known]
    assert job.status is S.PENDING and job.seq == 0
    async with scheduler:
        await scheduler.join()
    # The refused job can still be submitted properly afterwards.
    async with make_scheduler()[0] as other:
        other.submit(job)
        await other.join()
    assert job.status is S.COMPLETED


def test_a_job_cannot_depend_on_itself_so_cycles_are_impossible() -> None:
    scheduler, _ = make_scheduler()
    job = Noop()
    with pytest.raises(UnknownJobError, match=job.job_id):
        scheduler.submit(job, depends_on=[job.job_id])


async def test_waiting_on_names_the_upstreams_a_job_still_waits_for() -> None:
    scheduler, _ = make_scheduler(num_workers=4)
    a, b = Gate("a"), Gate("b")
    async with scheduler:
        scheduler.submit(a)
        scheduler.submit(b)
        child = scheduler.submit(Noop("child"), depends_on=[a.job_id, b.job_id])
        await settle()
        assert scheduler.waiting_on(child) == {a.job_id, b.job_id}
        assert scheduler.waiting_on(a.job_id) == frozenset()
        a.open()
        await settle()
        assert scheduler.waiting_on(child) == {b.job_id}
        b.open()
        await scheduler.join()
        assert scheduler.waiting_on(child) == frozenset()
        with pytest.raises(UnknownJobError, match="job-missing"):
            scheduler.waiting_on("job-missing")


async def test_dependent_waits_for_every_upstream() -> None:
    scheduler, recorder = make_scheduler(num_workers=4)
    a, b = Gate("a"), Gate("b")
    async with scheduler:
        scheduler.submit(a)
        scheduler.submit(b)
        child = Noop("child", value="ran")
        scheduler.submit(child, depends_on=[a.job_id, b.job_id, a.job_id])  # repeats are fine
        await settle()
        assert child.status is S.PENDING and child.attempts == 0
        a.open()
        await settle()
        assert a.status is S.COMPLETED
        assert child.status is S.PENDING, "one upstream of two is not enough"
        b.open()
        await scheduler.join()
    assert child.result == "ran"
    assert recorder.started().index(child.job_id) == 2
    assert recorder.problems == []


async def test_dependency_that_already_completed_does_not_block() -> None:
    scheduler, _ = make_scheduler()
    async with scheduler:
        up = scheduler.submit(Noop("up"))
        await scheduler.join()
        child = Noop("child")
        scheduler.submit(child, depends_on=[up])
        await scheduler.join()
    assert child.status is S.COMPLETED


async def test_upstream_failure_cascades_transitively() -> None:
    scheduler, recorder = make_scheduler()
    root = Scripted([RuntimeError("disk on fire")], "root", retry=NO_RETRY)
    scheduler.submit(root)
    middle = scheduler.submit(Noop("middle"), depends_on=[root.job_id])
    leaf = scheduler.submit(Noop("leaf"), depends_on=[middle])
    sibling_ok = scheduler.submit(Noop("independent"))
    async with scheduler:
        await scheduler.join()
    assert root.status is S.FAILED
    assert scheduler.get(middle).status is S.CANCELLED
    assert scheduler.get(middle).last_error == f"upstream {root.job_id} failed"
    assert scheduler.get(leaf).status is S.CANCELLED
    assert scheduler.get(leaf).last_error == f"upstream {middle} cancelled"
    assert scheduler.get(middle).attempts == scheduler.get(leaf).attempts == 0
    assert scheduler.get(sibling_ok).status is S.COMPLETED
    assert recorder.path(leaf) == [S.PENDING, S.CANCELLED]


async def test_dependents_submitted_after_the_upstream_failed_are_cancelled_at_once() -> None:
    scheduler, recorder = make_scheduler()
    root = Scripted([ValueError("bad row")], "root", retry=NO_RETRY)
    async with scheduler:
        scheduler.submit(root)
        await scheduler.join()
        assert root.status is S.FAILED
        late = Noop("late")
        late_id = scheduler.submit(late, depends_on=[root.job_id])
        assert late.status is S.CANCELLED, "cancelled during submit, not later"
        assert late.last_error == f"upstream {root.job_id} failed"
        later = Noop("later")
        scheduler.submit(later, depends_on=[late_id])  # its upstream was cancelled
        assert later.status is S.CANCELLED
        assert later.last_error == f"upstream {late_id} cancelled"
        await scheduler.join()  # cancelled-at-submit jobs count as finished
    assert recorder.path(late_id) == [S.PENDING, S.CANCELLED]
    assert late.attempts == later.attempts == 0


async def test_timed_out_and_cancelled_upstreams_cascade_too() -> None:
    clock = VirtualClock()
    scheduler, _ = make_scheduler(clock=clock)
    slow = Scripted(["hang"], "slow", timeout=1.0, retry=NO_RETRY)
    doomed = Gate("doomed")
    async with scheduler:
        scheduler.submit(slow)
        after_slow = scheduler.submit(Noop(), depends_on=[slow.job_id])
        scheduler.submit(doomed, delay=100.0)
        after_doomed = scheduler.submit(Noop(), depends_on=[doomed.job_id])
        await settle()
        await clock.advance(1.0)
        assert scheduler.cancel(doomed.job_id)
        await scheduler.join()
    assert slow.status is S.TIMED_OUT
    assert scheduler.get(after_slow).last_error == f"upstream {slow.job_id} timed_out"
    assert scheduler.get(after_doomed).status is S.CANCELLED
    assert scheduler.get(after_doomed).last_error == f"upstream {doomed.job_id} cancelled"


async def test_cancelling_a_blocked_job_cancels_its_dependents_and_ignores_its_upstream() -> None:
    scheduler, recorder = make_scheduler()
    up = Gate("up")
    async with scheduler:
        scheduler.submit(up)
        blocked = scheduler.submit(Noop("blocked"), depends_on=[up.job_id])
        below = scheduler.submit(Noop("below"), depends_on=[blocked])
        await settle()
        assert scheduler.cancel(blocked)
        assert scheduler.get(below).status is S.CANCELLED
        up.open()  # the upstream completing later must not revive the cancelled job
        await scheduler.join()
    assert up.status is S.COMPLETED
    assert scheduler.get(blocked).status is S.CANCELLED
    assert scheduler.get(blocked).attempts == 0
    assert recorder.problems == []


async def test_diamond_runs_the_join_once_after_both_branches() -> None:
    scheduler, recorder = make_scheduler(num_workers=3)
    top = scheduler.submit(Noop("top"))
    left = scheduler.submit(Noop("left"), depends_on=[top])
    right = scheduler.submit(Noop("right"), depends_on=[top])
    bottom = scheduler.submit(Noop("bottom", value="joined"), depends_on=[left, right])
    async with scheduler:
        await scheduler.join()
    order = recorder.started()
    assert order[0] == top
    assert set(order[1:3]) == {left, right}
    assert order[3] == bottom
    assert order.count(bottom) == 1
    assert scheduler.get(bottom).result == "joined"


async def test_diamond_with_one_failing_branch_cancels_the_join_once() -> None:
    scheduler, recorder = make_scheduler(num_workers=3)
    top = scheduler.submit(Noop("top"))
    left_job = Scripted([RuntimeError("left broke")], "left", retry=NO_RETRY)
    left = scheduler.submit(left_job, depends_on=[top])
    right = scheduler.submit(Noop("right"), depends_on=[top])
    bottom = scheduler.submit(Noop("bottom"), depends_on=[left, right])
    below = scheduler.submit(Noop("below"), depends_on=[bottom])
    async with scheduler:
        await scheduler.join()
    assert scheduler.get(right).status is S.COMPLETED
    assert scheduler.get(bottom).status is S.CANCELLED
    assert scheduler.get(bottom).last_error == f"upstream {left} failed"
    assert scheduler.get(below).status is S.CANCELLED
    assert recorder.path(bottom) == [S.PENDING, S.CANCELLED], "cancelled exactly once"
    assert recorder.problems == []


async def test_a_long_chain_cascades_without_recursion() -> None:
    scheduler, _ = make_scheduler()
    root = Gate("root")
    scheduler.submit(root)
    previous = root.job_id
    chain = []
    for i in range(5_000):
        previous = scheduler.submit(Noop(f"link-{i}"), depends_on=[previous])
        chain.append(previous)
    async with scheduler:
        await settle()
        root.fail(RuntimeError("root broke"))
        await scheduler.join()
    assert all(scheduler.get(j).status is S.CANCELLED for j in chain)


async def test_a_long_chain_of_successes_runs_in_order() -> None:
    scheduler, recorder = make_scheduler(num_workers=4)
    ids = [scheduler.submit(Noop("link-0"))]
    for i in range(1, 200):
        ids.append(scheduler.submit(Noop(f"link-{i}"), depends_on=[ids[-1]]))
    async with scheduler:
        await scheduler.join()
    assert recorder.started() == ids
