"""``trigger_rule=`` kept and applied by every store (issue 14, part 2).

The same DAGs run in memory, on a shared SQLite file and on PostgreSQL: each
rule against an upstream that completed, failed or was cancelled, decided
when the upstream ends (`SharedStore.finish`) or when the dependent is
submitted after it ended (`SharedStore.insert`); dependents released early;
cascades through rules; a single-owner SQLite store restarted with a ruled
job still waiting; job files with ``--store``; and a `Client` in this
process with a ``jobsched worker`` in another.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import jobsched
from flow_support import FlowWorker
from jobsched import (
    BlockingClient,
    Client,
    JobInfo,
    JobScheduler,
    JobStatus,
    LocalClient,
    StoreError,
    build_job,
)
from jobsched.jobfile import load_jobfile, run_jobfile
from jobsched.store import NewJob, Outcome, StoreContext, read_store
from jobsched_plugins.sqlite_store import SQLiteStore

C, F, X, P = (
    JobStatus.COMPLETED,
    JobStatus.FAILED,
    JobStatus.CANCELLED,
    JobStatus.PENDING,
)

STORES = ["memory", "sqlite", "postgresql"]


@pytest.fixture(params=STORES)
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str | None:
    """Where the jobs are kept: None (memory), a shared SQLite file or a PostgreSQL schema."""
    if request.param == "memory":
        return None
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'jobs.db'}"
    url: str = request.getfixturevalue("pg_schema")[0]
    return url


def scheduler_for(url: str | None) -> JobScheduler:
    if url is None:
        return JobScheduler(num_workers=4)
    return JobScheduler(store=url, shared=True, num_workers=4)


def ok(name: str = "ok", **options: Any) -> jobsched.Job:
    return build_job("sleep", {"name": name, "seconds": 0}, **options)


def boom(**options: Any) -> jobsched.Job:
    return build_job("flaky-upload", {"path": "x", "failures": 5}, retry="none", **options)


@contextlib.asynccontextmanager
async def reader(scheduler: JobScheduler, url: str | None) -> AsyncIterator[Any]:
    """A client that sees the scheduler's jobs: local in memory, else the store's."""
    if url is None:
        yield LocalClient(scheduler)
        return
    async with Client(url) as client:
        yield client


async def infos(scheduler: JobScheduler, url: str | None, ids: list[str]) -> list[JobInfo]:
    async with reader(scheduler, url) as client:
        return [await client.get(job_id) for job_id in ids]


# ── each rule against each way an upstream ends ───────────────────────
# (rule, how its one upstream ended) -> (the dependent's status, its error)
EXPECTED = {
    ("all_success", "completed"): (C, None),
    ("all_success", "failed"): (X, "upstream {up} failed"),
    ("all_success", "cancelled"): (X, "upstream {up} cancelled"),
    ("all_done", "completed"): (C, None),
    ("all_done", "failed"): (C, None),
    ("all_done", "cancelled"): (C, None),
    ("one_success", "completed"): (C, None),
    ("one_success", "failed"): (X, "trigger rule 'one_success': no upstream completed"),
    ("one_success", "cancelled"): (X, "trigger rule 'one_success': no upstream completed"),
    ("one_failed", "completed"): (X, "trigger rule 'one_failed': no upstream failed"),
    ("one_failed", "failed"): (C, None),
    ("one_failed", "cancelled"): (X, "trigger rule 'one_failed': no upstream failed"),
    ("none_failed", "completed"): (C, None),
    ("none_failed", "failed"): (X, "trigger rule 'none_failed': upstream {up} failed"),
    ("none_failed", "cancelled"): (C, None),
}


@pytest.mark.parametrize("when", ["waiting", "after"])
async def test_each_rule_against_each_end(where: str | None, when: str) -> None:
    """``waiting``: the dependents wait, and the store settles them as each
    upstream ends; ``after``: they are submitted once their upstreams ended."""
    async with scheduler_for(where) as scheduler:
        failed = scheduler.submit(boom())
        completed = scheduler.submit(ok())
        # Cancelled by the cascade of its own upstream's failure.
        cancelled = scheduler.submit(ok("cancelled"), depends_on=[failed])
        ups = {"completed": completed, "failed": failed, "cancelled": cancelled}
        if when == "after":
            await scheduler.join()
        dependents = {
            case: scheduler.submit(
                ok(f"{case[0]}-{case[1]}"), depends_on=[ups[case[1]]], trigger_rule=case[0]
            )
            for case in EXPECTED
        }
        await scheduler.join()
        found = await infos(scheduler, where, list(dependents.values()))
        upstream = await infos(scheduler, where, [cancelled])
    assert upstream[0].status is X and upstream[0].last_error == f"upstream {failed} failed"
    for (case, job_id), info in zip(dependents.items(), found, strict=True):
        status, error = EXPECTED[case]
        expected = (status, None if error is None else error.format(up=ups[case[1]]))
        assert (info.status, info.last_error) == expected, case
        assert info.trigger_rule == case[0]
        assert info.job_id == job_id


async def test_rules_over_several_upstreams(where: str | None) -> None:
    """A dependent of three upstreams (completed, failed, cancelled), per rule;
    their ends arrive one by one, some in one batch of outcomes."""
    async with scheduler_for(where) as scheduler:
        failed = scheduler.submit(boom())
        completed = scheduler.submit(ok())
        cancelled = scheduler.submit(ok("cancelled"), depends_on=[failed])
        ups = [completed, failed, cancelled]
        rules = ["all_success", "all_done", "one_success", "one_failed", "none_failed"]
        ids = [scheduler.submit(ok(rule), depends_on=ups, trigger_rule=rule) for rule in rules]
        await scheduler.join()
        found = {r: await infos(scheduler, where, [i]) for r, i in zip(rules, ids, strict=True)}
    ends = {rule: (info[0].status, info[0].last_error) for rule, info in found.items()}
    assert ends["all_done"] == ends["one_success"] == ends["one_failed"] == (C, None)
    assert ends["all_success"][0] is X
    assert ends["all_success"][1] in (
        f"upstream {failed} failed",
        f"upstream {cancelled} cancelled",
    )
    assert ends["none_failed"] == (X, f"trigger rule 'none_failed': upstream {failed} failed")


# ── released early ─────────────────────────────────────────────────────
@pytest.mark.parametrize(
    ("rule", "first"), [("one_success", "completed"), ("one_failed", "failed")]
)
async def test_a_dependent_released_early_is_not_touched_by_its_other_upstreams(
    where: str | None, rule: str, first: str
) -> None:
    async with scheduler_for(where) as scheduler:
        decides = scheduler.submit(ok() if first == "completed" else boom())
        later = scheduler.submit(ok("later"), delay=3600)  # ends when cancelled, below
        # Delayed itself, so it is still pending (released, not yet due) when
        # its other upstream ends.
        dependent = scheduler.submit(
            ok("dependent"), depends_on=[decides, later], trigger_rule=rule, delay=3600
        )
        await scheduler.flush()  # stored: the client below reads the store
        async with reader(scheduler, where) as client:
            await client.wait(decides, timeout=60)
            assert await client.cancel(later)
            info = await client.get(dependent)
            assert (info.status, info.last_error) == (P, None)
            assert info.trigger_rule == rule
            assert await client.cancel(dependent)
        await scheduler.join()


async def test_cancelling_a_waiting_upstream_settles_its_dependents(where: str | None) -> None:
    async with scheduler_for(where) as scheduler:
        done = scheduler.submit(ok())
        later = scheduler.submit(ok("later"), delay=3600)
        cleanup = scheduler.submit(ok("cleanup"), depends_on=[done, later], trigger_rule="all_done")
        strict = scheduler.submit(ok("strict"), depends_on=[done, later])
        await scheduler.flush()
        async with reader(scheduler, where) as client:
            await client.wait(done, timeout=60)
            assert (await client.get(cleanup)).status is P  # still waits for `later`
            assert await client.cancel(later)
            await client.wait(cleanup, timeout=60)
            ends = [await client.get(i) for i in (cleanup, strict)]
        await scheduler.join()
    assert [(i.status, i.last_error) for i in ends] == [
        (C, None),
        (X, f"upstream {later} cancelled"),
    ]


# ── cascades ───────────────────────────────────────────────────────────
async def test_cancellations_cascade_through_rules(where: str | None) -> None:
    """fail -> b (all_success) -> c (all_done) -> d: c runs, so d does;
    fail -> b -> e (one_success) -> f -> g: e, f and g are cancelled."""
    async with scheduler_for(where) as scheduler:
        a = scheduler.submit(boom())
        b = scheduler.submit(ok("b"), depends_on=[a])
        c = scheduler.submit(ok("c"), depends_on=[b], trigger_rule="all_done")
        d = scheduler.submit(ok("d"), depends_on=[c])
        e = scheduler.submit(ok("e"), depends_on=[b], trigger_rule="one_success")
        f = scheduler.submit(ok("f"), depends_on=[e])
        g = scheduler.submit(ok("g"), depends_on=[f], trigger_rule="none_failed")
        await scheduler.join()
        found = await infos(scheduler, where, [a, b, c, d, e, f, g])
    assert [(i.status, i.last_error) for i in found[1:]] == [
        (X, f"upstream {a} failed"),
        (C, None),
        (C, None),
        (X, "trigger rule 'one_success': no upstream completed"),
        (X, f"upstream {e} cancelled"),
        (C, None),  # none_failed: a cancelled upstream is not a failure
    ]


# ── checked at submit ──────────────────────────────────────────────────
async def test_a_client_refuses_a_bad_rule_and_a_rule_without_depends_on(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    async with Client(url) as client:
        up = await client.submit(ok())
        with pytest.raises(ValueError, match=r"unknown trigger_rule 'all_sucess'; did you mean"):
            await client.submit(ok(), depends_on=[up], trigger_rule="all_sucess")
        with pytest.raises(ValueError, match=r"^trigger_rule='all_done' needs depends_on$"):
            await client.submit(ok(), trigger_rule="all_done")
        with pytest.raises(ValueError, match="unknown trigger_rule 'sometimes'"):
            await client.submit_many(
                [jobsched.Submission(ok(), depends_on=[up], trigger_rule="sometimes")]
            )
        assert [j.job_id for j in await client.jobs()] == [up]  # nothing else stored
    with BlockingClient(url) as blocking:
        with pytest.raises(ValueError, match="unknown trigger_rule 'never'"):
            blocking.submit(ok(), depends_on=[up], trigger_rule="never")
        dependent = blocking.submit(ok(), depends_on=[up], trigger_rule="none_failed")
        assert blocking.get(dependent).trigger_rule == "none_failed"
    async with JobScheduler() as scheduler:
        local = LocalClient(scheduler)
        first = await local.submit(ok())
        with pytest.raises(ValueError, match="unknown trigger_rule 'nope'"):
            await local.submit(ok(), depends_on=[first], trigger_rule="nope")
        with pytest.raises(ValueError, match="needs depends_on"):
            await local.submit(ok(), trigger_rule="one_failed")
        second = await local.submit(ok(), depends_on=[first], trigger_rule="one_failed")
        assert (await local.get(second)).trigger_rule == "one_failed"
        assert (await local.get(first)).trigger_rule == "all_success"
        await scheduler.join()


# ── the store rows, directly ───────────────────────────────────────────
def new_job(job_id: str, *deps: str, rule: str = "all_success") -> NewJob:
    return NewJob(
        job_id=job_id,
        type="sleep",
        args={"name": job_id, "seconds": 0},
        options={"name": job_id, "executor": "async"},
        run_at=0.0,
        submitted_at=0.0,
        sort_key=(0.0,),
        depends_on=deps,
        trigger_rule=rule,
    )


async def test_two_upstreams_ending_in_one_finish_settle_their_dependent_once(
    flow_store_url: str,
) -> None:
    store: Any
    if flow_store_url.startswith("sqlite"):
        store = SQLiteStore(flow_store_url)
    else:
        from jobsched_plugins.postgres_store import PostgresStore

        store = PostgresStore(flow_store_url)
    await store.open(StoreContext(worker_id="w", shared=True))
    try:
        await store.insert(
            [
                new_job("u1"),
                new_job("u2"),
                new_job("u3"),
                new_job("any", "u1", "u2", "u3", rule="one_failed"),
                new_job("none", "u1", "u2", "u3", rule="one_success"),
            ]
        )
        claimed, _ = await store.claim(3, "w")
        assert sorted(r.job_id for r in claimed) == ["u1", "u2", "u3"]
        await store.finish(
            [Outcome(job_id="u1", status="failed"), Outcome(job_id="u2", status="timed_out")], "w"
        )
        after = {r.job_id: r for r in await store.jobs(["any", "none"])}
        assert (after["any"].status, after["any"].unmet) == ("pending", 0)  # released
        assert (after["none"].status, after["none"].unmet) == ("pending", 1)  # waits for u3
        await store.finish([Outcome(job_id="u3", status="cancelled")], "w")
        after = {r.job_id: r for r in await store.jobs(["any", "none"])}
        assert (after["any"].status, after["any"].unmet, after["any"].last_error) == (
            "pending",
            0,
            None,
        )
        assert (after["none"].status, after["none"].last_error) == (
            "cancelled",
            "trigger rule 'one_success': no upstream completed",
        )
        assert (await store.get("any")).trigger_rule == "one_failed"
    finally:
        await store.close()


# ── a single-owner SQLite store, restarted ─────────────────────────────
@pytest.mark.parametrize(
    ("rule", "status", "error"),
    [
        ("all_done", C, None),
        ("one_success", X, "trigger rule 'one_success': no upstream completed"),
    ],
)
async def test_a_restarted_single_owner_store_keeps_a_waiting_jobs_rule(
    tmp_path: Path, rule: str, status: JobStatus, error: str | None
) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    async with JobScheduler(store=url) as scheduler:
        failed = scheduler.submit(boom())
        later = scheduler.submit(ok("later"), delay=3600)
        dependent = scheduler.submit(ok("dep"), depends_on=[failed, later], trigger_rule=rule)
        assert (await LocalClient(scheduler).wait(failed, timeout=60)).status is F
        await scheduler.flush()
        assert scheduler.get(dependent).status is P
    snapshot = await read_store(url, jobsched.default_plugin_manager())
    assert snapshot is not None
    assert {r.job_id: r.trigger_rule for r in snapshot.jobs}[dependent] == rule
    async with JobScheduler(store=url) as scheduler:
        assert scheduler.get(dependent).status is P
        assert scheduler.kernel.graph.trigger_rule(dependent) == rule
        assert scheduler.kernel.graph.depends_on(dependent) == tuple(sorted([failed, later]))
        scheduler.cancel(later)
        await scheduler.join()
        assert (scheduler.get(dependent).status, scheduler.get(dependent).last_error) == (
            status,
            error,
        )


async def test_a_stored_unknown_trigger_rule_is_refused_naming_the_job(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    url = f"sqlite:///{path}"
    async with JobScheduler(store=url) as scheduler:
        up = scheduler.submit(ok(), delay=3600)
        dependent = scheduler.submit(ok(), depends_on=[up], trigger_rule="all_done")
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute(
            "UPDATE jobsched_jobs SET trigger_rule = 'sometimes' WHERE job_id = ?", (dependent,)
        )
        conn.commit()
    with pytest.raises(StoreError) as caught:
        async with JobScheduler(store=url):
            pass
    assert str(caught.value) == (
        f"{url}: job {dependent} cannot be restored: trigger_rule 'sometimes' is not one of "
        "all_success, all_done, one_success, one_failed, none_failed; "
        "jobsched left the store unchanged"
    )


async def test_a_single_owner_file_of_version_1_is_migrated(tmp_path: Path) -> None:
    from jobsched_plugins.sqlite_store import migrations

    path = tmp_path / "old.db"
    with contextlib.closing(sqlite3.connect(path)) as conn:
        for statement in migrations.SINGLE_OWNER_SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.execute("INSERT INTO jobsched_meta VALUES ('schema_version', '1')")
        conn.execute(
            "INSERT INTO jobsched_jobs VALUES ('job-1', NULL, 'sleep', "
            """'{"name": "old", "seconds": 0}', '{"name": "old"}', '[]', 'completed', 1, """
            "0, 0, 0, 1, NULL, NULL, NULL)"
        )
        conn.commit()
    url = f"sqlite:///{path}"
    snapshot = await read_store(url, jobsched.default_plugin_manager())  # readonly: no migration
    assert snapshot is not None and [r.trigger_rule for r in snapshot.jobs] == ["all_success"]
    async with JobScheduler(store=url) as scheduler:
        assert scheduler.get("job-1").status is C
    with contextlib.closing(sqlite3.connect(path)) as conn:
        version = conn.execute(
            "SELECT value FROM jobsched_meta WHERE name = 'schema_version'"
        ).fetchone()[0]
    assert version == str(migrations.SCHEMA_VERSION) == "16"


# ── job files with a store ─────────────────────────────────────────────
JOBFILE = """\
[[job]]
id = "fail"
type = "flaky-upload"
args = { path = "x", failures = 5 }
retry = "none"

[[job]]
id = "cleanup"
type = "sleep"
args = { name = "cleanup", seconds = 0 }
depends_on = ["fail"]
trigger_rule = "all_done"

[[job]]
id = "page"
type = "sleep"
args = { name = "page", seconds = 0 }
depends_on = ["fail"]
trigger_rule = "one_success"
"""


async def test_a_job_file_with_rules_runs_on_a_single_owner_store(tmp_path: Path) -> None:
    path = tmp_path / "jobs.toml"
    path.write_text(JOBFILE)
    jobfile = load_jobfile(path, plugins=jobsched.default_plugin_manager())
    result = await run_jobfile(jobfile, store=f"sqlite:///{tmp_path / 'jobs.db'}")
    assert {o.id: o.status for o in result.outcomes} == {"fail": F, "cleanup": C, "page": X}


# ── across processes: a Client here, a `jobsched worker` there ─────────
@pytest.mark.slow
async def test_a_client_submits_ruled_jobs_a_worker_process_runs(flow_worker: str) -> None:
    async with Client(flow_worker) as client:
        failed = await client.submit(boom())
        cleanup = await client.submit(ok("cleanup"), depends_on=[failed], trigger_rule="all_done")
        alert = await client.submit(ok("alert"), depends_on=[failed], trigger_rule="one_failed")
        report = await client.submit(ok("report"), depends_on=[failed])
        ends = [await client.wait(i, timeout=60) for i in (cleanup, alert, report)]
        # Submitted once its upstream has failed: decided at once.
        late = await client.submit(ok("late"), depends_on=[failed], trigger_rule="none_failed")
        late_end = await client.wait(late, timeout=60)
    assert [(i.status, i.trigger_rule) for i in ends] == [
        (C, "all_done"),
        (C, "one_failed"),
        (X, "all_success"),
    ]
    assert (late_end.status, late_end.last_error) == (
        X,
        f"trigger rule 'none_failed': upstream {failed} failed",
    )


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_jobsched_run_honours_trigger_rules_with_a_store(
    tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    """``--store sqlite:///`` runs the file itself (single owner); with
    ``--store postgresql://`` a ``jobsched worker`` process runs it."""
    path = tmp_path / "jobs.toml"
    path.write_text(JOBFILE)
    running = None
    if kind == "sqlite":
        url = f"sqlite:///{tmp_path / 'jobs.db'}"
    else:
        url = request.getfixturevalue("pg_schema")[0]
        running = FlowWorker(url)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "jobsched", "run", str(path), "--store", url, "--json"],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        if running is not None:
            running.stop()
    assert done.returncode == 1, done.stderr  # a job failed
    outcomes = {o["id"]: o["status"] for o in json.loads(done.stdout)["jobs"]}
    assert outcomes == {"fail": "failed", "cleanup": "completed", "page": "cancelled"}


# ── two hosts settling one dependent at once (PostgreSQL) ──────────────
@pytest.mark.parametrize(
    ("rule", "status", "error"),
    [
        ("all_done", "pending", None),
        ("one_failed", "cancelled", "trigger rule 'one_failed': no upstream failed"),
    ],
)
async def test_a_finish_waits_for_another_settling_the_same_dependent(
    pg_schema: tuple[str, str], rule: str, status: str, error: str | None
) -> None:
    """Another host's finish has settled `u1` into the dependent (``unmet`` 2 ->
    1) and not committed yet: finishing `u2` here waits for it (the dependent
    is locked while it is settled) and settles from ``unmet`` 1, so the
    dependent is decided, not left waiting for an upstream that already ended."""
    import psycopg

    from jobsched_plugins.postgres_store import PostgresStore
    from pg_support import base_dsn
    from test_postgres_dependency_race import waiting_on_a_lock

    url, schema = pg_schema
    store = PostgresStore(url)
    await store.open(StoreContext(worker_id="w", shared=True))
    try:
        await store.insert([new_job("u1"), new_job("u2"), new_job("dep", "u1", "u2", rule=rule)])
        claimed, _ = await store.claim(2, "w")
        assert sorted(r.job_id for r in claimed) == ["u1", "u2"]
        async with await psycopg.AsyncConnection.connect(base_dsn()) as other:
            await other.execute(
                f"UPDATE \"{schema}\".jobs SET status = 'completed', lease_owner = NULL "
                "WHERE job_id = 'u1'"
            )
            await other.execute(f"UPDATE \"{schema}\".jobs SET unmet = 1 WHERE job_id = 'dep'")
            finish = asyncio.create_task(
                store.finish([Outcome(job_id="u2", status="completed")], "w")
            )
            for _ in range(1200):
                if await waiting_on_a_lock(schema) or finish.done():
                    break
                await asyncio.sleep(0.05)
            assert not finish.done(), "the finish did not wait for the other settling the dependent"
            await other.commit()
        assert await asyncio.wait_for(finish, timeout=60) == ["u2"]
        row = await store.get("dep")
        assert row is not None
        assert (row.status, row.unmet, row.last_error) == (status, 0, error)
    finally:
        await store.close()


async def test_a_retried_ruled_dependent_runs_once_its_upstreams_have_ended(
    flow_store_url: str,
) -> None:
    """An operator's retry counts a ruled job's unfinished upstreams again
    (none here: it runs), not its upstreams that did not complete."""
    async with JobScheduler(store=flow_store_url, shared=True) as scheduler:
        failed = scheduler.submit(boom())
        dependent = scheduler.submit(ok("dep"), depends_on=[failed], trigger_rule="one_success")
        await scheduler.join()
        async with Client(flow_store_url) as client:
            before = await client.get(dependent)
            assert (before.status, before.last_error) == (
                X,
                "trigger rule 'one_success': no upstream completed",
            )
            # This process's worker may claim it at once: only "no longer
            # cancelled" holds when retry reads it back.
            assert (await client.retry(dependent)).status in (P, JobStatus.RUNNING, C)
            after = await client.wait(dependent, timeout=60)
    assert (after.status, after.last_error, after.trigger_rule) == (C, None, "one_success")


@pytest.mark.parametrize("shared", [False, True])
async def test_jobsched_status_shows_a_jobs_trigger_rule(tmp_path: Path, shared: bool) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    async with JobScheduler(store=url, shared=shared) as scheduler:
        up = scheduler.submit(ok(), delay=3600)
        dependent = scheduler.submit(ok(), depends_on=[up], trigger_rule="none_failed")
        await scheduler.flush()
        ids = (up, dependent)
    done = subprocess.run(
        [sys.executable, "-m", "jobsched", "status", "--store", url, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    rules = {j["job_id"]: j["trigger_rule"] for j in json.loads(done.stdout)["jobs"]}
    assert rules == {ids[0]: "all_success", ids[1]: "none_failed"}


async def test_a_submit_before_start_keeps_its_rule_on_a_single_owner_store(
    tmp_path: Path,
) -> None:
    scheduler = JobScheduler(store=f"sqlite:///{tmp_path / 'jobs.db'}")
    failed = scheduler.submit(boom())
    cleanup = scheduler.submit(ok("cleanup"), depends_on=[failed], trigger_rule="all_done")
    async with scheduler:
        await scheduler.join()
        assert scheduler.get(cleanup).status is C
        assert scheduler.kernel.graph.trigger_rule(cleanup) == "all_done"


def test_a_store_helper_refuses_an_unknown_rule() -> None:
    from jobsched.store import settle_at_insert

    with pytest.raises(ValueError, match="unknown trigger_rule 'some'"):
        settle_at_insert("some", ["a"], {"a": "completed"})
    assert settle_at_insert("one_success", ["a", "b"], {"a": "pending", "b": "completed"}) == (
        ["a"],
        0,
        None,
    )
