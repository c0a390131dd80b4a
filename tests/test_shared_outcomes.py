"""Outcomes on the shared stores (issue 20, items 1 and 5), on PostgreSQL and SQLite:

- one outcome a store cannot hold (a NUL in a result or an error text, a
  value the store refuses) is that job's business: the other outcomes of its
  batch land, once, and the job ends once;
- outcomes wait for a store that stopped answering, and land when it answers
  again: nothing finished runs again;
- a job whose lease keeps expiring fails after `max_lease_expiries`, instead
  of walking the cluster.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import pytest

from jobsched import (
    AsyncJob,
    Job,
    JobScheduler,
    JobStatus,
    PluginManager,
    ResultUnavailableError,
    RetryPolicy,
    StoreError,
    hookimpl,
)
from jobsched.store import NewJob, Outcome, SharedJobRow, encode_result, storable_text
from shared_support import Target
from store_support import FakeClaim, FakeSharedStore

# ── jobs that end as a test says, all at once ─────────────────────────
#: Opened by the test once every job runs: the attempts then end in one
#: iteration of the loop, so their outcomes are written in one batch.
GATE: dict[str, asyncio.Event] = {}
#: Runs of each job, by tag (the jobs run in the test's process).
RUNS: Counter[str] = Counter()


@attrs.define(eq=False)
class Ends(AsyncJob):
    """Waits for the gate, then returns `{"tag": tag}`, returns text with a NUL
    (``nul_result``) or raises an error whose message has one (``nul_error``)."""

    tag: str = ""
    how: str = "ok"

    def __attrs_post_init__(self) -> None:
        Job.__init__(self, f"ends-{self.tag}")
        self.retry = RetryPolicy(max_retries=0)

    async def run(self) -> Any:
        RUNS[self.tag] += 1
        await GATE["open"].wait()
        if self.how == "nul_result":
            return "a\x00b"
        if self.how == "nul_error":
            raise ValueError("bad \x00 byte")
        return {"tag": self.tag}


class ends_plugin:
    @staticmethod
    @hookimpl
    def jobsched_register_job_types(register: Callable[[str, Any], None]) -> None:
        register("ends", Ends)


@pytest.fixture(autouse=True)
def fresh_gate() -> Iterator[None]:
    GATE["open"] = asyncio.Event()
    RUNS.clear()
    yield
    GATE.clear()


class Finishes:
    """Wraps a store's `finish` (on the store object): records each batch, and
    raises `StoreError` for a batch while `refuse(batch)` says so."""

    def __init__(self, store: Any, refuse: Callable[[list[Outcome]], bool]) -> None:
        self.inner = store.finish
        self.refuse = refuse
        self.batches: list[list[Outcome]] = []
        self.refused = 0
        self.changed = asyncio.Event()
        store.finish = self

    async def __call__(self, outcomes: list[Outcome], owner: str) -> list[str]:
        self.changed.set()
        if self.refuse(list(outcomes)):
            self.refused += 1
            raise StoreError("fake-store: refused")
        self.batches.append(list(outcomes))
        written: list[str] = await self.inner(outcomes, owner)
        return written

    async def until(self, condition: Callable[[], bool]) -> None:
        while not condition():
            self.changed.clear()
            await self.changed.wait()


async def run_together(
    target: Target, jobs: list[Ends], finishes: Callable[[Any], Finishes]
) -> tuple[list[str], Finishes, JobScheduler]:
    """Run `jobs` on one scheduler until each has ended there (their outcomes
    may not be written yet); returns their ids, the `Finishes` and the
    scheduler (started: the caller stops it)."""
    store = target.store()
    wrapper = finishes(store)
    s = JobScheduler(
        store=store,
        shared=True,
        num_workers=len(jobs),
        plugins=PluginManager([ends_plugin], autoload=False),
    )
    ended = asyncio.Event()
    running: set[str] = set()
    done: set[str] = set()

    def follow(job: Job, old: JobStatus, new: JobStatus) -> None:
        if new is JobStatus.RUNNING:
            running.add(job.job_id)
            if len(running) == len(jobs):
                GATE["open"].set()
        elif new.is_terminal:
            done.add(job.job_id)
            if len(done) == len(jobs):
                ended.set()

    s.add_listener(follow)
    await s.start()
    ids = [s.submit(job) for job in jobs]
    await asyncio.wait_for(ended.wait(), 60)
    return ids, wrapper, s


# ── item 1: one bad outcome in a batch ────────────────────────────────
async def test_nul_text_in_a_batch_ends_only_its_job_and_the_rest_complete_once(
    target: Target,
) -> None:
    jobs = [Ends(tag="g1"), Ends(tag="nr", how="nul_result"), Ends(tag="ne", how="nul_error")]
    jobs.append(Ends(tag="g2"))
    ids, finishes, s = await run_together(target, jobs, lambda st: Finishes(st, lambda b: False))
    try:
        await s.flush()
        rows = {r.job_id: r for r in await s.kernel.backend.store.jobs(ids)}  # type: ignore[attr-defined]
        history = {i: (await s.kernel.backend.store.get(i)).history for i in ids}  # type: ignore[attr-defined]
    finally:
        await s.stop()
    g1, nr, ne, g2 = (rows[i] for i in ids)
    # The scenario: a NUL outcome was written in one batch with good ones.
    assert any(len(b) > 1 for b in finishes.batches)
    assert (g1.status, g1.result, g2.status, g2.result) == (
        "completed",
        {"tag": "g1"},
        "completed",
        {"tag": "g2"},
    )
    # Every store keeps the same: the result described as its repr (as a
    # result JSON cannot hold is), the error with its NUL escaped.
    assert nr.status == "completed"
    assert nr.result == {
        "$repr": "'a\\x00b'",
        "$note": "not storable: its text holds a NUL character (\\x00)",
    }
    assert (ne.status, ne.last_error) == ("failed", "ValueError: bad \\x00 byte")
    assert [(a.status, a.error) for a in history[ne.job_id]] == [
        ("failed", "ValueError: bad \\x00 byte")
    ]
    assert RUNS == {"g1": 1, "nr": 1, "ne": 1, "g2": 1}
    assert all(len(h) == 1 for h in history.values())


async def test_an_outcome_the_store_refuses_fails_its_job_and_the_batch_lands(
    target: Target,
) -> None:
    # A value the store will not hold that jobsched did not foresee: the store
    # refuses every write holding that completed outcome.
    def refuse(batch: list[Outcome]) -> bool:
        return any(o.status == "completed" and o.result == '{"tag":"huge"}' for o in batch)

    jobs = [Ends(tag="g1"), Ends(tag="huge"), Ends(tag="g2")]
    ids, _, s = await run_together(target, jobs, lambda st: Finishes(st, refuse))
    try:
        await s.flush()
        rows = {r.job_id: r for r in await s.kernel.backend.store.jobs(ids)}  # type: ignore[attr-defined]
    finally:
        await s.stop()
    g1, huge, g2 = (rows[i] for i in ids)
    assert (g1.status, g2.status) == ("completed", "completed")
    assert huge.status == "failed"
    assert huge.result is None
    assert huge.last_error == (
        "the store refused this attempt's outcome (completed): StoreError: fake-store: refused"
    )
    assert RUNS == {"g1": 1, "huge": 1, "g2": 1}


async def test_outcomes_wait_for_a_store_that_stopped_answering(target: Target) -> None:
    down = True
    ids, finishes, s = await run_together(
        target,
        [Ends(tag="a"), Ends(tag="b"), Ends(tag="c")],
        lambda st: Finishes(st, lambda batch: down),
    )
    try:
        # Several rounds refused (each: the batch, then its rows, twice, then a
        # failure in a row's place): nothing is given up meanwhile.
        await asyncio.wait_for(finishes.until(lambda: finishes.refused >= 8), 60)
        down = False
        await s.flush()
        rows = await s.kernel.backend.store.jobs(ids)  # type: ignore[attr-defined]
    finally:
        await s.stop()
    assert [(r.status, r.result) for r in rows] == [
        ("completed", {"tag": "a"}),
        ("completed", {"tag": "b"}),
        ("completed", {"tag": "c"}),
    ]
    assert RUNS == {"a": 1, "b": 1, "c": 1}
    assert sorted(o.job_id for b in finishes.batches for o in b) == sorted(ids)  # once each


async def test_stop_gives_up_outcomes_a_dead_store_never_takes(target: Target) -> None:
    ids, finishes, s = await run_together(
        target, [Ends(tag="a")], lambda st: Finishes(st, lambda batch: True)
    )
    await asyncio.wait_for(finishes.until(lambda: finishes.refused >= 3), 60)
    await asyncio.wait_for(s.stop(), 60)  # returns: the leases expire, the job runs again
    probe = await target.open_store()
    try:
        row = await probe.get(ids[0])
    finally:
        await probe.close()
    assert row is not None and row.status == "running"


# ── the same text on every store ──────────────────────────────────────
def test_results_every_store_can_keep_are_encoded_as_they_are() -> None:
    for value in ["plain", "emoji \U0001f600", "a \\u0000 b", {"k": ["é", 1, None]}]:
        assert encode_result(value) is not None
        assert "$repr" not in str(encode_result(value))


@pytest.mark.parametrize(
    ("value", "holds"),
    [
        ("a\x00b", "a NUL character (\\x00)"),
        ({"k\x00": 1}, "a NUL character (\\x00)"),
        ([1, {"x": "\ud800"}], "a lone surrogate (not Unicode text)"),
    ],
)
def test_results_no_store_can_keep_are_described(value: Any, holds: str) -> None:
    stored = json.loads(encode_result(value) or "")
    assert stored == {
        "$repr": storable_text(repr(value)),
        "$note": f"not storable: its text holds {holds}",
    }
    assert "\x00" not in stored["$repr"]


def test_a_dependent_hears_why_a_described_result_is_unavailable() -> None:
    from jobsched.backends.upstreams import stored_result

    now = time.time()
    row = SharedJobRow(
        job_id="up",
        key=None,
        type="ends",
        args={},
        options={},
        status="completed",
        attempts=1,
        run_at=now,
        submitted_at=now,
        seq=1,
        sort_key=(0.0,),
        unmet=0,
        lease_owner=None,
        lease_expires=None,
        cancel_requested=False,
        result=json.loads(encode_result("a\x00b") or ""),
        last_error=None,
        schedule_id=None,
        submitted_by=None,
        started_at=now,
        finished_at=now,
    )
    with pytest.raises(ResultUnavailableError, match=r"stored as its repr \(not storable: its"):
        stored_result(row, "up")


def test_storable_text_escapes_what_postgresql_refuses() -> None:
    assert storable_text("bad \x00 byte") == "bad \\x00 byte"
    assert storable_text("half \ud800 pair") == "half \\ud800 pair"
    assert storable_text("fine é \U0001f600") == "fine é \U0001f600"
    assert storable_text(None) is None


# ── item 5: the lease-expiry bound ────────────────────────────────────
def new_job(job_id: str, *, deps: tuple[str, ...] = ()) -> NewJob:
    now = time.time()
    return NewJob(
        job_id=job_id,
        type="noop",
        args={},
        run_at=now,
        submitted_at=now,
        sort_key=(0.0,),
        depends_on=deps,
    )


async def test_a_job_whose_lease_keeps_expiring_fails_at_the_bound(target: Target) -> None:
    store = await target.open_store()
    try:
        await store.insert([new_job("poison"), new_job("after", deps=("poison",))])
        for n in (1, 2, 3):
            rows, _ = await store.claim(5, f"w{n}")  # each worker dies holding it
            assert [r.job_id for r in rows] == ["poison"]
            await target.expire_lease(store, "poison")
            assert await store.reap_expired(3) == 1
            row = await store.get("poison")
            assert row.lease_expiries == n
            assert row.status == ("failed" if n == 3 else "pending")
        assert await store.claim(5, "w4") == ([], None)  # it walks no further
        poison, after = await store.get("poison"), await store.get("after")
        error = (
            "lease expired 3 times: its worker stopped renewing it each time "
            "(died, stalled or blocked); not run again (max_lease_expiries=3)"
        )
        assert (poison.last_error, poison.attempts, poison.lease_owner) == (error, 3, None)
        assert poison.finished_at is not None
        assert [(a.number, a.status, a.error, a.worker) for a in poison.history] == [
            (1, "lease_expired", "lease expired: its worker stopped renewing it", "w1"),
            (2, "lease_expired", "lease expired: its worker stopped renewing it", "w2"),
            (3, "lease_expired", error, "w3"),
        ]
        # Its dependent is settled as for any failure.
        assert (after.status, after.last_error) == ("cancelled", "upstream poison failed")
        assert (await store.counts()).get("failed") == 1
        # An operator's retry gives it a fresh count.
        assert await store.retry(["poison"]) == ["poison"]
        assert (await store.get("poison")).lease_expiries == 0
    finally:
        await store.close()


async def test_a_job_finishing_between_lease_expiries_still_counts_them(target: Target) -> None:
    store = await target.open_store()
    try:
        await store.insert([new_job("flaky")])
        await store.claim(1, "w1")
        await target.expire_lease(store, "flaky")
        assert await store.reap_expired(2) == 1
        await store.claim(1, "w2")  # this attempt fails and is retried
        retry = Outcome(job_id="flaky", status="retry_wait", error="E", run_at=0.0)
        assert await store.finish([retry], "w2") == ["flaky"]
        await store.claim(1, "w3")
        await target.expire_lease(store, "flaky")
        assert await store.reap_expired(2) == 1
        row = await store.get("flaky")
        assert (row.status, row.lease_expiries, row.attempts) == ("failed", 2, 3)
        assert row.last_error.startswith("lease expired 2 times")
    finally:
        await store.close()


@pytest.mark.parametrize("bad", [0, -1, 1.5, "3"])
async def test_a_bound_below_one_is_refused(target: Target, bad: Any) -> None:
    store = await target.open_store()
    try:
        with pytest.raises(ValueError, match="max_lease_expiries must be a whole number"):
            await store.reap_expired(bad)
    finally:
        await store.close()


async def test_the_scheduler_reaps_with_its_bound() -> None:
    class Reaping(FakeSharedStore):
        lease_seconds = 0.03  # renewals (and reaps) every 10 ms

        def __init__(self) -> None:
            super().__init__()
            self.bounds: list[int] = []
            self.reaped = asyncio.Event()

        async def reap_expired(self, max_expiries: int = 3) -> int:
            self.bounds.append(max_expiries)
            self.reaped.set()
            return 0

    for given, used in ((None, 3), (5, 5)):
        store = Reaping()
        s = JobScheduler(store=store, shared=True, max_lease_expiries=given)
        async with s:
            await asyncio.wait_for(store.reaped.wait(), 60)
        assert set(store.bounds) == {used}


def test_max_lease_expiries_is_checked_and_needs_a_shared_store() -> None:
    with pytest.raises(ValueError, match="max_lease_expiries must be a whole number"):
        JobScheduler(store=FakeSharedStore(), shared=True, max_lease_expiries=0)
    with pytest.raises(ValueError, match="bounds the leases of a shared store; this scheduler"):
        JobScheduler(max_lease_expiries=3)


async def test_the_lease_of_an_outcome_waiting_for_the_store_is_renewed() -> None:
    # A store that answers renewals but holds a finish (slow, or taking the
    # outcome only after a while): the job's lease must not run out meanwhile,
    # or another worker would run it again before its outcome lands.
    class SlowFinish(FakeSharedStore):
        lease_seconds = 0.03  # renewals every 10 ms

        def __init__(self) -> None:
            super().__init__()
            self.renewed: set[str] = set()
            self.renewal = asyncio.Event()
            self.answer = asyncio.Event()

        async def renew(self, job_ids: Any, owner: str) -> set[str]:
            self.renewed.update(job_ids)
            self.renewal.set()
            return set()

        async def finish(self, outcomes: list[Any], owner: str) -> list[str]:
            await self.answer.wait()
            return await super().finish(outcomes, owner)

    store = SlowFinish()
    store.queue = [FakeClaim("job-x", "ends", {"tag": "x"})]
    GATE["open"].set()
    s = JobScheduler(store=store, plugins=[ends_plugin], num_workers=1)
    ended = asyncio.Event()
    s.add_listener(lambda job, old, new: new.is_terminal and ended.set())
    async with s:
        await asyncio.wait_for(ended.wait(), 10)
        store.renewed.clear()

        async def renewed() -> None:  # while its outcome waits
            while "job-x" not in store.renewed:
                store.renewal.clear()
                await store.renewal.wait()

        try:
            await asyncio.wait_for(renewed(), 10)
        finally:
            store.answer.set()
        await s.flush()
    assert [(o.job_id, o.status) for o in store.outcomes] == [("job-x", "completed")]
