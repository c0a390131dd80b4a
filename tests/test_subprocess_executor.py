"""The killable ``subprocess`` executor: a timed-out or cancelled job is really gone."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from jobsched import FunctionJob, JobScheduler, JobStatus, NonRetryableError, RetryPolicy
from jobsched.testing import VirtualClock

pytestmark = pytest.mark.slow

NO_RETRY = RetryPolicy(max_retries=0)


# Module-level, so the child process can unpickle them by reference.
def hang(pid_file: str) -> None:
    grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    Path(pid_file).write_text(f"{os.getpid()} {grandchild.pid}")
    time.sleep(600)


def add(a: int, b: int) -> int:
    print("a job's prints go to stderr, not into the reply")
    return a + b


def fail() -> None:
    raise ValueError("bad row 7")


def fail_for_good() -> None:
    raise NonRetryableError("give up")


def crash() -> None:
    os._exit(3)


def unpicklable_result() -> Any:
    return lambda: None


async def wait_for_file(path: Path) -> list[int]:
    # A bounded wait for the child to start (no assertion on how long it takes).
    for _ in range(3000):
        if path.exists() and path.read_text():
            return [int(p) for p in path.read_text().split()]
        await asyncio.sleep(0.01)
    raise AssertionError(f"the child never wrote {path}")


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # Still in the process table: only acceptable as an unreaped zombie of
    # someone else (the grandchild is reparented to init, which reaps it).
    status = Path(f"/proc/{pid}/status")
    return status.exists() and "State:\tZ" in status.read_text()


async def test_a_timed_out_job_is_killed_and_its_slot_reused(tmp_path: Path) -> None:
    clock = VirtualClock()
    scheduler = JobScheduler(num_workers=1, clock=clock)
    pid_file = tmp_path / "pids"
    stuck = scheduler.submit(hang, str(pid_file), model="subprocess", timeout=5.0, retry=NO_RETRY)
    quick = scheduler.submit(add, 2, 3, model="subprocess", timeout=5.0)
    async with scheduler:
        child, grandchild = await wait_for_file(pid_file)
        assert not gone(child)
        await clock.advance(5)  # the watchdog times the attempt out
        await scheduler.join()
    assert scheduler.get(stuck).status is JobStatus.TIMED_OUT
    assert scheduler.get(stuck).last_error == "timed out after 5.0s"
    with pytest.raises(ProcessLookupError):  # killed and reaped: not even a zombie
        os.kill(child, 0)
    for _ in range(500):  # init reaps the killed grandchild on its own schedule
        if gone(grandchild):
            break
        await asyncio.sleep(0.01)
    assert gone(grandchild), f"grandchild {grandchild} still runs"
    # The one worker slot ran the next job once the stuck one was killed.
    assert scheduler.get(quick).status is JobStatus.COMPLETED
    assert scheduler.get(quick).result == 5
    assert scheduler.get(quick).started_at == 5.0
    assert scheduler.peak_running == 1


async def test_a_cancelled_job_is_killed(tmp_path: Path) -> None:
    scheduler = JobScheduler(num_workers=1)
    pid_file = tmp_path / "pids"
    job_id = scheduler.submit(hang, str(pid_file), model="subprocess", timeout=None)
    async with scheduler:
        child, _ = await wait_for_file(pid_file)
        assert scheduler.cancel(job_id)
        await scheduler.join()
    assert scheduler.get(job_id).status is JobStatus.CANCELLED
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)


async def test_results_and_failures_come_back() -> None:
    scheduler = JobScheduler(num_workers=4)
    ids = {
        name: scheduler.submit(fn, *args, model="subprocess", retry=NO_RETRY)
        for name, fn, args in [
            ("add", add, (20, 22)),
            ("fail", fail, ()),
            ("final", fail_for_good, ()),
            ("crash", crash, ()),
            ("unpicklable", unpicklable_result, ()),
        ]
    }
    unpicklable_job = FunctionJob(lambda: 1, model="subprocess", retry=NO_RETRY)
    ids["lambda"] = scheduler.submit(unpicklable_job)
    async with scheduler:
        await scheduler.join()
    jobs = {name: scheduler.get(job_id) for name, job_id in ids.items()}
    assert jobs["add"].result == 42
    assert jobs["fail"].status is JobStatus.FAILED
    assert jobs["fail"].last_error == "ValueError: bad row 7"
    assert jobs["final"].last_error == "NonRetryableError: give up"
    assert jobs["crash"].last_error == (
        "SubprocessJobError: the child process exited with code 3 and no reply"
    )
    assert jobs["unpicklable"].last_error is not None
    assert "result is not picklable" in jobs["unpicklable"].last_error
    assert jobs["lambda"].last_error is not None
    assert "cannot run on the subprocess executor: it is not picklable" in (
        jobs["lambda"].last_error
    )


def stops_on_sigterm(pid_file: str, done_file: str) -> None:
    import signal

    def graceful(signum: int, frame: Any) -> None:
        Path(done_file).write_text("cleaned up")
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, graceful)
    Path(pid_file).write_text(f"{os.getpid()} 0")
    time.sleep(600)


async def test_kill_grace_sends_sigterm_first(tmp_path: Path) -> None:
    from jobsched_plugins.subprocess_executor import SubprocessExecutor

    executor = SubprocessExecutor(kill_grace=30.0)
    pid_file, done_file = tmp_path / "pids", tmp_path / "done"
    job = FunctionJob(stops_on_sigterm, str(pid_file), str(done_file), model="subprocess")
    attempt = asyncio.ensure_future(executor.invoke(job))
    child, _ = await wait_for_file(pid_file)
    assert executor.children == {job.job_id: child}
    attempt.cancel()
    with pytest.raises(asyncio.CancelledError):
        await attempt
    assert done_file.read_text() == "cleaned up"  # it had its chance to clean up
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)
    assert executor.children == {}
