"""The child side of the ``subprocess`` executor: ``python -m jobsched_plugins._subprocess_child``.

Reads one pickled request from stdin: ``{"sys_path": [...], "job": pickled job}``;
runs the job; writes one pickled reply to the stdout it was started with:
``("ok", result)`` or ``("error", exception, traceback)`` (or
``("error-text", type name, message, traceback)`` when the exception cannot
be pickled), the traceback formatted here, where its frames are. Anything the job
prints to stdout goes to stderr, so it cannot corrupt the reply. Progress
reports go to the pipe ``progress_fd`` names, one JSON line each.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
import pickle
import sys
import traceback
from collections.abc import Iterator


def main() -> int:
    reply_fd = os.dup(1)
    os.dup2(2, 1)  # the job's prints go to stderr
    sys.stdout = sys.stderr
    request = pickle.loads(sys.stdin.buffer.read())
    for entry in reversed(request.get("sys_path", [])):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    reply: tuple[object, ...]
    try:
        job = pickle.loads(request["job"])  # after sys.path is set: its module must import
    except Exception as exc:
        why = f"{type(exc).__name__}: {exc}"
        error = _not_picklable(f"the job cannot be unpickled in the child process ({why})")
        return _reply(reply_fd, ("error", error, None))
    try:
        with _progress_to(request.get("progress_fd")):
            run_sync = getattr(job, "run_sync", None)
            if run_sync is not None and not inspect.iscoroutinefunction(run_sync):
                result = run_sync()
            else:
                result = asyncio.run(job.run())
        reply = ("ok", result)
    except BaseException as exc:  # report everything, even SystemExit, to the parent
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        reply = ("error", exc, text)
    return _reply(reply_fd, reply)


@contextlib.contextmanager
def _progress_to(fd: int | None) -> Iterator[None]:
    """`jobsched.progress` in the job writes JSON lines to the parent's pipe `fd`."""
    if fd is None:
        yield
        return
    from jobsched import progress_sender

    with os.fdopen(fd, "wb", buffering=0) as pipe:

        def send(done: float, total: float | None, message: str | None) -> None:
            with contextlib.suppress(OSError):  # the parent is gone: nobody to tell
                pipe.write(json.dumps([done, total, message]).encode() + b"\n")

        with progress_sender(send):
            yield


def _reply(reply_fd: int, reply: tuple[object, ...]) -> int:
    try:
        data = pickle.dumps(reply)
    except Exception as exc:
        if reply[0] == "ok":
            why = f"{type(exc).__name__}: {exc}"
            refused = _not_picklable(f"result is not picklable: {why}")
            data = pickle.dumps(("error", refused, None))
        else:
            error = reply[1]
            data = pickle.dumps(("error-text", type(error).__name__, str(error), reply[2]))
    with os.fdopen(reply_fd, "wb") as out:
        out.write(data)
    return 0


def _not_picklable(message: str) -> Exception:
    # Imported only now: most children never need it.
    from jobsched import NotPicklableError

    return NotPicklableError(message)


if __name__ == "__main__":
    sys.exit(main())
