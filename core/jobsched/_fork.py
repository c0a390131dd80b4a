"""A forked copy of a process never runs its scheduler on.

A job that calls ``os.fork()`` (without exec) and lets the child return from
the job, or raise (``sys.exit`` included), hands control back to scheduler
code in the child: a copy of the scheduler, with the parent's event loop,
store connections and leases. When an attempt ends, the kernel (async jobs)
and `run_with_token` (thread jobs) compare the process they run in with the
one that started the attempt, and a child ends itself at once with
`leave_forked_child`, before it touches anything of the parent's. A child
that exits by itself (``os._exit``, an exec, a ``multiprocessing`` process)
never gets there.

`pid` is this process's id, kept current by an at-fork hook, so the check
costs a comparison, not a system call. The same hook tells the clients of
this process (`on_fork_in_child`) that what they hold is the parent's.
"""

from __future__ import annotations

import contextlib
import os
import sys
import weakref
from collections.abc import Callable

#: This process's id (set again in each forked child).
pid = os.getpid()

#: What to call in a forked child, by weak reference: a client that is gone
#: is no longer told.
_in_child: list[weakref.WeakMethod[Callable[[], None]]] = []


def on_fork_in_child(method: Callable[[], None]) -> None:
    """Call the bound `method` in each child this process forks, first thing
    in its only thread (while its object lives)."""
    _in_child[:] = [ref for ref in _in_child if ref() is not None]
    _in_child.append(weakref.WeakMethod(method))


def _after_fork_in_child() -> None:
    global pid
    pid = os.getpid()
    for ref in list(_in_child):
        method = ref()
        if method is not None:
            method()


os.register_at_fork(after_in_child=_after_fork_in_child)


def leave_forked_child(started_in: int, job: object, error: BaseException | None) -> None:
    """End this process at once if it is a child forked while `job` ran in
    process `started_in` (the attempt returned, or raised `error`, in the child).

    The exit status is the one the child asked for (``sys.exit(n)``), 0 if
    the job returned, 1 if it raised. No cleanup runs: the handlers, buffers
    and connections are the parent's. A child that did not ask to exit says
    so on stderr, in one line.
    """
    if pid == started_in:
        return
    if isinstance(error, SystemExit):
        code = error.code
        os._exit(code if isinstance(code, int) else (0 if code is None else 1))
    how = "returned" if error is None else f"raised {type(error).__name__}"
    name = getattr(job, "job_id", None) or repr(job)
    line = (
        f"jobsched: process {pid}, forked by job {name} in process {started_in}, {how} "
        "from the job: it exits instead of running the scheduler on\n"
    )
    with contextlib.suppress(OSError, ValueError, AttributeError):  # no stderr to say it on
        os.write(sys.stderr.fileno(), line.encode(errors="replace"))
    os._exit(0 if error is None else 1)
