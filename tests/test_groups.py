"""Tenant fairness (issue 23, item 4): a job's group, the per-group limit, and
claims that take groups in turn, in process and on every shared store."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import psycopg
import pytest
from psycopg import sql

import pg_jobs
from jobsched import Client, JobScheduler, Limits, PluginManager, Submission
from jobsched.store import NewJob, Outcome
from shared_support import Target


def plugins() -> PluginManager:
    return PluginManager([pg_jobs], autoload=False)


def new(
    job_id: str,
    group: str | None = None,
    *,
    prio: float = 0.0,
    delay: float = 0.0,
    queue: str = "default",
) -> NewJob:
    now = time.time()
    options: dict[str, Any] = {"name": job_id, "executor": "async"}
    if group is not None:
        options["group"] = group
    return NewJob(
        job_id=job_id,
        key=None,
        type="noop",
        args={},
        options=options,
        run_at=now + delay,
        submitted_at=now,
        sort_key=(prio,),
        queue=queue,
    )


async def claimed(
    store: Any, n: int, owner: str = "w1", queues: dict[str, int] | None = None, **kw: Any
) -> set[str]:
    """The ids a claim took (a claim returns its rows in strategy order)."""
    rows, _ = await store.claim(n, owner, queues, **kw)
    return {r.job_id for r in rows}


# ── bad input ─────────────────────────────────────────────────────────
@pytest.mark.parametrize(
    ("group", "message"),
    [
        ("", r"group must be a non-empty string of at most 200 characters .* got string ''"),
        (5, r"group must be .* got integer 5"),
        ("x" * 201, r"group must be .* got 201 characters: 'xxx"),
        ("a\x00b", r"group 'a\\x00b' holds a NUL character"),
    ],
)
async def test_a_bad_group_is_refused_with_one_clear_line(group: Any, message: str) -> None:
    async def job() -> None:
        pass

    async with JobScheduler() as s:
        with pytest.raises(ValueError, match=message):
            s.submit(job, group=group)
        with pytest.raises(ValueError, match=message):
            s.submit_many([Submission(pg_jobs.Record(dsn="", schema="", tag="t"), group=group)])


@pytest.mark.parametrize("value", [0, -1, 1.5, "2", True])
def test_a_bad_group_limit_is_refused(value: Any) -> None:
    with pytest.raises(ValueError, match=r"limits.group must be an integer >= 1, got"):
        Limits.coerce({"group": value})


def test_the_group_limit_is_kept_as_data_only_when_set() -> None:
    assert Limits(group=2).as_data() == {
        "executors": {},
        "job_types": {},
        "rates": {},
        "group": 2,
    }
    # Without it, the data is what stores kept before: a mixed cluster agrees.
    assert "group" not in (Limits(job_types={"a": 1}).as_data() or {})
    assert not Limits() and Limits(group=1)


# ── in process ────────────────────────────────────────────────────────
async def test_in_process_groups_take_turns_at_the_ready_queue() -> None:
    order: list[str] = []

    async def job(tag: str) -> None:
        order.append(tag)

    s = JobScheduler(num_workers=1)
    ids = [s.submit(job, f"a{i}", group="A") for i in range(5)]
    ids += [s.submit(job, f"b{i}", group="B") for i in range(2)]
    ids += [s.submit(job, f"n{i}") for i in range(2)]  # no group: one more turn
    async with s:
        await s.join()
    assert order == ["n0", "a0", "b0", "n1", "a1", "b1", "a2", "a3", "a4"]
    info = [s.get(i) for i in ids]
    assert all(j is not None and j.status.value == "completed" for j in info)


async def test_in_process_priority_orders_within_a_group() -> None:
    order: list[str] = []

    async def job(tag: str) -> None:
        order.append(tag)

    s = JobScheduler(num_workers=1)
    s.submit(job, "a-low", group="A", priority="low")
    s.submit(job, "a-high", group="A", priority="high")
    s.submit(job, "b-low", group="B", priority="low")
    async with s:
        await s.join()
    assert order == ["a-high", "b-low", "a-low"]


async def test_in_process_group_limit_caps_each_group_not_the_others() -> None:
    running: dict[str, int] = {"A": 0, "B": 0}
    most: dict[str, int] = {"A": 0, "B": 0}
    gate = asyncio.Event()

    async def job(tenant: str) -> None:
        running[tenant] += 1
        most[tenant] = max(most[tenant], running[tenant])
        await gate.wait()
        running[tenant] -= 1

    async def no_group() -> None:
        await gate.wait()

    s = JobScheduler(num_workers=8, limits={"group": 2})
    async with s:
        for _ in range(5):
            s.submit(job, "A", group="A")
            s.submit(job, "B", group="B")
        free = [s.submit(no_group) for _ in range(3)]
        # Every worker took what it may: 2 per group plus the jobs with no group.
        for _ in range(20):
            await asyncio.sleep(0)
        assert running == {"A": 2, "B": 2}
        assert s.limiter is not None
        assert s.limiter.running(group="A") == 2
        assert s.limiter.parked == 6
        assert all(s.get(i).status.value == "running" for i in free)  # type: ignore[union-attr]
        gate.set()
        await s.join()
    assert most == {"A": 2, "B": 2}
    assert s.limiter.held_back["group:A"] >= 3
    assert s.limiter._groups == {}  # idle groups leave no counter behind


async def test_in_process_a_cancelled_parked_job_frees_nothing_twice() -> None:
    gate = asyncio.Event()
    ran: list[int] = []

    async def job(i: int) -> None:
        ran.append(i)
        await gate.wait()

    s = JobScheduler(num_workers=4, limits={"group": 1})
    async with s:
        first = s.submit(job, 0, group="A")
        parked = s.submit(job, 1, group="A")
        last = s.submit(job, 2, group="A")
        for _ in range(10):
            await asyncio.sleep(0)
        assert ran == [0]
        s.cancel(parked)
        gate.set()
        await s.join()
    assert ran == [0, 2]
    assert [s.get(i).status.value for i in (first, parked, last)] == [  # type: ignore[union-attr]
        "completed",
        "cancelled",
        "completed",
    ]


async def test_local_client_reports_the_group() -> None:
    from jobsched import LocalClient

    async def job() -> None:
        pass

    async with JobScheduler() as s:
        client = LocalClient(s)
        job_id = await client.submit(job, group="tenant-7")
        plain = await client.submit(job)
        await s.join()
        assert (await client.get(job_id)).group == "tenant-7"  # type: ignore[union-attr]
        assert (await client.get(plain)).group is None  # type: ignore[union-attr]


# ── shared stores: the claim ──────────────────────────────────────────
async def test_claims_take_groups_in_turn(target: Target) -> None:
    store = await target.open_store()
    try:
        # A's backlog came first and sorts first; B and the jobs without a
        # group still get every other turn.
        await store.insert([new(f"a{i}", "A", prio=i) for i in range(6)])
        await store.insert([new("b0", "B", prio=10), new("b1", "B", prio=11)])
        await store.insert([new("n0", prio=20)])
        assert await claimed(store, 2) == {"a0", "b0"}
        assert await claimed(store, 3) == {"n0", "a1", "b1"}
        assert await claimed(store, 2) == {"a2", "a3"}  # only A is left
        assert await claimed(store, 10) == {"a4", "a5"}
        rows = await store.jobs(["a0", "n0"])
        assert [r.job_group for r in rows] == ["A", None]
    finally:
        await store.close()


# PostgreSQL only: there claims overlap, where a SQLite file's write lock and
# the memory store's loop make them take turns.
@pytest.mark.parametrize("target", ["postgresql"], indirect=True)
async def test_a_claim_in_turns_passes_over_the_jobs_another_claim_holds(target: Target) -> None:
    """Claims at once share out the groups' next jobs: while another claim
    holds the first jobs of every group, a claim takes the next ones, in
    turns."""
    store = await target.open_store()
    try:
        await store.insert([new(f"a{i}", "A", prio=i) for i in range(8)])
        await store.insert([new(f"b{i}", "B", prio=10 + i) for i in range(8)])
        held = ["a0", "a1", "a2", "b0", "b1", "b2"]  # what a claim of 4 offers first
        async with await psycopg.AsyncConnection.connect(target.side) as other:
            await other.execute(
                sql.SQL("SELECT 1 FROM {}.jobs WHERE job_id = ANY(%s) FOR UPDATE").format(
                    sql.Identifier(target.schema)
                ),
                [held],
            )
            assert await claimed(store, 4) == {"a3", "b3", "a4", "b4"}
            await other.rollback()
        assert await claimed(store, 4) == {"a0", "b0", "a1", "b1"}
    finally:
        await store.close()


async def test_a_group_limit_holds_each_group_across_claimers(target: Target) -> None:
    store = await target.open_store("one")
    other = await target.open_store("other")
    try:
        await store.set_limits({"group": 2})
        await store.insert([new(f"a{i}", "A", prio=i) for i in range(5)])
        await store.insert([new(f"b{i}", "B", prio=i) for i in range(5)])
        await store.insert([new("free0"), new("free1")])
        assert await claimed(store, 3) == {"a0", "b0", "free0"}
        # One more of each group, then nothing: two of each run.
        assert await claimed(other, 10, "w2") == {"a1", "b1", "free1"}
        assert await claimed(store, 10) == set()
        # A finished job frees its group's slot, for that group only.
        await store.finish([Outcome(job_id="a0", status="completed")], "w1")
        assert await claimed(other, 10, "w2") == {"a2"}
    finally:
        await other.close()
        await store.close()


async def test_a_delayed_group_does_not_hold_claims_back(target: Target) -> None:
    store = await target.open_store()
    try:
        await store.insert([new("later", "A", delay=3600), new("now", "B")])
        rows, next_due = await store.claim(5, "w1")
        assert [r.job_id for r in rows] == ["now"]
        assert next_due is not None and next_due > time.time() + 3000
    finally:
        await store.close()


async def test_a_full_group_waits_and_its_next_due_is_the_others(target: Target) -> None:
    store = await target.open_store()
    try:
        await store.set_limits({"group": 1})
        await store.insert([new("a0", "A"), new("a1", "A"), new("b-later", "B", delay=3600)])
        rows, next_due = await store.claim(5, "w1")
        assert [r.job_id for r in rows] == ["a0"]
        # a1 waits for A's slot (a finish wakes it), not for a time.
        assert next_due is not None and next_due > time.time() + 3000
    finally:
        await store.close()


async def test_clients_store_the_group_and_workers_get_it_back(target: Target) -> None:
    async with Client(target.url, plugins=plugins()) as client:
        job_id = await client.submit(target.rec("r"), group="tenant-1")
        many = await client.submit_many([Submission(target.rec("s"), group="tenant-2")])
        plain = await client.submit(target.rec("p"))
        info = await client.get(job_id)
        assert info is not None and info.group == "tenant-1"
        assert info.options["group"] == "tenant-1"
        assert (await client.get(many[0])).group == "tenant-2"  # type: ignore[union-attr]
        assert (await client.get(plain)).group is None  # type: ignore[union-attr]
    s = JobScheduler(store=target.url, shared=True, plugins=plugins(), limits={"group": 1})
    async with s, Client(target.url, plugins=plugins()) as client:
        finished = await asyncio.wait_for(client.wait_many([job_id, *many, plain]), 60)
    assert [j.status.value for j in finished] == ["completed"] * 3
    assert [j.group for j in finished] == ["tenant-1", "tenant-2", None]


# ── job files, build_job and tasks ────────────────────────────────────
EMAIL = 'type = "email"\nargs = { to = "x@corp", subject = "s", latency = 0.001 }\n'


async def test_a_job_file_sets_groups_and_the_group_limit() -> None:
    from jobsched.jobfile import parse_jobfile, run_jobfile

    plugins = PluginManager(autoload=False)
    entries = "".join(
        f'[[job]]\nid = "{tenant}{i}"\n{EMAIL}group = "{tenant}"\n'
        for tenant in ("a", "b")
        for i in range(3)
    )
    text = (
        "[scheduler]\nworkers = 4\n[limits]\ngroup = 1\n"
        + entries
        + f'[[recurring]]\nid = "tick"\n{EMAIL}group = "c"\nevery = 0.01\ntimes = 2\n'
    )
    jobfile = parse_jobfile(text, source="t.toml", plugins=plugins)
    assert jobfile.tables["limits"].limits() == Limits(group=1)
    assert [j.group for j in jobfile.jobs] == ["a"] * 3 + ["b"] * 3
    seen: list[JobScheduler] = []
    result = await run_jobfile(jobfile, plugins=plugins, on_scheduler=seen.append)
    assert result.ok
    # One job per group at a time: a, b and the recurring c, never more.
    assert result.peak_running <= 3
    assert seen[0].limiter is not None and seen[0].limiter.held_back["group:a"] >= 1


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (f'[[job]]\nid = "j"\n{EMAIL}group = ""', "group must be a non-empty string of at most"),
        (f'[[job]]\nid = "j"\n{EMAIL}group = 5', "group must be a non-empty string"),
        ("[limits]\ngroup = 0\n", "group must be a positive integer, got integer 0"),
    ],
)
def test_a_job_file_refuses_a_bad_group(body: str, message: str) -> None:
    from jobsched.jobfile import JobFileError, parse_jobfile

    with pytest.raises(JobFileError) as info:
        parse_jobfile(body, source="t.toml", plugins=PluginManager(autoload=False))
    assert message in str(info.value)
    assert "t.toml" in str(info.value)


def test_build_job_and_tasks_set_the_group() -> None:
    from jobsched import JobSpecError, build_job, job_spec, task
    from jobsched._job import job_group

    plugins = PluginManager(autoload=False)
    job = build_job(
        "email", {"to": "x@corp", "subject": "s"}, plugins=plugins, group="acme", priority="high"
    )
    assert job_group(job) == "acme"
    spec = job_spec(job, plugins)
    assert spec is not None and spec.options["group"] == "acme"
    with pytest.raises(JobSpecError, match=r"email job.*group must be a non-empty string"):
        build_job("email", {"to": "x@corp", "subject": "s"}, plugins=plugins, group="")

    @task(group="nightly")
    async def report(group: str) -> str:  # a parameter may be called group
        return group

    assert job_group(report.job("finance")) == "nightly"
    assert report.job("finance").arguments == {"group": "finance"}
    assert job_group(report.options(group="acme").job("x")) == "acme"
    with pytest.raises(ValueError, match=r"report.options\(\): group must be a non-empty"):
        report.options(group="")


async def test_a_single_owner_store_keeps_the_group_across_a_restart(tmp_path: Any) -> None:
    from jobsched._job import job_group

    url = f"sqlite:///{tmp_path}/own.db"
    job = pg_jobs.Record(dsn="", schema="", tag="later")
    async with JobScheduler(store=url, plugins=plugins()) as first:
        job_id = first.submit(job, group="tenant-9", delay=3600)
    async with JobScheduler(store=url, plugins=plugins()) as second:
        restored = second.get(job_id)
        assert restored is not None and job_group(restored) == "tenant-9"
        second.cancel(job_id)


async def test_claims_follow_groups_coming_and_going(target: Target) -> None:
    store = await target.open_store()
    try:
        await store.insert([new("a0", "A"), new("a1", "A")])
        assert await claimed(store, 2) == {"a0", "a1"}
        # No group left: the jobs without one are claimed as before.
        await store.insert([new("n0"), new("n1"), new("n2")])
        assert await claimed(store, 2) == {"n0", "n1"}
        # A group comes back, and a limit with it: the limit holds at once.
        await store.set_limits({"group": 1})
        await store.insert([new("b0", "B"), new("b1", "B")])
        assert await claimed(store, 5) == {"n2", "b0"}
        await store.set_limits(None)
        assert await claimed(store, 5) == {"b1"}
        assert await claimed(store, 5) == set()
    finally:
        await store.close()


# ── groups and queues together ────────────────────────────────────────
def two_queues_two_groups() -> list[NewJob]:
    """Queue "q1" has A's backlog first and then B's jobs; queue "q2" has
    jobs of both groups that sort before every one of "q1"'s, and a group C."""
    return [
        *(new(f"a{i}", "A", prio=i, queue="q1") for i in range(4)),
        *(new(f"b{i}", "B", prio=10 + i, queue="q1") for i in range(2)),
        new("qa", "A", prio=-9, queue="q2"),
        new("qb", "B", prio=-9, queue="q2"),
        new("qc", "C", prio=-9, queue="q2"),
    ]


async def test_a_worker_of_one_queue_takes_its_groups_in_turn_one_each(target: Target) -> None:
    store = await target.open_store("one")
    other = await target.open_store("other")
    try:
        await store.set_limits({"group": 1})
        await store.insert(two_queues_two_groups())
        # Only q1's jobs, A and B in turn, one running per group.
        assert await claimed(store, 10, "w1", {"q1": 10}) == {"a0", "b0"}
        assert await claimed(store, 10, "w1", {"q1": 10}) == set()
        # The group limit is cluster-wide: q2's worker gets only C's job.
        assert await claimed(other, 10, "w2", {"q2": 10}) == {"qc"}
        # A finished job frees its group's slot, for that group only.
        await store.finish([Outcome(job_id="a0", status="completed")], "w1")
        assert await claimed(store, 10, "w1", {"q1": 10}) == {"a1"}
        await store.finish([Outcome(job_id="b0", status="completed")], "w1")
        await store.finish([Outcome(job_id="a1", status="completed")], "w1")
        assert await claimed(store, 10, "w1", {"q1": 10}) == {"a2", "b1"}
        rows = await store.jobs(["a2", "b1", "qa", "qb"])
        assert [(r.queue, r.status) for r in rows] == [
            ("q1", "running"),
            ("q1", "running"),
            ("q2", "pending"),
            ("q2", "pending"),
        ]
    finally:
        await other.close()
        await store.close()


async def test_a_claim_in_turns_keeps_to_its_queues_rooms_types_and_pauses(
    target: Target,
) -> None:
    store = await target.open_store()
    try:
        await store.insert(two_queues_two_groups())
        # No limits: the turns alone, and at most each queue's room.
        assert await claimed(store, 10, "w1", {"q1": 3}) == {"a0", "b0", "a1"}
        # A worker that runs other job types takes none of them.
        assert await claimed(store, 10, "w1", {"q1": 10}, types=["other"]) == set()
        # A paused queue gives nothing, grouped or not; the others go on.
        await store.set_queue_paused(True, "q1")
        assert await claimed(store, 10, "w1", {"q1": 10}) == set()
        assert await claimed(store, 10, "w1", None) == {"qa", "qb", "qc"}
        await store.set_queue_paused(False, "q1")
        assert await claimed(store, 10, "w1", {"q1": 10, "q2": 10}) == {"a2", "b1", "a3"}
    finally:
        await store.close()
