"""The kernel and its backends: one ready-heap entry shape, shutdowns told
apart from cancels, strategy keys not padded twice, composition errors."""

from __future__ import annotations

import asyncio
from typing import Any

import attrs
import pytest

from jobsched import AsyncJob, JobScheduler, JobStatus, SchedulingStrategy, hookimpl
from store_support import FakeClaim, FakeSharedStore, Gate, gate, jobs_plugin, until


def shared_scheduler(store: FakeSharedStore, **kwargs: Any) -> JobScheduler:
    return JobScheduler("priority", plugins=[jobs_plugin], store=store, **kwargs)


async def outcome_of(store: FakeSharedStore, job_id: str) -> Any:
    """The outcome the store was given for `job_id`, once it is written."""
    while True:
        for outcome in store.outcomes:
            if outcome.job_id == job_id:
                return outcome
        store.finished.clear()
        await asyncio.wait_for(store.finished.wait(), 10)


@attrs.define(slots=True, eq=False, repr=False)
class Hold(Gate):
    """A `Gate` of another job type, so a limit on ``gate`` does not hold it."""


class hold_plugin:
    @staticmethod
    @hookimpl
    def jobsched_register_job_types(register: Any) -> None:
        register("hold", Hold)


async def test_a_claimed_job_requeued_by_a_limit_is_ordered_with_the_others() -> None:
    # Shared mode pushed claimed jobs as (key, seq, job) while a limit requeued
    # them flattened, (*key, seq, job): comparing the two raised TypeError, and
    # the worker lost the job that was finishing.
    a_started, a_release = gate("a")
    h_started, h_release = gate("h")
    c_started, c_release = gate("c")
    store = FakeSharedStore()
    store.queue = [
        FakeClaim("job-a", "gate", {"tag": "a"}),
        FakeClaim("job-c", "gate", {"tag": "c"}),
        FakeClaim("job-h", "hold", {"tag": "h"}),
        FakeClaim("job-d", "noop", {"label": "d"}),
    ]
    s = JobScheduler(
        "priority",
        plugins=[jobs_plugin, hold_plugin],
        store=store,
        num_workers=2,
        limits={"job_types": {"gate": 1}},
    )
    async with s:
        # Worker 1 runs a; worker 2 parks c (one gate at a time) and runs h:
        # d stays queued, as the claim put it.
        await asyncio.wait_for(asyncio.gather(a_started.wait(), h_started.wait()), 10)
        a_release.set()  # a ends: c is requeued beside d
        await asyncio.wait_for(c_started.wait(), 10)
        c_release.set()
        h_release.set()
        ids = ("job-a", "job-c", "job-h", "job-d")
        statuses = {job_id: (await outcome_of(store, job_id)).status for job_id in ids}
    assert statuses == dict.fromkeys(ids, "completed")


async def test_a_shutdown_hands_a_claimed_job_back_instead_of_cancelling_it() -> None:
    # Shared mode told a shutdown from a cancel by comparing the job's error
    # text with "scheduler shut down"; stop(cancel_running=True) set another
    # text, so the job was cancelled for the whole cluster. The kernel now
    # tells the backend in so many words (Backend.interrupted).
    started, _ = gate("s")
    store = FakeSharedStore()
    store.queue = [FakeClaim("job-s", "gate", {"tag": "s"})]
    s = JobScheduler("priority", plugins=[jobs_plugin], store=store, num_workers=1)
    await s.start()
    await asyncio.wait_for(started.wait(), 10)
    await s.stop(cancel_running=True)
    (outcome,) = store.outcomes
    assert (outcome.job_id, outcome.status) == ("job-s", "retry_wait")
    assert outcome.error == "scheduler shut down"


async def test_a_shut_down_worker_hands_its_job_back_whatever_the_job_said() -> None:
    store = FakeSharedStore()
    started, _ = gate("w")
    store.queue = [FakeClaim("job-w", "gate", {"tag": "w"})]
    s = JobScheduler("priority", plugins=[jobs_plugin], store=store, num_workers=1)
    await s.start()
    await asyncio.wait_for(started.wait(), 10)
    stopping = asyncio.ensure_future(s.stop())
    await until(lambda: s.kernel.stopping)
    s.kernel.workers.interrupt_running()  # what `jobsched worker` does when its grace period ends
    await stopping
    (outcome,) = store.outcomes
    assert (outcome.status, outcome.error) == ("retry_wait", "scheduler shut down")


class NoSeqStrategy(SchedulingStrategy):
    """Priority order whose key does not end in the submit order."""

    def key(self, job: Any) -> tuple[int]:
        return (-job.priority,)


class Sleepy(AsyncJob):
    async def run(self) -> None:
        return None


def test_a_key_that_ends_in_the_submit_order_is_not_given_it_twice() -> None:
    # The heap entry was (*key, seq, job): for every built-in strategy, whose
    # key ends in seq already, one element per pending job too many, compared
    # on every heap operation. The key the heap uses is now the strategy's own.
    for name in ("fifo", "priority", "aging", "edf"):
        scheduler = JobScheduler(name, plugins=[])
        job = Sleepy("job")
        scheduler.submit(job)
        assert scheduler.kernel.port.sort_key(job) == scheduler.strategy.key(job), name
        assert scheduler.kernel.port.sort_key(job)[-1] == job.seq, name


def test_the_kernel_orders_by_the_strategy_key_and_breaks_ties_by_submit_order() -> None:
    scheduler = JobScheduler(NoSeqStrategy(), plugins=[])
    first, second = Sleepy("first"), Sleepy("second")
    scheduler.submit(first)
    scheduler.submit(second)
    assert scheduler.kernel.port.sort_key(first) == (-first.priority, first.seq)
    priority = JobScheduler("priority", plugins=[])
    job = Sleepy("job")
    priority.submit(job)
    assert priority.kernel.port.sort_key(job) == (-job.priority, job.seq)
    assert job.status is JobStatus.PENDING


# ── composition: the backend is picked once, with clear errors ─────────
class OneOwnerStore:
    """A durable store with the one-owner contract only."""

    url = "one-owner://"
    durable = True
    shared = False

    async def open(self, context: Any) -> Any: ...

    async def write(self, batch: Any) -> None: ...

    async def close(self) -> None: ...


def test_shared_true_on_a_store_that_cannot_be_shared_says_so() -> None:
    with pytest.raises(TypeError, match=r"shared=True: .* is not a shared store"):
        JobScheduler(store=OneOwnerStore(), shared=True)  # type: ignore[arg-type]


def test_shared_true_without_a_store_says_so() -> None:
    with pytest.raises(ValueError, match="shared=True needs a durable store"):
        JobScheduler(shared=True)


def test_the_backend_follows_the_store(tmp_path: Any) -> None:
    from jobsched.backends import JournalBackend, LocalBackend, SharedBackend

    assert isinstance(JobScheduler().kernel.backend, LocalBackend)
    assert type(JobScheduler(store="memory://").kernel.backend) is LocalBackend
    owned = JobScheduler(store=f"sqlite:///{tmp_path}/j.db")
    assert isinstance(owned.kernel.backend, JournalBackend)
    assert isinstance(shared_scheduler(FakeSharedStore()).kernel.backend, SharedBackend)


# ── essential defaults and lazy executors ───────────────────────────────
def test_a_missing_default_strategy_says_it_is_the_default() -> None:
    # Built-ins cannot be denied (essential plugins); a manager without them can lack it.
    from jobsched import PluginError, PluginManager
    from jobsched_plugins import async_executor, fifo

    plugins = PluginManager([fifo, async_executor], builtins=False)
    with pytest.raises(PluginError, match=r"'priority'.*it is the default strategy"):
        JobScheduler(plugins=plugins)
    JobScheduler("fifo", plugins=plugins)  # an explicit strategy needs no default


def test_a_missing_async_executor_says_it_is_the_default() -> None:
    from jobsched import PluginError, PluginManager
    from jobsched_plugins import fifo

    scheduler = JobScheduler("fifo", plugins=PluginManager([fifo], builtins=False))
    with pytest.raises(PluginError, match=r"'async'.*it is the default executor"):
        scheduler.submit(Sleepy("job"))


class broken_executor_plugin:
    @staticmethod
    @hookimpl
    def jobsched_register_executors(register: Any) -> None:
        def broken(workers: int) -> Any:
            raise RuntimeError("no GPU here")

        register("gpu", broken)


async def test_a_broken_executor_fails_only_the_jobs_that_ask_for_it() -> None:
    scheduler = JobScheduler("fifo", plugins=[broken_executor_plugin])  # composes fine
    gpu = Sleepy("gpu")
    gpu.model = "gpu"  # type: ignore[assignment]
    plain = Sleepy("plain")
    async with scheduler:
        gpu_id = scheduler.submit(gpu)
        plain_id = scheduler.submit(plain)
        await scheduler.join()
    failed = scheduler.get(gpu_id)
    assert failed.status is JobStatus.FAILED and failed.attempts == 1  # not retried
    assert "executor 'gpu' from plugin" in (failed.last_error or "")
    assert "no GPU here" in (failed.last_error or "")
    assert "JOBSCHED_DISABLE_PLUGINS=" in (failed.last_error or "")
    assert scheduler.get(plain_id).status is JobStatus.COMPLETED


@pytest.mark.parametrize("limits", [None, {"job_types": {"gate": 1}}])
async def test_a_claim_the_backend_will_not_start_is_dropped_without_a_transition(
    limits: Any,
) -> None:
    """`Backend.starting` says no (a lease that may have run out): the kernel
    forgets the job, no listener sees it, and a limit's slot is not kept."""
    from jobsched.testing import VirtualClock

    first_started, first_release = gate("first")
    again_started, again_release = gate("again")
    store = FakeSharedStore()
    store.queue = [
        FakeClaim("job-1", "gate", {"tag": "first"}),
        FakeClaim("job-2", "gate", {"tag": "again"}),
    ]
    released: list[Any] = []

    async def release(job_ids: Any, owner: str) -> int:
        released.extend(job_ids)
        return len(job_ids)

    store.release = release  # type: ignore[method-assign]
    clock = VirtualClock()
    s = JobScheduler(
        "priority", plugins=[jobs_plugin], store=store, num_workers=1, clock=clock, limits=limits
    )
    seen: list[tuple[str, str]] = []
    s.add_listener(lambda job, old, new: seen.append((job.job_id, new.value)))
    async with s:
        await asyncio.wait_for(first_started.wait(), 10)
        await until(lambda: s.kernel.backend.leases_held == 2)  # type: ignore[attr-defined]
        await clock.jump(store.lease_seconds)  # paused as long as the lease lasts
        first_release.set()
        await until(lambda: released == ["job-2"])
        assert not again_started.is_set()
        assert ("job-2", "running") not in seen and s.job_counts()["pending"] == 0
        # Claimed afresh, it runs: no limit slot was kept for the dropped claim.
        store.queue = [FakeClaim("job-2", "gate", {"tag": "again"})]
        store.on_work()
        await asyncio.wait_for(again_started.wait(), 10)
        again_release.set()
        assert (await outcome_of(store, "job-2")).status == "completed"
    assert [e for e in seen if e[0] == "job-2"] == [("job-2", "running"), ("job-2", "completed")]
