"""Jobs that misbehave in a worker process (``jobsched worker --import
worker_fault_jobs``, from this folder): they spin the event loop, block a
thread for good, or fork."""

from __future__ import annotations

import asyncio
import os
import pathlib
import signal
import sys
import threading
import time

from jobsched import task

#: Seconds a forking job waits for its child before it kills it.
CHILD_WAIT = 30.0


@task(timeout=None, retry="none")
async def spin(started: str) -> None:
    """Touch the file `started`, then never give the event loop back."""
    pathlib.Path(started).touch()
    while True:
        pass


@task(timeout=None, retry="none")
async def block_loop(seconds: float) -> str:
    time.sleep(seconds)  # blocks the loop for a while, then gives it back
    return "unblocked"


@task(timeout=None, retry="none")
def wait_forever(started: str) -> None:
    """Touch the file `started`, then block this thread for good."""
    pathlib.Path(started).touch()
    threading.Event().wait()  # never set


@task(timeout=None, retry="none")
async def noop() -> str:
    return "done"


def _leave_as_child(child_does: str) -> dict[str, object]:
    """In the child: leave the job as `child_does` says (``"exit"``:
    ``sys.exit(0)``, ``"return"``: return, ``"raise"``: an exception)."""
    if child_does == "exit":
        sys.exit(0)
    if child_does == "raise":
        raise RuntimeError("the child fails")
    return {"child": "returned"}


def _ended(pid: int) -> dict[str, object] | None:
    """How child `pid` ended, or None while it runs; killed after `CHILD_WAIT` s."""
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        return {"exit_status": os.waitstatus_to_exitcode(status), "killed": False}
    return None


def _kill(pid: int) -> dict[str, object]:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return {"exit_status": None, "killed": True}


@task(timeout=None, retry="none")
async def fork_async(child_does: str) -> dict[str, object]:
    """Fork on the event loop's thread; the parent waits for its child."""
    pid = os.fork()
    if pid == 0:
        return _leave_as_child(child_does)
    give_up = time.monotonic() + CHILD_WAIT
    while (ended := _ended(pid)) is None:
        if time.monotonic() > give_up:
            return _kill(pid)
        await asyncio.sleep(0.01)
    return ended


@task(timeout=None, retry="none")
def fork_thread(child_does: str) -> dict[str, object]:
    """Fork on a pool thread; the parent waits for its child."""
    pid = os.fork()
    if pid == 0:
        return _leave_as_child(child_does)
    give_up = time.monotonic() + CHILD_WAIT
    while (ended := _ended(pid)) is None:
        if time.monotonic() > give_up:
            return _kill(pid)
        time.sleep(0.01)
    return ended
