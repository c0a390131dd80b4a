"""The kernel's collaborators on their own: each owns its state and answers
through a narrow interface (jobsched.kernel; docs/architecture.md)."""

from __future__ import annotations

from jobsched import FIFOStrategy, JobStatus, Limits
from jobsched.kernel.graph import DependencyGraph
from jobsched.kernel.queues import Queues
from jobsched.kernel.table import JobTable
from jobsched.testing import VirtualClock
from kernel_support import Noop

S = JobStatus


def table_of(*jobs: Noop, history_limit: int = 10) -> JobTable:
    table = JobTable(history_limit)
    for job in jobs:
        job.seq = table.seq
        table.add(job, None, None)
    return table


def test_the_graph_returns_what_an_ending_releases_and_cancels_without_acting() -> None:
    up, ok, doomed = Noop("up"), Noop("ok"), Noop("doomed")
    table = table_of(up, ok, doomed)
    graph = DependencyGraph(table)
    for dependent in (ok, doomed):
        graph.link(dependent.job_id, [up.job_id], "all_success")
        assert graph.wait(dependent.job_id, {up.job_id}, None) == (True, None)
    assert graph.waiting_on(ok.job_id) == {up.job_id}

    up.status = S.COMPLETED
    assert graph.ended(up.job_id, S.COMPLETED, held=False) == [(ok, None), (doomed, None)]
    assert (ok.status, doomed.status) == (S.PENDING, S.PENDING), "the kernel acts, not the graph"
    assert graph.dependents(up.job_id) == (ok.job_id, doomed.job_id)

    other = Noop("other")
    table.add(other, None, None)
    graph.link(other.job_id, [doomed.job_id], "all_success")
    graph.wait(other.job_id, {doomed.job_id}, None)
    assert graph.ended(doomed.job_id, S.FAILED, held=False) == [
        (other, f"upstream {doomed.job_id} failed")
    ]


def test_a_held_ending_releases_only_once_committed() -> None:
    up, down = Noop("up"), Noop("down")
    graph = DependencyGraph(table_of(up, down))
    graph.link(down.job_id, [up.job_id], "all_success")
    graph.wait(down.job_id, {up.job_id}, None)
    assert graph.ended(up.job_id, S.COMPLETED, held=True) is None
    assert up.job_id in graph.unreleased
    assert graph.release_committed({up.job_id: S.COMPLETED}) == [(down, None)]
    assert not graph.unreleased and not graph.blocked


def test_the_table_bounds_its_history_and_says_which_job_fell_out() -> None:
    first, second = Noop("first"), Noop("second")
    table = JobTable(1)
    first.seq = table.seq
    table.add(first, "k1", "u1")
    second.seq = table.seq
    table.add(second, "k2", None)
    assert (table.holder_of("u1"), table.lookup("k1"), table.unfinished) == (
        first.job_id,
        first.job_id,
        2,
    )
    assert table.ended(first.job_id) is None
    assert table.holder_of("u1") is None, "a unique key is free once its job ends"
    assert table.ended(second.job_id) == first.job_id
    assert table.find(first.job_id) is None and table.lookup("k1") is None
    assert table.idle.is_set()


def test_one_admission_chain_pause_then_starting_then_limits() -> None:
    clock = VirtualClock()
    dropped: list[str] = []
    allowed: set[str] = set()
    queues = Queues(
        FIFOStrategy(),
        clock,
        limits=Limits.coerce({"job_types": {"Noop": 1}}),
        registered_types={Noop: "Noop"},
        starting=lambda job: job.job_id in allowed,
        drop=lambda job: dropped.append(job.job_id),
    )
    gone, first, second = Noop("gone"), Noop("first"), Noop("second")
    for seq, job in enumerate((gone, first, second)):
        job.seq = seq
        queues.push(job)
    allowed.update({first.job_id, second.job_id})
    assert not queues.plain, "a starting check or a limit: workers go through take()"

    assert queues.pause() and queues.take() is None and len(queues) == 3
    assert queues.resume()
    assert queues.take() is first
    assert dropped == [gone.job_id], "the backend no longer holds it: dropped unstarted"
    assert queues.take() is None, "parked: its job type is at its limit"
    assert queues.limiter is not None and queues.limiter.parked == 1
