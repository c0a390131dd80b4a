"""Property-based tests: heap order per strategy, and a stateful model of the lifecycle."""

from __future__ import annotations

import asyncio
import inspect
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from jobsched import (
    AgingPriorityStrategy,
    EarliestDeadlineFirstStrategy,
    FIFOStrategy,
    Job,
    JobPriority,
    JobScheduler,
    JobStatus,
    NonRetryableError,
    PriorityStrategy,
    RetryPolicy,
    SchedulingStrategy,
)
from jobsched.testing import VirtualClock
from kernel_support import Gate, Noop, Transitions, builtin_plugins, settle

# A hang is a failure, not a stuck suite.
pytestmark = pytest.mark.timeout(30)

S = JobStatus
# Modest example counts keep this file to a second or two. No deadline and no
# too-slow health check: on a loaded 2-core CI machine both fail for the wrong reason.
QUICK: dict[str, Any] = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
STRATEGIES = {
    "fifo": FIFOStrategy,
    "priority": PriorityStrategy,
    "aging": AgingPriorityStrategy,
    "edf": EarliestDeadlineFirstStrategy,
}

job_specs = st.lists(
    st.tuples(
        st.sampled_from(list(JobPriority)),
        st.one_of(st.none(), st.sampled_from([0.0, 5.0, 5.0, 12.5, 100.0])),  # deadline
        st.sampled_from([0.0, 0.0, 0.5, 3.0, 25.0]),  # seconds before this submit (aging)
        st.booleans(),  # cancelled before start
    ),
    max_size=25,
)


def _build(specs: list[tuple[JobPriority, float | None, float, bool]]) -> list[tuple[Job, float]]:
    return [
        (Noop(f"j{i}", priority=priority, deadline=deadline), wait)
        for i, (priority, deadline, wait, _) in enumerate(specs)
    ]


async def _run_in_heap_order(name: str, specs: list[Any]) -> tuple[list[str], list[Job]]:
    clock = VirtualClock()
    recorder = Transitions()
    scheduler = JobScheduler(name, num_workers=1, clock=clock, plugins=builtin_plugins())
    scheduler.add_listener(recorder)
    jobs = _build(specs)
    for job, wait in jobs:
        await clock.advance(wait)
        scheduler.submit(job)
    for (job, _), spec in zip(jobs, specs, strict=True):
        if spec[3]:
            scheduler.cancel(job.job_id)
    async with scheduler:
        await asyncio.wait_for(scheduler.join(), 10)
    assert recorder.problems == []
    return recorder.started(), [job for job, _ in jobs]


@settings(max_examples=40, **QUICK)
@given(name=st.sampled_from(sorted(STRATEGIES)), specs=job_specs)
def test_one_worker_runs_jobs_in_exactly_the_order_of_their_keys(
    name: str, specs: list[Any]
) -> None:
    started, jobs = asyncio.run(_run_in_heap_order(name, specs))
    strategy = STRATEGIES[name]()
    live = [j for j in jobs if j.status is not S.CANCELLED]
    expected = [j.job_id for j in sorted(live, key=lambda j: (strategy.key(j), j.seq))]
    assert started == expected
    assert all(j.status is S.COMPLETED for j in live)
    assert len(live) == sum(not spec[3] for spec in specs)


@settings(max_examples=60, **QUICK)
@given(
    name=st.sampled_from(sorted(STRATEGIES)),
    ops=st.lists(
        st.one_of(
            st.tuples(st.just("submit"), st.sampled_from(list(JobPriority)), st.integers(0, 3)),
            st.tuples(st.just("pop")),
            st.tuples(st.just("cancel"), st.integers(0, 50)),
            st.tuples(st.just("wait"), st.sampled_from([0.5, 4.0, 30.0])),
        ),
        max_size=60,
    ),
)
def test_every_pop_takes_the_smallest_live_key(name: str, ops: list[tuple[Any, ...]]) -> None:
    """Interleave submits, cancels and pops on the ready heap; each pop is the model's minimum."""
    asyncio.run(_pop_in_key_order(name, ops))


async def _pop_in_key_order(name: str, ops: list[tuple[Any, ...]]) -> None:
    clock = VirtualClock()
    scheduler = JobScheduler(name, num_workers=1, clock=clock, plugins=builtin_plugins())
    strategy: SchedulingStrategy = scheduler.strategy
    jobs: list[Job] = []
    live: dict[str, Job] = {}
    for op in ops:
        if op[0] == "submit":
            job = Noop(f"j{len(jobs)}", priority=op[1], deadline=[None, 1.0, 2.0, 3.0][op[2]])
            scheduler.submit(job)
            jobs.append(job)
            live[job.job_id] = job
        elif op[0] == "cancel" and jobs:
            job = jobs[op[1] % len(jobs)]
            if job.status is S.RUNNING:
                continue  # popped by hand: no worker runs it, so there is no attempt to cancel
            assert scheduler.cancel(job.job_id) == (job.job_id in live)
            live.pop(job.job_id, None)
        elif op[0] == "wait":
            await clock.advance(op[1])
        elif op[0] == "pop":
            popped = scheduler.kernel.queues.take()
            if popped is not None:
                popped.status = S.RUNNING  # as a worker does with what it takes
            if not live:
                assert popped is None
                continue
            best = min(live.values(), key=lambda j: (strategy.key(j), j.seq))
            assert popped is best
            assert popped.status is S.RUNNING
            del live[popped.job_id]


@settings(max_examples=50, **QUICK)
@given(
    priorities=st.lists(st.sampled_from(list(JobPriority)), min_size=2, max_size=2),
    submits=st.lists(st.integers(0, 1000), min_size=2, max_size=2),
    later=st.integers(0, 1000),
)
def test_aging_key_order_is_the_effective_priority_order_at_any_time(
    priorities: list[JobPriority], submits: list[int], later: int
) -> None:
    """priority + r*(now - t0) ranks jobs the same at every now: the key is time-invariant."""
    rate = 0.125  # a power of two keeps the arithmetic exact
    aging = AgingPriorityStrategy(rate)
    a, b = (Noop(str(i), priority=p) for i, p in enumerate(priorities))
    a.submitted_at, b.submitted_at = (float(t) for t in submits)
    a.seq, b.seq = 0, 1
    now = float(max(submits) + later)

    def effective(j: Job) -> float:
        return j.priority + rate * (now - j.submitted_at)

    if effective(a) != effective(b):
        assert (aging.key(a) < aging.key(b)) == (effective(a) > effective(b))
    else:
        assert aging.key(a) < aging.key(b), "a tie goes to submit order"


# ── the stateful model ────────────────────────────────────────────────
WORKERS = 2


class SchedulerMachine(RuleBasedStateMachine):
    """Drives one scheduler with submit/cancel/complete/fail/timeout/tick steps.

    Every job is a `Gate`, so the test decides each attempt's outcome. After
    every step the loop is settled and the model is checked: every transition
    legal and consistent, RUNNING exactly when an attempt is waiting, never
    more than `WORKERS` attempts in flight.
    """

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = VirtualClock()
        self.recorder = Transitions()
        self.scheduler = JobScheduler(
            "priority",
            num_workers=WORKERS,
            clock=self.clock,
            rng=random.Random(0),
            plugins=builtin_plugins(),
        )
        self.scheduler.add_listener(self.recorder)
        self.jobs: list[Gate] = []
        self.loop.run_until_complete(self.scheduler.start())

    def act(self, fn: Any) -> Any:
        async def step() -> Any:
            result = fn()
            if inspect.isawaitable(result):  # moving the clock
                result = await result
            await settle(30)
            return result

        return self.loop.run_until_complete(step())

    def waiting(self) -> list[Gate]:
        return [j for j in self.jobs if j.waiting]

    @rule(
        priority=st.sampled_from(list(JobPriority)),
        timeout=st.sampled_from([None, 1.0, 2.5]),
        retries=st.integers(0, 2),
        delay=st.sampled_from([0.0, 0.0, 1.0, 3.0]),
        deps=st.lists(st.integers(0, 10**6), max_size=2),
    )
    def submit(
        self,
        priority: JobPriority,
        timeout: float | None,
        retries: int,
        delay: float,
        deps: list[int],
    ) -> None:
        job = Gate(
            f"g{len(self.jobs)}",
            priority=priority,
            timeout=timeout,
            retry=RetryPolicy(max_retries=retries, base_delay=1.0, jitter=True),
        )
        depends_on = [self.jobs[i % len(self.jobs)].job_id for i in deps] if self.jobs else []
        self.act(lambda: self.scheduler.submit(job, delay=delay, depends_on=depends_on))
        self.jobs.append(job)

    @precondition(lambda self: self.jobs)
    @rule(i=st.integers(0, 10**6))
    def cancel(self, i: int) -> None:
        job = self.jobs[i % len(self.jobs)]
        was_finished = job.status.is_terminal
        before = job.status
        assert self.act(lambda: self.scheduler.cancel(job.job_id)) is not was_finished
        if not was_finished:
            assert job.status is S.CANCELLED, f"{job} was {before.name}"
        else:
            assert job.status is before

    @precondition(lambda self: self.waiting())
    @rule(i=st.integers(0, 10**6))
    def complete(self, i: int) -> None:
        job = self.waiting()[i % len(self.waiting())]
        self.act(lambda: job.open(f"done by {job.name}"))
        assert job.status is S.COMPLETED
        assert job.result == f"done by {job.name}"

    @precondition(lambda self: self.waiting())
    @rule(i=st.integers(0, 10**6), fatal=st.booleans())
    def fail(self, i: int, fatal: bool) -> None:
        job = self.waiting()[i % len(self.waiting())]
        self.act(lambda: job.fail(NonRetryableError("fatal") if fatal else RuntimeError("oops")))
        if fatal or job.attempts > job.retry.max_retries:
            assert job.status is S.FAILED
        else:
            assert job.status is S.RETRY_WAIT
            assert job.run_at > self.clock.now()

    @precondition(lambda self: any(j.timeout is not None for j in self.waiting()))
    @rule(i=st.integers(0, 10**6))
    def timeout(self, i: int) -> None:
        candidates = [j for j in self.waiting() if j.timeout is not None]
        job = candidates[i % len(candidates)]
        assert job.started_at is not None and job.timeout is not None
        self.act(lambda: self.clock.advance_to(job.started_at + job.timeout))
        assert job.saw_cancel >= 1
        if job.attempts > job.retry.max_retries:
            assert job.status is S.TIMED_OUT
        else:
            assert job.status is S.RETRY_WAIT

    @rule(dt=st.sampled_from([0.25, 1.0, 2.5, 5.0]))
    def tick(self, dt: float) -> None:
        self.act(lambda: self.clock.advance(dt))

    @invariant()
    def only_legal_transitions(self) -> None:
        assert self.recorder.problems == []
        for job in self.jobs:
            assert self.recorder.last.get(job.job_id, S.PENDING) is job.status

    @invariant()
    def running_means_an_attempt_is_in_flight(self) -> None:
        running = [j for j in self.jobs if j.status is S.RUNNING]
        assert len(running) <= WORKERS
        assert self.scheduler.kernel.running == len(running)
        assert self.scheduler.peak_running <= WORKERS
        for job in self.jobs:
            assert (job.status is S.RUNNING) == job.waiting, job

    def teardown(self) -> None:
        try:
            # Drive everything to an end: finish every attempt, let every timer fire.
            for _ in range(100):
                if all(j.status.is_terminal for j in self.jobs):
                    break
                for job in self.waiting():
                    job.open("drained")
                self.act(lambda: self.clock.advance(10.0))
            self.loop.run_until_complete(asyncio.wait_for(self.scheduler.join(), 5))
            assert all(j.status.is_terminal for j in self.jobs)
            assert self.recorder.problems == []
            for job in self.jobs:
                path = self.recorder.path(job.job_id)
                assert path[-1].is_terminal and not any(s.is_terminal for s in path[:-1])
        finally:
            self.loop.run_until_complete(self.scheduler.stop())
            self.loop.close()


SchedulerMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=40, **QUICK)
TestSchedulerStateMachine = SchedulerMachine.TestCase
