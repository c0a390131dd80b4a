"""Workers that survive their jobs (issue 20 items 6 and 8, and forks), on both shared stores.

Real ``jobsched worker`` processes run `worker_fault_jobs`:

- a job that spins the event loop ends its worker through the loop watchdog
  (``--block-limit``), the job named in its log with the loop's stack; a
  SIGTERM ends a blocked worker once its grace is over; a brief block does
  nothing;
- SIGTERM to a worker whose thread job never returns: after the grace the job
  is handed back and the process exits; a second SIGTERM does it at once;
- a job that forks: the child never runs the worker on, the job's outcome
  is recorded once, by the parent, and the worker goes on; the same for
  ``jobsched run`` with the memory store.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import worker_fault_jobs as jobs
from jobsched import Client, JobInfo, JobStatus
from jobsched.worker import EXIT_LOOP_BLOCKED
from worker_support import TESTS, Worker, shared_store

pytestmark = pytest.mark.slow


@pytest.fixture(params=["postgresql", "sqlite"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return shared_store(request, tmp_path)


class FaultWorker(Worker):
    """``jobsched worker --import worker_fault_jobs [options]``."""

    def __init__(self, url: str, *options: str) -> None:
        super().__init__(url, "--import", "worker_fault_jobs", *options)

    def ended(self) -> int:
        """Its exit status, once it exited by itself."""
        return self.proc.wait(timeout=60)


@pytest.fixture
def workers() -> Iterator[list[FaultWorker]]:
    """The workers a test started: killed if the test left them running."""
    started: list[FaultWorker] = []
    yield started
    for worker in started:
        if worker.proc.poll() is None:
            worker.proc.kill()
            worker.proc.wait()


async def started(path: Path) -> None:
    """Wait until a job touched `path` (it runs in the worker now)."""
    give_up = time.monotonic() + 60
    while not path.exists():
        if time.monotonic() > give_up:
            pytest.fail(f"the job did not start: {path} was never touched")
        await asyncio.sleep(0.02)


def assert_handed_back(info: JobInfo) -> None:
    """Queued again for any worker: not failed, not cancelled, nobody's lease."""
    assert info.status in (JobStatus.PENDING, JobStatus.RETRY_WAIT), info
    assert info.lease_owner is None
    assert info.last_error == "scheduler shut down"
    assert [(a.status, a.error) for a in info.history] == [("handed_back", "scheduler shut down")]


# ── item 6: a job that blocks the event loop ─────────────────────────
async def test_a_spinning_job_ends_its_worker_through_the_watchdog(
    store_url: str, tmp_path: Path, workers: list[FaultWorker]
) -> None:
    async with Client(store_url) as client:
        job_id = await client.submit(jobs.spin.job(str(tmp_path / "spinning")))
        workers.append(worker := FaultWorker(store_url, "--block-limit", "0.5"))
        assert worker.ended() == EXIT_LOOP_BLOCKED
    line = worker.log.wait_for("event loop blocked for")
    assert f"{job_id} (worker_fault_jobs.spin)" in line
    assert "ending the worker" in line
    # The loop's stack, innermost frame last: the spinning job.
    log = "".join(worker.log.lines)
    assert 'worker_fault_jobs.py", line' in log and "in spin" in log


async def test_sigterm_ends_a_blocked_worker_when_its_grace_is_over(
    store_url: str, tmp_path: Path, workers: list[FaultWorker]
) -> None:
    async with Client(store_url) as client:
        job_id = await client.submit(jobs.spin.job(str(tmp_path / "spinning")))
        workers.append(worker := FaultWorker(store_url, "--block-limit", "3600", "--grace=1"))
        await started(tmp_path / "spinning")
        worker.proc.send_signal(signal.SIGTERM)
        assert worker.ended() == EXIT_LOOP_BLOCKED
    line = worker.log.wait_for("event loop blocked and the shutdown's grace is over")
    assert job_id in line


async def test_a_brief_block_of_the_loop_does_not_trip_the_watchdog(
    store_url: str, workers: list[FaultWorker]
) -> None:
    async with Client(store_url) as client:
        workers.append(worker := FaultWorker(store_url, "--block-limit", "30"))
        info = await client.wait(await client.submit(jobs.block_loop.job(0.3)), timeout=60)
        assert (info.status, info.result) == (JobStatus.COMPLETED, "unblocked")
        assert worker.proc.poll() is None
    worker.stop()
    assert not any("event loop blocked" in line for line in worker.log.lines)


# ── item 8: a thread job that never returns ──────────────────────────
async def test_sigterm_hands_back_a_never_ending_thread_job_and_exits(
    store_url: str, tmp_path: Path, workers: list[FaultWorker]
) -> None:
    async with Client(store_url) as client:
        job_id = await client.submit(jobs.wait_forever.job(str(tmp_path / "waiting")))
        workers.append(worker := FaultWorker(store_url, "--grace=0.5"))
        await started(tmp_path / "waiting")
        worker.proc.send_signal(signal.SIGTERM)
        assert worker.ended() == 0
        assert_handed_back(await client.get(job_id))
    worker.log.wait_for("handing back the running jobs")
    line = worker.log.wait_for("exiting without the threads still running")
    assert "jobsched_" in line  # the pool thread that never returned


async def test_a_second_sigterm_hands_back_at_once(
    store_url: str, tmp_path: Path, workers: list[FaultWorker]
) -> None:
    async with Client(store_url) as client:
        job_id = await client.submit(jobs.wait_forever.job(str(tmp_path / "waiting")))
        workers.append(worker := FaultWorker(store_url, "--grace=3600"))
        await started(tmp_path / "waiting")
        worker.proc.send_signal(signal.SIGTERM)
        worker.log.wait_for("stopping: running jobs may finish within the grace")
        worker.proc.send_signal(signal.SIGTERM)
        assert worker.ended() == 0
        assert_handed_back(await client.get(job_id))
    assert "why='a second signal'" in worker.log.wait_for("handing back the running jobs")


# ── forks ───────────────────────────────────────────────────────────
async def test_a_forked_child_never_runs_the_worker_on(
    store_url: str, workers: list[FaultWorker]
) -> None:
    cases = [
        (jobs.fork_async, "exit", 0),
        (jobs.fork_async, "return", 0),
        (jobs.fork_async, "raise", 1),
        (jobs.fork_thread, "exit", 0),
        (jobs.fork_thread, "return", 0),
    ]
    async with Client(store_url) as client:
        workers.append(worker := FaultWorker(store_url))
        ids = [await client.submit(fork.job(child_does)) for fork, child_does, _ in cases]
        infos = await client.wait_many(ids, timeout=120)
        for info, (_, child_does, status) in zip(infos, cases, strict=True):
            # The parent's outcome, once: the child exited at once, touching nothing.
            assert info.status is JobStatus.COMPLETED, (child_does, info)
            assert info.result == {"exit_status": status, "killed": False}, (child_does, info)
            history = (await client.get(info.job_id)).history
            assert [a.status for a in history] == ["completed"], (child_does, history)
        # The worker goes on.
        after = await client.wait(await client.submit(jobs.noop.job()), timeout=60)
        assert (after.status, after.result) == (JobStatus.COMPLETED, "done")
    worker.stop()
    # A child that did not exit by itself says so, once, and exits.
    for job_id, (fork, child_does, _) in zip(ids, cases, strict=True):
        said = [line for line in worker.log.lines if f"forked by job {job_id} " in line]
        expected = "raised RuntimeError" if child_does == "raise" else "returned"
        assert len(said) == (child_does != "exit"), (fork, child_does, said)
        assert all(expected in line for line in said)


def test_a_forked_child_never_runs_jobsched_run_on(tmp_path: Path) -> None:
    """The memory store: one scheduler in one process, which a child must not copy on."""
    cases = {"async-exit": ("fork_async", "exit"), "async-return": ("fork_async", "return")}
    cases["thread-return"] = ("fork_thread", "return")
    path = tmp_path / "forks.toml"
    path.write_text(
        "".join(
            f'[[job]]\nid = "{name}"\ntype = "worker_fault_jobs.{task}"\n'
            f'args = {{ child_does = "{child_does}" }}\n'
            for name, (task, child_does) in cases.items()
        )
    )
    command = ["run", str(path), "--json", "--import", "worker_fault_jobs"]
    done = subprocess.run(
        [sys.executable, "-m", "jobsched", *command],
        cwd=TESTS,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    # One summary (a child that ran on would print its own), every job once, by the parent.
    summary = json.loads(done.stdout)
    outcomes = {o["id"]: (o["status"], o["attempts"], o["result"]) for o in summary["jobs"]}
    ran = ("completed", 1, {"exit_status": 0, "killed": False})
    assert outcomes == dict.fromkeys(cases, ran)


@pytest.mark.parametrize("limit", ["0", "-1", "nan"])
def test_a_block_limit_that_is_not_positive_is_bad_input(tmp_path: Path, limit: str) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    done = subprocess.run(
        [sys.executable, "-m", "jobsched", "worker", "--store", url, "--block-limit", limit],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"jobsched: error: --block-limit must be more than 0 seconds, got {limit}"
    ]
