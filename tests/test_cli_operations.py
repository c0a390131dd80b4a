"""The operator commands through the console script, on SQLite (shared mode) and PostgreSQL.

``jobsched jobs retry|requeue|cancel|purge``, ``jobsched schedules
list|pause|resume|trigger`` and ``jobsched queue pause|resume|status``. Each
test sets the store up with a `Client` (and an in-process worker where jobs
must run), runs the command as a user would, and checks both what it printed
and what the store holds afterwards.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

import ops_jobs
import pg_jobs
from jobsched import Client, JobScheduler, JobStatus, PluginManager, RetryPolicy, UnknownJobError
from jobsched.cli._operate import format_duration, parse_duration
from ops_jobs import Cleanup, Report
from shared_support import Target
from test_cli import assert_bad_input, jobsched


@pytest.fixture
def target(db_target: Target) -> Target:
    """The commands run in processes of their own:
    the databases only (a memory store is seen by one process)."""
    return db_target


pytestmark = pytest.mark.slow


def plugins() -> PluginManager:
    return PluginManager([pg_jobs, ops_jobs], autoload=False)


def worker(target: Target) -> JobScheduler:
    """One worker process of the cluster, in this process."""
    return JobScheduler(store=target.url, shared=True, plugins=plugins(), num_workers=2)


def failing(message: str = "boom") -> pg_jobs.Fail:
    job = pg_jobs.Fail(message=message)
    job.retry = RetryPolicy(max_retries=0)
    return job


TESTS = Path(__file__).resolve().parent


@pytest.fixture(scope="session")
def ops_plugin(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of a ``jobsched`` with the test job types installed (plugin ``ops``)."""
    site = tmp_path_factory.mktemp("site")
    info = site / "jobsched_test_ops-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: jobsched-test-ops\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[jobsched]\nops = ops_jobs\n")
    (info / "RECORD").write_text("")
    return {"PYTHONPATH": f"{site}{os.pathsep}{TESTS}"}


_ENV: dict[str, str] = {}


@pytest.fixture(autouse=True)
def _with_ops_plugin(ops_plugin: dict[str, str]) -> None:
    _ENV.update(ops_plugin)


async def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``jobsched ARGS`` in a thread: the event loop (and a worker on it) keeps running."""
    return await asyncio.to_thread(jobsched, *args, env=_ENV)


async def cli_ok(*args: str) -> str:
    result = await cli(*args)
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert result.stderr == ""
    return result.stdout


async def cli_json(*args: str) -> Any:
    return json.loads(await cli_ok(*args, "--json"))


async def finished_long_ago(target: Target, job_id: str, days: float) -> None:
    """Move `job_id`'s finish time `days` into the past (as if it ended then)."""
    store = await target.open_store()
    seconds = days * 86400
    try:
        if target.kind == "postgresql":
            async with store.connection() as conn:
                await conn.execute(
                    f'UPDATE "{target.schema}".jobs SET finished_at = finished_at - %s '
                    "WHERE job_id = %s",
                    [seconds, job_id],
                )
        else:
            await store.call(
                lambda conn: conn.execute(
                    "UPDATE jobsched_shared_jobs SET finished_at = finished_at - ? "
                    "WHERE job_id = ?",
                    (seconds, job_id),
                )
            )
    finally:
        await store.close()


async def until(condition: Any, timeout: float = 60) -> None:
    """Wait until ``await condition()`` is true (a generous timeout, no fixed sleep)."""
    deadline = time.monotonic() + timeout
    while not await condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


# ── jobs retry ────────────────────────────────────────────────────────
async def test_a_failed_job_retried_runs_to_completion(target: Target, tmp_path: Path) -> None:
    flag = tmp_path / "flag"
    async with worker(target), Client(target.url, plugins=plugins()) as client:
        job_id = await client.submit(Report(flag=str(flag)))
        failed = await client.wait(job_id, timeout=60)
        assert (failed.status, failed.attempts) == (JobStatus.FAILED, 1)
        flag.touch()

        out = await cli_ok("jobs", "retry", job_id, "--store", target.url)
        assert out == f"retried {job_id} (failed -> pending)\n"

        await client.wait(job_id, timeout=60)
        done = await client.get(job_id)
    assert (done.status, done.result, done.attempts) == (JobStatus.COMPLETED, "ok", 1)
    # Every ended attempt, oldest first: the failed one, then the one the retry started.
    assert [(a.number, a.status) for a in done.history] == [(1, "failed"), (1, "completed")]
    assert done.history[0].error == f"RuntimeError: {flag} does not exist yet"


async def test_retry_json_and_several_ids(target: Target) -> None:
    async with Client(target.url, plugins=plugins()) as client:
        waiting = [await client.submit(target.rec(f"r{i}"), delay=3600) for i in range(2)]
        for job_id in waiting:
            assert await client.cancel(job_id)
        # The same id twice is retried once.
        retried = await cli_json("jobs", "retry", *waiting, waiting[0], "--store", target.url)
        assert retried == [
            {"job_id": job_id, "type": "record", "before": "cancelled", "status": "pending"}
            for job_id in waiting
        ]
        for job_id in waiting:
            info = await client.get(job_id)
            assert (info.status, info.attempts) == (JobStatus.PENDING, 0)


async def test_retry_refuses_unknown_ids_and_wrong_statuses_changing_nothing(
    target: Target,
) -> None:
    async with Client(target.url, plugins=plugins()) as client:
        cancelled = await client.submit(target.rec("c"), delay=3600)
        await client.cancel(cancelled)
        pending = await client.submit(target.rec("p"), delay=3600)

        unknown = await cli(
            "jobs", "retry", cancelled, "job-nope-1", "job-nope-2", "--store", target.url
        )
        assert_bad_input(
            unknown, "unknown job ids", "job-nope-1, job-nope-2", "nothing was changed"
        )
        assert cancelled not in unknown.stderr

        wrong = await cli("jobs", "retry", cancelled, pending, "--store", target.url)
        assert_bad_input(wrong, f"cannot retry {pending} (pending)", "nothing was changed")
        assert f"{cancelled} (" not in wrong.stderr

        assert (await client.get(cancelled)).status is JobStatus.CANCELLED
        assert (await client.get(pending)).status is JobStatus.PENDING

        one = await cli("jobs", "cancel", "job-nope-3", "--store", target.url)
        assert_bad_input(one, "unknown job id in", "job-nope-3")


# ── jobs requeue ──────────────────────────────────────────────────────
async def test_requeue_by_status_and_type(target: Target, tmp_path: Path) -> None:
    async with Client(target.url, plugins=plugins()) as client:
        async with worker(target):
            fails = [await client.submit(failing(f"f{i}")) for i in range(2)]
            other = await client.submit(Report(flag=str(tmp_path / "never")))
            done = await client.submit(target.rec("done"))
            for info in await client.wait_many([*fails, other, done], timeout=60):
                assert info.status is (
                    JobStatus.COMPLETED if info.job_id == done else JobStatus.FAILED
                )
        # The worker has stopped: what the commands leave stays put.
        cancelled = await client.submit(target.rec("c"), delay=3600)
        await client.cancel(cancelled)

        by_type = await cli_json(
            "jobs", "requeue", "--status", "failed", "--type", "fail", "--store", target.url
        )
        assert by_type == [
            {"job_id": job_id, "type": "fail", "before": "failed", "status": "pending"}
            for job_id in fails
        ]
        assert (await client.get(other)).status is JobStatus.FAILED

        out = await cli_ok(
            "jobs", "requeue", "--status", "failed,timed_out", "--status", "cancelled",
            "--store", target.url,
        )  # fmt: skip
        assert sorted(out.splitlines()) == sorted(
            [
                f"requeued {other} (failed -> pending)",
                f"requeued {cancelled} (cancelled -> pending)",
            ]
        )
        statuses = {i.job_id: i.status for i in await client.jobs()}
        assert statuses == {
            **{job_id: JobStatus.PENDING for job_id in [*fails, other, cancelled]},
            done: JobStatus.COMPLETED,
        }
        nothing = await cli_ok("jobs", "requeue", "--store", target.url)
        assert nothing == "no failed jobs to requeue\n"
        assert await cli_json("jobs", "requeue", "--type", "x", "--store", target.url) == []


# ── jobs cancel ───────────────────────────────────────────────────────
async def test_cancel_waiting_running_and_finished_jobs(target: Target) -> None:
    async with Client(target.url, plugins=plugins()) as client:
        first, second = [await client.submit(target.rec(t), delay=3600) for t in "ab"]
        out = await cli_ok("jobs", "cancel", first, second, "--store", target.url)
        assert out.splitlines() == [
            f"cancelled {first} (pending -> cancelled)",
            f"cancelled {second} (pending -> cancelled)",
        ]
        again = await cli_ok("jobs", "cancel", first, "--store", target.url)
        assert again == f"left {first} as it is: already cancelled\n"

        async with worker(target):
            long = await client.submit(target.rec("long", seconds=3600), timeout=None)

            async def running() -> bool:
                return (await client.get(long)).status is JobStatus.RUNNING

            await until(running)
            [change] = await cli_json("jobs", "cancel", long, "--store", target.url)
            assert change["before"] == "running"
            # The store says cancelled once the worker holding the job has stopped it.
            assert change["outcome"] in ("requested", "cancelled")
            assert (await client.wait(long, timeout=60)).status is JobStatus.CANCELLED
        assert (await client.get(first)).status is JobStatus.CANCELLED


# ── jobs purge ────────────────────────────────────────────────────────
async def test_purge_older_than_and_by_status(target: Target) -> None:
    async with Client(target.url, plugins=plugins()) as client:
        async with worker(target):
            old, recent, other = [await client.submit(target.rec(t)) for t in ("old", "r", "o")]
            failed = await client.submit(failing())
            await client.wait_many([old, recent, other, failed], timeout=60)
        pending = await client.submit(target.rec("p"), delay=3600)
        await finished_long_ago(target, old, days=8)

        out = await cli_ok("jobs", "purge", "--older-than", "7d", "--store", target.url)
        assert out == "purged 1 finished job that finished more than 7d ago\n"
        with pytest.raises(UnknownJobError):
            await client.get(old)

        purged = await cli_json(
            "jobs", "purge", "--older-than", "0", "--status", "completed", "--store", target.url
        )
        assert purged == {"purged": 2, "older_than": 0.0, "status": ["completed"]}
        assert {i.job_id for i in await client.jobs()} == {failed, pending}

        none = await cli_ok("jobs", "purge", "--older-than", "1.5h", "--store", target.url)
        assert none == "purged 0 finished jobs that finished more than 1.5h ago\n"
        everything = await cli_ok("jobs", "purge", "--older-than", "0s", "--store", target.url)
        assert everything == "purged 1 finished job that finished more than 0s ago\n"
        # A job that has not finished is never purged.
        assert [i.job_id for i in await client.jobs()] == [pending]


# ── schedules ─────────────────────────────────────────────────────────
async def test_schedules_list_pause_resume_trigger(target: Target) -> None:
    async with Client(target.url, plugins=plugins()) as client:
        hourly = await client.add_schedule(Cleanup(), every=3600, start_in=3600)
        nightly = await client.add_schedule(
            Report("never"), trigger={"cron": "0 2 * * *", "tz": "America/New_York"}
        )
    # The client that added them is closed: nothing fires them but our commands.
    listed = {
        s["schedule_id"]: s for s in await cli_json("schedules", "list", "--store", target.url)
    }
    assert set(listed) == {hourly, nightly}
    tick = listed[hourly]
    assert (tick["paused"], tick["active"], tick["fired"], tick["skipped"]) == (False, True, 0, 0)
    assert (tick["type"], tick["name"]) == ("cleanup", "cleanup") and tick["last_job_id"] is None
    assert tick["next_run"] > time.time() + 3000
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT02:00:00-0[45]:00", listed[nightly]["next_run_local"])

    table = await cli_ok("schedules", "list", "--store", target.url)
    assert re.search(rf"{hourly}\s.*every 1h\s.*\sno\s+0\s+0", table), table
    assert re.search(
        r'cron "0 2 \* \* \*" America/New_York\s+\S+ 02:00:00 E[SD]T \(-0[45]00\)', table
    )
    assert table.splitlines()[-1] == "2 schedules, 0 paused"

    triggered = await cli_json("schedules", "trigger", hourly, "--store", target.url)
    async with Client(target.url, plugins=plugins()) as client:
        fired = await client.get(triggered["job_id"])
    assert fired.schedule_id == hourly and fired.type == "cleanup"
    # Fired once now; the period did not move.
    assert triggered["schedule"]["next_run"] == tick["next_run"]

    assert await cli_ok("schedules", "pause", hourly, "--store", target.url) == (
        f"paused schedule {hourly}\n"
    )
    assert await cli_ok("schedules", "pause", hourly, "--store", target.url) == (
        f"schedule {hourly} was already paused\n"
    )
    table = await cli_ok("schedules", "list", "--store", target.url)
    assert re.search(rf"{hourly}\s.*\syes\s", table) and "2 schedules, 1 paused" in table

    resumed = await cli_json("schedules", "resume", hourly, "--store", target.url)
    assert resumed["changed"] is True and resumed["schedule"]["paused"] is False
    assert resumed["schedule"]["next_run"] > time.time()
    out = await cli_ok("schedules", "resume", hourly, "--store", target.url)
    assert out.startswith(f"schedule {hourly} was not paused: next fire ")

    for command in ("pause", "resume", "trigger"):
        result = await cli("schedules", command, "sched-nope", "--store", target.url)
        assert_bad_input(result, "unknown schedule id", "sched-nope")


# ── queue ─────────────────────────────────────────────────────────────
async def test_a_paused_queue_is_claimed_from_by_no_worker(target: Target) -> None:
    await (await target.open_store("creator")).close()  # the commands act on a store that exists
    assert await cli_ok("queue", "status", "--store", target.url) == (
        "queue is running: workers claim jobs\n"
    )
    assert await cli_json("queue", "pause", "--store", target.url) == {
        "paused": True,
        "changed": True,
    }
    out = await cli_ok("queue", "pause", "--store", target.url)
    assert out == "queue was already paused; it is paused: workers claim no new jobs\n"
    async with worker(target), Client(target.url, plugins=plugins()) as client:
        job_id = await client.submit(target.rec("q"))
        # Another process asks for work: the store hands out nothing.
        probe = await target.open_store("probe")
        try:
            claimed, _ = await probe.claim(10, "probe")
        finally:
            await probe.close()
        assert claimed == []
        info = await client.get(job_id)
        assert (info.status, info.attempts, info.lease_owner) == (JobStatus.PENDING, 0, None)
        assert await cli_json("queue", "status", "--store", target.url) == {"paused": True}

        out = await cli_ok("queue", "resume", "--store", target.url)
        assert out == "queue resumed; it is running: workers claim jobs\n"
        assert (await client.wait(job_id, timeout=60)).status is JobStatus.COMPLETED
    assert [tag for _, tag, _ in target.executions()] == ["q"]
    assert await cli_json("queue", "resume", "--store", target.url) == {
        "paused": False,
        "changed": False,
    }


# ── bad input, whatever the store ─────────────────────────────────────
@pytest.mark.parametrize(
    "command",
    [
        ["jobs", "retry", "job-1"],
        ["jobs", "requeue"],
        ["jobs", "cancel", "job-1"],
        ["jobs", "purge", "--older-than", "7d"],
        ["schedules", "list"],
        ["schedules", "pause", "s"],
        ["schedules", "resume", "s"],
        ["schedules", "trigger", "s"],
        ["queue", "pause"],
        ["queue", "resume"],
        ["queue", "status"],
    ],
)
def test_every_command_needs_a_store_outside_one_process(
    command: list[str], tmp_path: Path
) -> None:
    assert_bad_input(jobsched(*command), "the following arguments are required: --store")
    assert_bad_input(
        jobsched(*command, "--store", "memory://"),
        "--store 'memory://' is not a store several processes can share",
        "operator actions need a store kept outside one process",
        "sqlite:////abs/path/jobs.db",
    )
    missing = tmp_path / "missing.db"
    assert_bad_input(jobsched(*command, "--store", f"sqlite:///{missing}"), "no such file")
    assert not missing.exists()


async def test_a_single_owner_sqlite_file_is_operated_while_no_owner_runs(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path}/owned.db"
    async with JobScheduler(store=url, plugins=plugins()) as scheduler:
        failed = scheduler.submit(pg_jobs.Fail())
        await scheduler.join()
    assert "failed -> pending" in await cli_ok("jobs", "retry", failed, "--store", url)
    assert "0 schedules" in await cli_ok("schedules", "list", "--store", url)
    # What only its owner does is refused, saying what can be done here.
    assert_bad_input(
        await cli("queue", "pause", "--store", url),
        "owned.db is a single-owner file",
        "pausing the queue is for that process alone",
    )
    # While an owner runs, an action names it.
    async with JobScheduler(store=url, plugins=plugins()) as owner:
        assert_bad_input(
            await cli("jobs", "cancel", failed, "--store", url),
            f"owned by a running jobsched process ({socket.gethostname()}:{os.getpid()})",
        )
        await owner.join()
    status = json.loads(await cli_ok("status", "--store", url, "--json"))
    assert status["counts"]["failed"] == 1  # it ran again, and failed again


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--older-than", "7x"], ["argument --older-than", "'7x' is not a duration"]),
        (["--older-than=-1d"], ["'-1d' is not a duration"]),
        (["--older-than", "d"], ["'d' is not a duration"]),
        (["--older-than", "inf"], ["'inf' is not a duration"]),
        (["--older-than", "1d", "--status", "pending"], ["'pending' is not a status a finished"]),
    ],
)
def test_purge_bad_input(args: list[str], fragments: list[str], tmp_path: Path) -> None:
    result = jobsched("jobs", "purge", *args, "--store", f"sqlite:///{tmp_path}/jobs.db")
    assert_bad_input(result, *fragments)


@pytest.mark.parametrize("status", ["running", "pending", "completed", "failed,done", ","])
def test_requeue_bad_status(status: str, tmp_path: Path) -> None:
    result = jobsched(
        "jobs", "requeue", "--status", status, "--store", f"sqlite:///{tmp_path}/j.db"
    )
    assert_bad_input(result, "argument --status")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("7d", 604800), ("12h", 43200), ("30m", 1800), ("45s", 45), ("1.5h", 5400), ("90", 90),
     ("0", 0), ("0.5", 0.5), (" 2D ", 172800)],
)  # fmt: skip
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(604800, "7d"), (5400, "1.5h"), (90, "1.5m"), (45, "45s"), (0, "0s"), (0.25, "0.25s")],
)
def test_durations_shown(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


# ── docs/cli.md: the documented session, run ──────────────────────────
DOCS = Path(__file__).resolve().parent.parent / "docs" / "cli.md"
DOC_STORE = "sqlite:////srv/jobs.db"
DOC_JOB = re.compile(r"job-\d+-[0-9a-f]{12}")
SHOWN_TIME = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+ \([+-]\d{4}\)")


def _operator_docs() -> str:
    text = DOCS.read_text()
    return text[text.index("## Operating a shared store") : text.index("## Environment")]


def _session(text: str) -> list[tuple[list[str], list[str]]]:
    """Each ``$ jobsched ...`` line of the console blocks, with the lines it printed."""
    steps: list[tuple[list[str], list[str]]] = []
    for block in re.findall(r"```console\n(.*?)```", text, re.S):
        for line in block.splitlines():
            if line.startswith("$ "):
                steps.append((shlex.split(line[2:]), []))
            else:
                steps[-1][1].append(line)
    return steps


def _comparable(text: str, known: set[str]) -> list[str]:
    """Lines as a table prints them whatever the widths, ids and times; sorted."""
    text = DOC_JOB.sub(lambda m: m.group(0) if m.group(0) in known else "<new job>", text)
    text = SHOWN_TIME.sub("<time>", text)
    lines = (" ".join(line.replace("─", "").split()) for line in text.splitlines())
    return sorted(line for line in lines if line)


async def test_the_documented_session(target: Target, tmp_path: Path) -> None:
    never = str(tmp_path / "never")
    async with Client(target.url, plugins=plugins()) as client:
        async with worker(target):
            ran = [await client.submit(job) for job in (Report(never), Report(never), Cleanup())]
            await client.wait_many(ran, timeout=60)
        cancelled = await client.submit(Report(never), delay=3600)
        await client.cancel(cancelled)
        waiting = await client.submit(Cleanup(), delay=3600)
        hourly = await client.add_schedule(Cleanup(), every=3600, start_in=3600)
        nightly = await client.add_schedule(
            Report(never), trigger={"cron": "0 2 * * *", "tz": "America/New_York"}
        )
    await finished_long_ago(target, ran[2], days=8)
    real = [ran[0], ran[1], cancelled, ran[2], waiting]
    doc = {f"job-{n}-8c1e2f3a4b5c": job_id for n, job_id in enumerate(real, start=1)}
    doc |= {"sched-3f9a0c2b7d1e4f58": hourly, "sched-81b2d4e6f0a3c5e7": nightly}
    doc[DOC_STORE] = target.url
    known = set(doc)

    steps = _session(_operator_docs())
    assert len(steps) >= 15
    for command, printed in steps:
        assert command[0] == "jobsched"
        result = await cli(*(doc.get(arg, arg) for arg in command[1:]))
        expected = "\n".join(printed)
        assert result.returncode == (2 if "jobsched: error:" in expected else 0), result.stderr
        output = result.stdout + result.stderr
        for doc_text, real_text in doc.items():
            output = output.replace(real_text, doc_text)
        assert _comparable(output, known) == _comparable(expected, known), command


async def test_every_json_field_is_documented(target: Target) -> None:
    text = _operator_docs()
    async with Client(target.url, plugins=plugins()) as client:
        job_id = await client.submit(Cleanup(), delay=3600)
        schedule_id = await client.add_schedule(Cleanup(), every=3600, start_in=3600)
    url = ["--store", target.url]
    documents = [
        await cli_json("jobs", "cancel", job_id, *url),
        await cli_json("jobs", "retry", job_id, *url),
        await cli_json("jobs", "requeue", "--status", "cancelled", *url),
        await cli_json("jobs", "purge", "--older-than", "0", *url),
        await cli_json("schedules", "list", *url),
        await cli_json("schedules", "pause", schedule_id, *url),
        await cli_json("schedules", "trigger", schedule_id, *url),
        await cli_json("queue", "pause", *url),
    ]
    fields: set[str] = set()
    for document in documents:
        for item in document if isinstance(document, list) else [document]:
            fields |= set(item)
            fields |= set(item.get("schedule", {}))
    assert {"job_id", "outcome", "purged", "next_run_local", "changed", "paused"} <= fields
    for field in fields:
        assert f"`{field}`" in text, field
