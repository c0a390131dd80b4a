"""A failed attempt keeps its formatted traceback, bounded, on every store:
in `JobInfo.traceback` (the last failed attempt's) and in each `Attempt` of
the history; the process and subprocess executors bring the child's back."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import traceback_tasks
from jobsched import Client, JobInfo, JobScheduler, LocalClient
from jobsched.cli import main
from jobsched.store import TRACEBACK_LIMIT, cut_middle, storable_traceback

STORES = ("memory", "journal", "sqlite", "memory_queue", "postgresql")


class Run:
    """A scheduler on one store, and a client reading that store."""

    def __init__(self, scheduler: JobScheduler, client: Any) -> None:
        self.scheduler = scheduler
        self.client = client

    async def failed(self, job: Any) -> JobInfo:
        job_id = self.scheduler.submit(job)
        await self.scheduler.flush()  # a shared store has it: a client can wait on it
        return await self.client.wait(job_id, timeout=60)


@pytest.fixture(params=STORES)
async def run(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Run]:
    kind = request.param
    if kind == "memory":
        scheduler = JobScheduler()
    elif kind == "journal":
        scheduler = JobScheduler(store=f"sqlite:///{tmp_path}/jobs.db")
    else:
        if kind == "sqlite":
            url = f"sqlite:///{tmp_path}/shared.db"
        elif kind == "memory_queue":
            url = f"memory://{uuid.uuid4().hex}"
        else:
            url = request.getfixturevalue("pg_schema")[0]
        scheduler = JobScheduler(store=url, shared=True)
    async with scheduler:
        if kind in ("memory", "journal"):
            async with LocalClient(scheduler) as client:
                yield Run(scheduler, client)
        else:
            async with Client(url) as client:
                yield Run(scheduler, client)


async def test_the_innermost_frame_is_in_the_jobs_traceback(run: Run) -> None:
    info = await run.failed(traceback_tasks.fails_nested.job("deep down"))
    assert info.last_error == "ValueError: deep down"
    assert info.traceback is not None
    assert "in innermost_frame" in info.traceback
    assert "in middle_frame" in info.traceback
    assert info.traceback.rstrip().endswith("ValueError: deep down")


async def test_each_failed_attempt_keeps_its_own_traceback(run: Run) -> None:
    info = await run.failed(traceback_tasks.fails_twice.job("again"))
    assert info.attempts == 2
    full = await run.client.get(info.job_id)
    assert full.traceback is not None and "in innermost_frame" in full.traceback
    failed = [a for a in full.history if a.status == "failed"]
    assert failed, full.history
    assert all(a.traceback is not None and "in innermost_frame" in a.traceback for a in failed)


async def test_a_completed_job_has_no_traceback(run: Run) -> None:
    from task_examples import add

    info = await run.failed(add.job(1, b=2))
    assert info.result == 3 and info.traceback is None


async def test_a_giant_traceback_is_cut_in_the_middle_under_the_bound(run: Run) -> None:
    message = "x" * (3 * TRACEBACK_LIMIT)
    info = await run.failed(traceback_tasks.fails_nested.job(message))
    text = info.traceback
    assert text is not None and len(text) <= TRACEBACK_LIMIT
    assert "characters cut ...]" in text
    assert text.startswith("Traceback (most recent call last):")
    assert text.rstrip().endswith("x" * 100)


@pytest.mark.parametrize(
    ("job", "frame"),
    [
        (traceback_tasks.fails_in_pool, "in pool_child_frame"),
        (traceback_tasks.fails_in_subprocess, "in subprocess_child_frame"),
    ],
    ids=["process", "subprocess"],
)
async def test_a_child_process_brings_its_traceback_back(job: Any, frame: str) -> None:
    async with JobScheduler() as scheduler, LocalClient(scheduler) as client:
        info = await Run(scheduler, client).failed(job.job("in the child"))
    assert info.last_error == "ValueError: in the child"
    assert info.traceback is not None and frame in info.traceback, info.traceback


def test_cut_middle_says_how_much_it_cut_and_keeps_the_bound() -> None:
    text = "".join(f"line {i}\n" for i in range(10_000))
    cut = cut_middle(text, 1000)
    assert len(cut) <= 1000
    head, marker, tail = cut.split("\n", 1)[0], cut, cut[-20:]
    assert head == "line 0" and tail.endswith("line 9999\n")
    n = int(marker.split("[... ", 1)[1].split(" characters cut")[0])
    assert len(cut) - len(f"\n[... {n} characters cut ...]\n") + n == len(text)
    assert cut_middle("short", 1000) == "short"


def test_a_traceback_is_storable_text() -> None:
    try:
        raise ValueError("nul \x00 and lone \udc80")
    except ValueError as exc:
        text = storable_traceback(exc)
    assert "\x00" not in text and "\\x00" in text
    text.encode("utf-8")  # no lone surrogate left


# ── the command line ──────────────────────────────────────────────────
def _failed_job(url: str, *, shared: bool) -> str:
    async def fail() -> str:
        async with JobScheduler(store=url, shared=shared) as scheduler:
            job_id = scheduler.submit(traceback_tasks.fails_twice.job("on the command line"))
            await scheduler.join()
        return job_id

    return asyncio.run(fail())


def test_jobs_show_prints_the_traceback_after_the_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path}/shared.db"
    job_id = _failed_job(url, shared=True)
    capsys.readouterr()
    assert main(["jobs", "show", job_id, "--store", url]) == 0
    out = capsys.readouterr().out.splitlines()
    error = out.index("  error     ValueError: on the command line")
    assert out[error + 1] == "  traceback (last failed attempt):"
    assert any("in innermost_frame" in line for line in out[error + 2 :])
    assert out[-2:] == [
        "  attempt 1: failed  ValueError: on the command line",
        "  attempt 2: failed  ValueError: on the command line",
    ]
    assert main(["jobs", "show", job_id, "--store", url, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert "in innermost_frame" in shown["traceback"]
    assert ["in innermost_frame" in a["traceback"] for a in shown["history"]] == [True, True]


def test_jobs_show_of_an_unknown_id_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path}/shared.db"
    _failed_job(url, shared=True)
    capsys.readouterr()
    assert main(["jobs", "show", "job-nope", "--store", url]) == 2
    assert capsys.readouterr().err == f"jobsched: error: unknown job id in {url}: job-nope\n"


@pytest.mark.parametrize("shared", [True, False], ids=["shared", "single-owner"])
def test_status_json_has_the_traceback(
    shared: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path}/jobs.db"
    job_id = _failed_job(url, shared=shared)
    capsys.readouterr()
    assert main(["status", "--store", url, "--json"]) == 0
    (job,) = json.loads(capsys.readouterr().out)["jobs"]
    assert job["job_id"] == job_id and job["error"] == "ValueError: on the command line"
    assert "in innermost_frame" in job["traceback"]


@pytest.mark.parametrize("shared", [True, False], ids=["shared", "single-owner"])
def test_a_retried_job_has_no_traceback_until_it_fails_again(
    shared: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path}/jobs.db"
    job_id = _failed_job(url, shared=shared)
    assert main(["jobs", "retry", job_id, "--store", url]) == 0
    capsys.readouterr()
    assert main(["status", "--store", url, "--json"]) == 0
    (job,) = json.loads(capsys.readouterr().out)["jobs"]
    assert (job["status"], job["error"], job["traceback"]) == ("pending", None, None)
