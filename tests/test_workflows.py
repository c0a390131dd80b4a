"""``jobsched.chain``, ``group`` and ``chord``: the edges they build, one
call to submit them (a scheduler, ``LocalClient``, ``Client``,
``BlockingClient``), the chord's list of results in member order, in one
process and across processes (SQLite, PostgreSQL); and their bad input."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from flow_tasks import add_all, count, echo, extract, fail, total
from jobsched import (
    BlockingClient,
    Chain,
    Chord,
    Client,
    Group,
    Job,
    JobScheduler,
    JobStatus,
    LocalClient,
    SchedulerError,
    chain,
    chord,
    group,
    result_of,
)


def started_in_order(scheduler: JobScheduler) -> list[str]:
    """The ids of the jobs as their attempts start (a listener)."""
    order: list[str] = []

    def on_transition(job: Job, old: JobStatus, new: JobStatus) -> None:
        if new is JobStatus.RUNNING:
            order.append(job.job_id)

    scheduler.add_listener(on_transition)
    return order


# ── the edges ──────────────────────────────────────────────────────────
async def test_a_chain_runs_each_step_after_the_previous_completed() -> None:
    async with JobScheduler(num_workers=4) as scheduler:
        order = started_in_order(scheduler)
        a, b, c = count.job(1), count.job(2), count.job(3)
        last = scheduler.submit(chain(a, b, c))
        await scheduler.join()
    assert last == c.job_id
    assert order == [a.job_id, b.job_id, c.job_id]
    assert scheduler.depends_on(b.job_id) == (a.job_id,)
    assert scheduler.depends_on(c.job_id) == (b.job_id,)


async def test_a_failed_step_cancels_the_rest_of_the_chain() -> None:
    async with JobScheduler() as scheduler:
        a, b, c = fail.job("boom"), count.job(2), count.job(3)
        scheduler.submit(chain(a, b, c))
        await scheduler.join()
    assert [scheduler.get(j.job_id).status for j in (a, b, c)] == [
        JobStatus.FAILED,
        JobStatus.CANCELLED,
        JobStatus.CANCELLED,
    ]
    assert scheduler.get(c.job_id).last_error == f"upstream {b.job_id} cancelled"


async def test_a_group_in_a_chain_is_waited_for_as_a_whole() -> None:
    async with JobScheduler() as scheduler:
        first, x, y1, y2, after = (count.job(n) for n in range(5))
        ids = scheduler.submit_many([chain(first, group(x, chain(y1, y2)), after)])
        await scheduler.join()
    assert ids == [j.job_id for j in (first, x, y1, y2, after)]
    assert scheduler.depends_on(x.job_id) == (first.job_id,)
    assert scheduler.depends_on(y1.job_id) == (first.job_id,)
    assert scheduler.depends_on(y2.job_id) == (y1.job_id,)
    # The step after the group waits for each of its branches' last jobs.
    assert set(scheduler.depends_on(after.job_id)) == {x.job_id, y2.job_id}
    assert all(scheduler.get(i).status is JobStatus.COMPLETED for i in ids)


async def test_a_group_is_independent_and_returns_its_last_members_id() -> None:
    async with JobScheduler() as scheduler:
        a, b = count.job(1), fail.job("only me")
        assert scheduler.submit(group(a, b)) == b.job_id
        await scheduler.join()
    assert scheduler.depends_on(a.job_id) == scheduler.depends_on(b.job_id) == ()
    assert scheduler.get(a.job_id).status is JobStatus.COMPLETED


# ── chords: the callback gets the list of results ──────────────────────
async def test_a_chord_callback_receives_the_results_in_member_order() -> None:
    async with JobScheduler(num_workers=4) as scheduler:
        members = group(count.job(1), count.job(2), chain(count.job(3), count.job(4)))
        callback = scheduler.submit(chord(members, add_all))
        listed = scheduler.submit(chord([count.job(10), count.job(20)], echo))
        await scheduler.join()
    assert scheduler.get(callback).result == 1 + 2 + 4
    # A chain member gives its last step's result.
    assert scheduler.get(listed).result == [10, 20]


async def test_a_chord_callback_with_more_arguments_or_options() -> None:
    async with JobScheduler() as scheduler:
        partial = scheduler.submit(
            chord([count.job(1), count.job(2)], functools.partial(total, title="parts"))
        )
        with_options = chord([count.job(5)], add_all.options(priority="high", name="sum"))
        assert with_options.callback.name == "sum"
        optioned = scheduler.submit(with_options)
        await scheduler.join()
    assert scheduler.get(partial).result == "parts: 3"
    assert scheduler.get(optioned).result == 5


async def test_a_chord_callback_job_names_the_group_itself() -> None:
    async with JobScheduler() as scheduler:
        members = group(extract.job(1), extract.job(2))
        callback = echo.job({"rows": result_of(members)})
        last = scheduler.submit(chord(members, callback))
        await scheduler.join()
    assert last == callback.job_id
    assert scheduler.get(last).result == {"rows": [[0], [0, 1]]}


async def test_a_failed_member_cancels_the_chord_callback() -> None:
    async with JobScheduler() as scheduler:
        callback = scheduler.submit(chord([count.job(1), fail.job("boom")], add_all))
        await scheduler.join()
    assert scheduler.get(callback).status is JobStatus.CANCELLED


async def test_a_local_client_submits_workflows() -> None:
    async with JobScheduler() as scheduler, LocalClient(scheduler) as client:
        last = await client.submit(chord([count.job(2), count.job(3)], add_all))
        ids = await client.submit_many([chain(count.job(1), count.job(2)), count.job(9)])
        assert len(ids) == 3
        assert await client.result(last, timeout=60) == 5
        assert [(await client.result(i, timeout=60)) for i in ids] == [1, 2, 9]


async def test_a_workflows_first_steps_wait_for_depends_on() -> None:
    async with JobScheduler() as scheduler:
        gate = scheduler.submit(count.job(0))
        a, b = count.job(1), count.job(2)
        scheduler.submit(group(a, b), depends_on=[gate])
        await scheduler.join()
    assert scheduler.depends_on(a.job_id) == scheduler.depends_on(b.job_id) == (gate,)


# ── across processes ───────────────────────────────────────────────────
@pytest.mark.slow
async def test_a_chord_runs_on_a_worker_process(flow_worker: str) -> None:
    async with Client(flow_worker) as client:
        members = group(count.job(1), count.job(2), chain(count.job(3), count.job(4)))
        last = await client.submit(chord(members, add_all))
        assert await client.result(last, timeout=60) == 7
        ids = await client.submit_many([chain(extract.job(3), count.job(5)), count.job(6)])
        assert len(ids) == 3
        assert [await client.result(i, timeout=60) for i in ids] == [[0, 1, 2], 5, 6]


@pytest.mark.slow
def test_a_blocking_client_submits_a_chord(flow_worker: str) -> None:
    with BlockingClient(flow_worker) as client:
        last = client.submit(chord([extract.job(2), extract.job(3)], echo))
        assert client.result(last, timeout=60) == [[0, 1], [0, 1, 2]]


@pytest.mark.slow
async def test_a_shared_scheduler_submits_a_chain(flow_worker: str) -> None:
    # A scheduler on the shared store submits; the worker process (and this
    # scheduler) run the jobs; the chain's edges are the store's.
    async with JobScheduler(store=flow_worker, shared=True) as scheduler:
        a = extract.job(4)
        b = total.job(result_of(a))
        last = scheduler.submit(chain(a, b))
        await scheduler.join()
    async with Client(flow_worker) as client:
        assert await client.result(last, timeout=60) == "total: 6"


# ── bad input ──────────────────────────────────────────────────────────
@pytest.mark.parametrize(
    ("build", "error", "message"),
    [
        (lambda: chain(), ValueError, "chain() needs at least one job"),
        (lambda: group(count), TypeError, "group() step 1 must be a job or a workflow"),
        (
            lambda: chain(count.job(1), "job-1"),
            TypeError,
            "chain() step 2 must be a job or a workflow, got 'job-1'",
        ),
        (lambda: chord(count.job(1), add_all), TypeError, "chord() takes a group or a list"),
        (
            lambda: chord([count.job(1)], print),
            TypeError,
            "chord() callback must be a task, task.options(...), functools.partial(task, ...) "
            "or a job",
        ),
    ],
)
def test_bad_workflows_are_refused_when_built(build: Any, error: type, message: str) -> None:
    with pytest.raises(error) as info:
        build()
    assert str(info.value).startswith(message)


async def test_a_job_twice_in_a_workflow_is_refused_before_anything_is_submitted() -> None:
    job = count.job(1)
    async with JobScheduler() as scheduler:
        with pytest.raises(ValueError, match="appears twice in the workflow"):
            scheduler.submit(chain(job, group(count.job(2), job)))
        assert scheduler.jobs() == []
        done = count.job(3)
        scheduler.submit(done)
        with pytest.raises(SchedulerError, match="was already submitted"):
            scheduler.submit(chain(count.job(4), done))
        assert len(scheduler.jobs()) == 1
        with pytest.raises(TypeError, match=r"takes depends_on only"):
            scheduler.submit(chain(count.job(5)), priority="high")
        await scheduler.join()


def test_the_workflow_classes_describe_themselves() -> None:
    a, b, c = count.job(1), count.job(2), count.job(3)
    flow = chain(a, group(b, c))
    assert isinstance(flow, Chain) and isinstance(flow.steps[1], Group)
    assert flow.jobs() == [a, b, c]
    assert flow.last() is c
    assert repr(flow) == "chain(flow.count, group(flow.count, flow.count))"
    made = chord([a], add_all)
    assert isinstance(made, Chord) and made.last() is made.callback
