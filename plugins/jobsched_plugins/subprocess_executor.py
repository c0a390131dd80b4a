"""The ``subprocess`` executor: each attempt in a child process that can be killed.

``model="subprocess"`` runs ``job.run_sync()`` (or an async job's ``run()``)
in a fresh ``python -m jobsched_plugins._subprocess_child``, with the job
pickled over its stdin and the result pickled back over its stdout. When the
attempt times out or is cancelled the child's whole process group gets
SIGKILL (after SIGTERM and `kill_grace` seconds, if set) and is reaped before
the worker moves on: the job has really stopped and its slot is reused.

`jobsched.progress` in the child writes one JSON line per (throttled) report
to a pipe the child inherits; the parent hands each to the scheduler.

Costs a Python start-up per attempt (tens of milliseconds): for long, untrusted
or hang-prone work, not for many tiny jobs. Like ``process``, the job and its
result must be picklable (module-level classes and functions).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pickle
import signal
import sys
from typing import Any

from jobsched import Job, NotPicklableError, hookimpl, progress_reporter
from jobsched.hookspecs import Register

CHILD_MODULE = "jobsched_plugins._subprocess_child"
#: Seconds to wait, after the child exited, for the end of its progress pipe.
_REPORTS_GRACE = 1.0


class SubprocessJobError(Exception):
    """The child process died without a reply (killed by a signal, crashed, exited early)."""


class ChildTraceback(Exception):
    """The traceback of the child's exception, as the child formatted it: the
    ``__cause__`` of the error raised here (as `concurrent.futures` does), so
    the job's formatted traceback (`jobsched.Job.last_traceback`) names the
    child's frames."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return f'\n"""\n{self.text}"""'


class RemoteJobError(Exception):
    """An exception from the child that could not be pickled: its type name and message."""

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(f"{type_name}: {message}")
        self.type_name = type_name


class SubprocessExecutor:
    """Runs every attempt in its own child process; kills it on timeout or cancel."""

    def __init__(self, workers: int = 1, *, kill_grace: float = 0.0) -> None:
        self.workers = workers
        self.kill_grace = kill_grace
        #: pid of the child running each job id's attempt (for tests and introspection).
        self.children: dict[str, int] = {}

    async def invoke(self, job: Job) -> Any:
        try:
            pickled_job = pickle.dumps(job)
        except Exception as exc:
            raise NotPicklableError(
                f"{job!r} cannot run on the subprocess executor: it is not picklable "
                f"({type(exc).__name__}: {exc})"
            ) from exc
        loop = asyncio.get_running_loop()
        read_fd, write_fd = os.pipe()  # progress reports, child -> here
        try:
            payload = pickle.dumps(
                {"sys_path": list(sys.path), "job": pickled_job, "progress_fd": write_fd}
            )
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                CHILD_MODULE,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                start_new_session=True,  # its own process group: kill grandchildren too
                pass_fds=(write_fd,),
            )
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)  # the child has its copy: EOF when it exits
        transport, reports = await loop.connect_read_pipe(
            lambda: _Reports(job, progress_reporter()), os.fdopen(read_fd, "rb", buffering=0)
        )
        self.children[job.job_id] = proc.pid
        try:
            out, _ = await proc.communicate(payload)
            # Every report the child wrote is delivered at EOF; a grandchild
            # holding the pipe open must not hold the attempt.
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(reports.closed), _REPORTS_GRACE)
        except asyncio.CancelledError:
            await self._kill(proc)
            raise
        finally:
            self.children.pop(job.job_id, None)
            transport.close()
        return _decode(out, proc.returncode)

    async def _kill(self, proc: asyncio.subprocess.Process) -> None:
        if proc.returncode is None and self.kill_grace > 0:
            _signal_group(proc.pid, signal.SIGTERM)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(proc.wait()), self.kill_grace)
        # The whole group, even if the child itself is gone: stragglers it forked.
        _signal_group(proc.pid, signal.SIGKILL)
        await proc.wait()  # reap: no zombie, and the pid is really gone

    def shutdown(self) -> None:
        pass


class _Reports(asyncio.Protocol):
    """Reads the child's progress lines (``[done, total, message]``) and reports them."""

    def __init__(self, job: Job, reporter: Any) -> None:
        self.job = job
        self.reporter = reporter
        self.buffer = b""
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        *lines, self.buffer = (self.buffer + data).split(b"\n")
        if self.reporter is None:
            return
        for line in lines:
            try:
                done, total, message = json.loads(line)
            except ValueError:
                continue  # not a report: nothing the parent can do with it
            self.reporter.report_threadsafe(self.job, done, total, message)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _decode(out: bytes, returncode: int | None) -> Any:
    if not out:
        raise SubprocessJobError(f"the child process exited with code {returncode} and no reply")
    reply = pickle.loads(out)
    if reply[0] == "ok":
        return reply[1]
    # None: the error is the child's own (the job would not unpickle, or its
    # result would not pickle), not one the job raised.
    cause = None if reply[-1] is None else ChildTraceback(reply[-1])
    if reply[0] == "error":
        error = reply[1]
        if isinstance(error, Exception):
            raise error from cause
        raise SubprocessJobError(f"the job raised {type(error).__name__}: {error}") from cause
    raise RemoteJobError(reply[1], reply[2]) from cause


@hookimpl
def jobsched_register_executors(register: Register) -> None:
    register("subprocess", SubprocessExecutor)
