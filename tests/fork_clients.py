"""Clients opened before a fork and used in the children (tests/test_client_fork.py).

    python fork_clients.py MODE URL

Each mode opens a client in this process, forks, uses the client in the
children, then uses it again here; every process prints what it saw as one
JSON line (``{"role": "child"|"parent", ...}``). A child that hangs is ended
by its alarm, so a hang is an exit status, never a hung test.

* ``fork``: `os.fork`; the child calls from two threads at once, then leaves
  its ``with`` block and exits as a program does (``sys.exit``, the
  interpreter finalizing), as a gunicorn worker forked from a ``--preload``
  master does.
* ``pool``: a multiprocessing "fork" pool (Celery's prefork pool) submits.
* ``object``: a `BlockingClient` of a store object: the child is told why it
  cannot reopen.
* ``async``: an async `Client`: the child is refused with the fix, closes it
  (which must leave the parent's connection alone) and opens its own.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any

import pg_jobs
from jobsched import BlockingClient, Client, PluginManager, SchedulerError
from jobsched.store import resolve_store

#: Seconds a child may take before its alarm ends it (a hang, today's bug).
CHILD_ALARM = 30
POOL: BlockingClient | None = None


def plugins() -> PluginManager:
    return PluginManager([pg_jobs], autoload=False)


def job(tag: str) -> pg_jobs.Record:
    return pg_jobs.Record(dsn="unused", schema="", tag=tag)


def report(**fields: Any) -> None:
    print(json.dumps({"pid": os.getpid(), **fields}), flush=True)


def fork(child: Callable[[], None], *, finalize: bool) -> int:
    """Run `child` in a forked child; its exit code. With `finalize` the child
    ends with ``sys.exit`` (unwinding the parent's ``with`` blocks it was
    forked in, then finalizing the interpreter), else with ``os._exit``."""
    pid = os.fork()
    if pid == 0:
        signal.alarm(CHILD_ALARM)
        code = 1
        try:
            child()
            code = 0
        except BaseException:
            traceback.print_exc()
        if finalize:
            sys.exit(code)
        os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def stored(client: BlockingClient) -> list[str]:
    return sorted(info.job_id for info in client.jobs())


def with_fork(url: str) -> None:
    with BlockingClient(url, plugins=plugins()) as client:
        first = client.submit(job("parent"))

        def child() -> None:
            ids: list[str] = []
            errors: list[str] = []

            def submit(tag: str) -> None:
                try:
                    ids.append(client.submit(job(tag)))
                except Exception as exc:
                    errors.append(repr(exc))

            # Two threads make the child's first calls at once: one reopens.
            threads = [threading.Thread(target=submit, args=(f"child-{i}",)) for i in range(2)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            report(
                role="child",
                ids=sorted(ids),
                errors=errors,
                seen=client.get(first).job_id,
                submitted_by=[client.get(job_id).submitted_by for job_id in ids],
            )

        code = fork(child, finalize=True)
        again = client.submit(job("parent-again"))
        report(role="parent", child_exit=code, first=first, again=again, stored=stored(client))


def _pool_submit(tag: str) -> tuple[int, str]:
    assert POOL is not None
    return os.getpid(), POOL.submit(job(tag))


def with_pool(url: str) -> None:
    global POOL
    with BlockingClient(url, plugins=plugins()) as client:
        POOL = client
        first = client.submit(job("parent"))
        with multiprocessing.get_context("fork").Pool(2) as pool:
            try:
                done = pool.map_async(_pool_submit, [f"pool-{i}" for i in range(4)])
                submitted = done.get(timeout=CHILD_ALARM)
            except multiprocessing.TimeoutError:
                submitted = []
        report(role="child", ids=sorted(job_id for _, job_id in submitted))
        again = client.submit(job("parent-again"))
        report(role="parent", first=first, again=again, stored=stored(client))


def with_object(url: str) -> None:
    store = resolve_store(url, plugins())
    with BlockingClient(store, plugins=plugins()) as client:
        first = client.submit(job("parent"))

        def child() -> None:
            try:
                client.get(first)
            except SchedulerError as exc:
                report(role="child", error=str(exc))
            else:
                report(role="child", error=None)
            client.close()

        code = fork(child, finalize=False)
        again = client.submit(job("parent-again"))
        report(role="parent", child_exit=code, first=first, again=again, stored=stored(client))


def with_async(url: str) -> None:
    async def main() -> None:
        async with Client(url, plugins=plugins()) as client:
            first = await client.submit(job("parent"))

            def child() -> None:
                async def use() -> None:
                    try:
                        await client.get(first)
                    except SchedulerError as exc:
                        error: str | None = str(exc)
                    else:
                        error = None
                    await client.close()  # the parent's connection: left alone
                    async with Client(url, plugins=plugins()) as own:
                        mine = await own.submit(job("child"))
                    report(role="child", error=error, ids=[mine])

                asyncio.run(use())

            # Forked from inside the parent's loop; the child ends with
            # os._exit: unwinding the parent's running loop there is no test.
            code = fork(child, finalize=False)
            again = await client.submit(job("parent-again"))
            rows = sorted(info.job_id for info in await client.jobs())
            report(role="parent", child_exit=code, first=first, again=again, stored=rows)

    asyncio.run(main())


MODES = {"fork": with_fork, "pool": with_pool, "object": with_object, "async": with_async}

if __name__ == "__main__":
    MODES[sys.argv[1]](sys.argv[2])
