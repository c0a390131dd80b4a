"""Named queues (docs/queues.md): a job names its queue, a scheduler or worker
serves some queues with a concurrency for each, claims touch only those,
and a queue is paused, limited and inspected on its own, in process and on
every shared store, across real worker processes too."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from jobsched import (
    MAX_QUEUE_LENGTH,
    Client,
    FunctionJob,
    JobScheduler,
    JobStatus,
    Limits,
    LocalClient,
    Submission,
    build_job,
    default_plugin_manager,
    task,
)
from jobsched.store import NewJob, StoreContext, resolve_store
from queue_tasks import crunch, hold, mail, most_at_once
from worker_support import Worker

FILES = Path(__file__).resolve().parent / "sqlite_files"


async def nap() -> str:
    await asyncio.sleep(0)
    return "napped"


# ── a job names its queue ──────────────────────────────────────────────
async def test_every_way_to_make_a_job_names_its_queue() -> None:
    assert FunctionJob(nap).queue == "default"
    assert FunctionJob(nap, queue="reports").queue == "reports"
    assert mail.job("a@b.c").queue == "emails"  # @task(queue=...)
    assert crunch.options(queue="reports").job(1).queue == "reports"
    assert build_job("email", {"to": "a@b.c", "subject": "s"}, queue="emails").queue == "emails"
    served = {"default": None, "emails": None, "reports": None}
    async with JobScheduler(queues=served) as sched:
        job = crunch.job(2)
        moved = sched.submit(job, queue="reports")  # a copy goes to that queue
        assert job.queue == "default" and sched.get(moved).queue == "reports"
        [batched] = sched.submit_many([Submission(crunch.job(3), queue="emails")])
        assert sched.get(batched).queue == "emails"
        assert sched.get(sched.submit(nap, queue="reports")).queue == "reports"
        await sched.join()
        client = LocalClient(sched)
        assert (await client.get(batched)).queue == "emails"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "queue must be a non-empty name without surrounding spaces, got string ''"),
        (" emails", "queue must be a non-empty name without surrounding spaces"),
        (5, "queue must be a non-empty name without surrounding spaces, got integer 5"),
        ("x" * (MAX_QUEUE_LENGTH + 1), f"queue must be at most {MAX_QUEUE_LENGTH} characters"),
        ("a\x00b", "queue 'a\\x00b' holds a NUL character"),
    ],
)
def test_a_bad_queue_name_is_refused_naming_it(value: Any, message: str) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        FunctionJob(nap, queue=value)
    with pytest.raises(ValueError, match="queue"):
        task(queue=value)(nap)


def test_bad_queues_for_a_scheduler_are_refused_naming_them() -> None:
    with pytest.raises(TypeError, match=r"got the string 'emails': write \['emails'\]"):
        JobScheduler(queues="emails")
    with pytest.raises(ValueError, match=r"queues\['emails'\]: a queue's concurrency must be"):
        JobScheduler(queues={"emails": 0})
    with pytest.raises(ValueError, match="queues must name at least one queue"):
        JobScheduler(queues=[])
    with pytest.raises(ValueError, match="queues: a queue name must be a non-empty name"):
        JobScheduler(queues=[""])


def test_a_bad_queue_limit_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match=r"limits.queues\['emails'\] must be an integer >= 1"):
        JobScheduler(limits={"queues": {"emails": 0}})
    assert Limits.coerce({"queues": {"emails": 2}}).as_data() == {
        "executors": {},
        "job_types": {},
        "rates": {},
        "queues": {"emails": 2},
    }
    # Limits stored before queue limits existed compare equal to these.
    assert "queues" not in (Limits(executors={"async": 2}).as_data() or {})


async def test_a_queue_limit_and_its_concurrency_in_one_process_the_lower_wins(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "held.txt")
    async with JobScheduler(
        num_workers=4, queues={"slow": 3}, limits={"queues": {"slow": 1}}
    ) as sched:
        for i in range(4):
            sched.submit(hold.job(path, f"s{i}"))
        await sched.join()
        uses = (await LocalClient(sched).stats()).limits
        assert [(u.kind, u.name, u.limit) for u in uses] == [("queue", "slow", 1)]
    assert most_at_once(path) == 1


async def test_a_scheduler_in_memory_refuses_a_job_for_a_queue_it_does_not_serve() -> None:
    async with JobScheduler() as sched:  # the default queue alone
        with pytest.raises(ValueError, match=r"queue 'emails' is not one this scheduler serves"):
            sched.submit(mail.job("a@b.c"))
        assert sched.jobs() == []
        assert await LocalClient(sched).result(sched.submit(crunch.job(1))) is not None


# ── in process: concurrency and pause per queue ───────────────────────
async def test_a_queue_runs_at_most_its_concurrency_at_once(tmp_path: Path) -> None:
    path = str(tmp_path / "held.txt")
    async with JobScheduler(num_workers=4, queues={"default": None, "slow": 1}) as sched:
        for i in range(4):
            sched.submit(hold.job(path, f"s{i}"))
        others = [sched.submit(crunch.job(i)) for i in range(4)]
        await sched.join()
        assert all(sched.get(i).status is JobStatus.COMPLETED for i in others)
    assert most_at_once(path) == 1
    assert sched.limiter is not None and sched.limiter.held_back["queue:slow"] >= 1


async def test_pausing_one_queue_leaves_the_others_running_in_process() -> None:
    async with JobScheduler(queues=["default", "emails"]) as sched:
        client = LocalClient(sched)
        assert await client.pause_queue("emails") is True
        assert await client.pause_queue("emails") is False
        mails = [sched.submit(mail.job(f"{i}@b.c")) for i in range(3)]
        crunched = [sched.submit(crunch.job(i)) for i in range(3)]
        await client.wait_many(crunched)
        assert {sched.get(i).status for i in mails} == {JobStatus.PENDING}
        assert await client.queue_paused("emails") and not await client.queue_paused()
        queues = {q.name: q for q in await client.queues()}
        assert queues["emails"].paused and queues["emails"].depth == 3
        assert queues["emails"].oldest_age is not None and queues["emails"].running == 0
        assert not queues["default"].paused and queues["default"].throughput == 3
        assert await client.resume_queue("emails") is True
        await client.wait_many(mails)


# ── shared stores ─────────────────────────────────────────────────────
@pytest.fixture(params=["memory", "sqlite", "postgresql"])
async def url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    if request.param == "memory":
        yield f"memory://{uuid.uuid4().hex}"
    elif request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'jobs.db'}"
    else:
        yield request.getfixturevalue("pg_schema")[0]


def new_job(job_id: str, queue: str, key: float) -> NewJob:
    return NewJob(
        job_id=job_id,
        type="noop",
        args={},
        options={"name": job_id, "executor": "async"},
        run_at=0.0,
        submitted_at=0.0,
        sort_key=(key,),
        queue=queue,
    )


async def test_a_claim_takes_only_the_queues_asked_with_their_rooms(url: str) -> None:
    store: Any = resolve_store(url, default_plugin_manager())
    await store.open(StoreContext(worker_id="w", shared=True))
    try:
        await store.insert(
            [new_job(f"a{i}", "a", i) for i in range(3)]
            + [new_job(f"b{i}", "b", i + 0.5) for i in range(3)]
            + [new_job("c0", "c", -1.0)]
        )
        rows, _ = await store.claim(4, "w", {"a": 1, "b": 5})
        # Strategy order across the queues, at most one of "a", none of "c".
        assert [r.job_id for r in rows] == ["a0", "b0", "b1", "b2"]
        assert {r.queue for r in rows} == {"a", "b"}
        rows, next_due = await store.claim(4, "w", {"b": 2})
        assert rows == [] and next_due is None  # b has nothing left; a and c are not asked
        assert await store.set_queue_paused(True, "a") is True
        assert await store.queue_paused("a") and not await store.queue_paused()
        rows, _ = await store.claim(4, "w", {"a": 4, "c": 4})
        assert [r.job_id for r in rows] == ["c0"]  # "a" is paused
        assert await store.set_queue_paused(False, "a") is True
        rows, _ = await store.claim(4, "w", {"a": 4})
        assert [r.job_id for r in rows] == ["a1", "a2"]
        stats = {q.queue: q for q in await store.queue_stats(0.0)}
        assert set(stats) == {"a", "b", "c", "default"}
        assert stats["a"].running == 3 and stats["default"].ready == 0
    finally:
        await store.close()


async def test_a_scheduler_claims_only_the_jobs_of_its_queues(url: str) -> None:
    async with Client(url) as client:
        mails = [await client.submit(mail.job(f"{i}@b.c")) for i in range(3)]
        crunched = [await client.submit(crunch.job(i)) for i in range(3)]
        assert (await client.get(mails[0])).queue == "emails"
        async with JobScheduler(store=url, shared=True, queues=["emails"]):
            await client.wait_many(mails, timeout=30)
            assert {(await client.get(i)).status for i in crunched} == {JobStatus.PENDING}
        async with JobScheduler(store=url, shared=True):  # the default queue
            await client.wait_many(crunched, timeout=30)


async def test_pausing_one_queue_of_a_shared_store_leaves_the_others_running(url: str) -> None:
    async with Client(url) as client:
        assert await client.pause_queue("emails") is True
        mails = [await client.submit(mail.job(f"{i}@b.c")) for i in range(3)]
        crunched = [await client.submit(crunch.job(i)) for i in range(3)]
        async with JobScheduler(store=url, shared=True, queues=["default", "emails"]):
            await client.wait_many(crunched, timeout=30)
            assert {(await client.get(i)).status for i in mails} == {JobStatus.PENDING}
            assert await client.queue_paused("emails") and not await client.queue_paused()
            queues = {q.name: q for q in await client.queues()}
            assert queues["emails"].paused and queues["emails"].depth == 3
            assert queues["default"].throughput == 3 and queues["default"].depth == 0
            assert await client.resume_queue("emails") is True
            await client.wait_many(mails, timeout=30)
        # Pausing every queue still works as it always did, apart from each queue's.
        assert await client.pause_queue() is True
        assert await client.queue_paused("default") and not (await client.queues())[0].paused
        assert await client.resume_queue() is True


async def test_the_jobs_a_schedule_fires_go_to_its_queue(url: str) -> None:
    async with Client(url) as client:
        schedule_id = await client.add_schedule(mail.job("ops@b.c"), every=3600, start_in=3600)
        fired = await client.trigger_schedule(schedule_id)
        assert (await client.get(fired)).queue == "emails"
        async with JobScheduler(store=url, shared=True):  # the default queue: not this one
            assert [q.depth for q in await client.queues() if q.name == "emails"] == [1]
        async with JobScheduler(store=url, shared=True, queues=["emails"]):
            assert (await client.wait(fired, timeout=30)).status is JobStatus.COMPLETED


async def test_a_cluster_limit_per_queue_holds_its_running_jobs(url: str, tmp_path: Path) -> None:
    path = str(tmp_path / "held.txt")
    limits = {"queues": {"slow": 1}}
    async with Client(url) as client:
        ids = [await client.submit(hold.job(path, f"s{i}")) for i in range(4)]
        async with JobScheduler(
            store=url, shared=True, num_workers=4, queues=["slow"], limits=limits
        ):
            await client.wait_many(ids, timeout=30)
        limit = next(u for u in (await client.stats()).limits if u.kind == "queue")
        assert (limit.name, limit.limit) == ("slow", 1)
    assert most_at_once(path) == 1


# ── real worker processes ─────────────────────────────────────────────
@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'jobs.db'}"
    return str(request.getfixturevalue("pg_schema")[0])


async def test_two_workers_on_different_queues_each_run_only_their_queue(db_url: str) -> None:
    async with Client(db_url) as client:
        mails = [await client.submit(mail.job(f"{i}@b.c")) for i in range(4)]
        crunched = [await client.submit(crunch.job(i)) for i in range(4)]
    emails = Worker(db_url, "--import", "queue_tasks", "--queue", "emails")
    default = Worker(db_url, "--import", "queue_tasks")
    try:
        async with Client(db_url) as client:
            done = await client.wait_many(mails + crunched, timeout=60)
    finally:
        emails.stop()
        default.stop()
    ran_by = {info.job_id: info.result.rsplit(" by ", 1)[1] for info in done}
    assert {ran_by[i] for i in mails} == {str(emails.proc.pid)}
    assert {ran_by[i] for i in crunched} == {str(default.proc.pid)}


async def test_a_worker_runs_at_most_a_queues_concurrency_at_once(
    db_url: str, tmp_path: Path
) -> None:
    path = str(tmp_path / "held.txt")
    async with Client(db_url) as client:
        ids = [await client.submit(hold.job(path, f"s{i}")) for i in range(4)]
    worker = Worker(db_url, "--import", "queue_tasks", "--queue", "slow=1", "--workers=4")
    try:
        async with Client(db_url) as client:
            await client.wait_many(ids, timeout=60)
    finally:
        worker.stop()
    assert most_at_once(path) == 1


async def test_pausing_a_queue_holds_its_jobs_in_a_worker_process(db_url: str) -> None:
    worker = Worker(db_url, "--import", "queue_tasks", "--queue", "emails", "--queue", "default")
    try:
        async with Client(db_url) as client:
            await client.pause_queue("emails")
            mails = [await client.submit(mail.job(f"{i}@b.c")) for i in range(2)]
            crunched = [await client.submit(crunch.job(i)) for i in range(2)]
            await client.wait_many(crunched, timeout=60)
            assert {(await client.get(i)).status for i in mails} == {JobStatus.PENDING}
            await client.resume_queue("emails")
            await client.wait_many(mails, timeout=60)
    finally:
        worker.stop()


# ── stores written before queues ──────────────────────────────────────
@pytest.mark.parametrize("name", ["single-owner.db", "shared.db"])
async def test_jobs_of_a_store_written_before_queues_are_in_the_default_queue(
    tmp_path: Path, name: str
) -> None:
    shutil.copy(FILES / name, tmp_path / name)
    async with Client(f"sqlite:///{tmp_path / name}") as client:
        infos = await client.jobs()
        assert infos and {info.queue for info in infos} == {"default"}
        assert [q.name for q in await client.queues()] == ["default"]


# ── the command line ──────────────────────────────────────────────────
def test_the_queue_commands_pause_one_queue_and_list_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from jobsched.cli import main

    url = f"sqlite:///{tmp_path / 'jobs.db'}"

    async def submit() -> None:
        async with Client(url) as client:
            await client.submit(mail.job("a@b.c"))

    asyncio.run(submit())
    assert main(["queue", "pause", "emails", "--store", url]) == 0
    assert capsys.readouterr().out == (
        "queue 'emails' paused; it is paused: workers claim none of its jobs\n"
    )
    assert main(["queue", "list", "--store", url, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(q["name"], q["depth"], q["paused"]) for q in listed] == [
        ("default", 0, False),
        ("emails", 1, True),
    ]
    assert main(["queue", "list", "--store", url]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["QUEUE", "DEPTH", "OLDEST", "RUNNING", "DONE/MIN", "STATE"]
    assert lines[2].split()[0::5] == ["emails", "paused"]
    assert main(["queue", "status", " emails", "--store", url]) == 2
    assert capsys.readouterr().err.strip() == (
        "jobsched: error: queue must be a non-empty name without surrounding spaces, "
        "got string ' emails'"
    )
    assert main(["worker", "--store", url, "--queue", "emails=x"]) == 2
    assert "--queue 'emails=x': the concurrency after '=' must be a whole number" in (
        capsys.readouterr().err
    )
