"""Oban for Python's side of benchmarks/postgres.py, run under its own interpreter.

The ``oban`` package needs Python 3.12 or later, and this script imports
nothing of jobsched's, so benchmarks/postgres.py runs it with another
interpreter (``--oban-python``)::

    python3.12 -m venv .oban && .oban/bin/pip install oban
    python benchmarks/postgres.py --oban-python .oban/bin/python

Each command measures or prepares one thing on the database DSN, as the
other systems' functions in benchmarks/postgres.py do, and prints one line:

    install DSN                  create Oban's tables (in schema public)
    load DSN N                   empty oban_jobs, then insert N no-op jobs (not timed)
    worker DSN CONCURRENCY       connect, start with the queue paused, print "ready",
                                 resume it at a line on stdin; run until SIGTERM
    enqueue DSN N BATCH          enqueue N jobs with ``enqueue_many`` in batches; jobs/s
    concurrent DSN N TASKS       N jobs by TASKS coroutines, each awaiting ``enqueue``
                                 one job at a time; jobs/s
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from typing import Any

from oban import Oban, worker
from oban.schema import install


@worker(queue="default")
class NoOp:
    """Does nothing: what is measured is the queue."""

    async def process(self, job: Any) -> None:
        return None


async def pool(dsn: str, size: int = 10) -> Any:
    return await Oban.create_pool(dsn, min_size=1, max_size=size)


async def empty(dsn: str) -> None:
    p = await pool(dsn)
    async with p.connection() as conn:
        await conn.execute("TRUNCATE oban_jobs")
    await p.close()


async def cmd_install(dsn: str) -> None:
    p = await pool(dsn)
    await install(p)
    await p.close()
    print("installed")


async def cmd_load(dsn: str, n: str) -> None:
    await empty(dsn)
    p = await pool(dsn)
    async with Oban(pool=p) as oban:
        for i in range(0, int(n), 1000):
            await oban.enqueue_many([NoOp.new() for _ in range(min(1000, int(n) - i))])
    await p.close()
    print("loaded")


async def cmd_worker(dsn: str, concurrency: str) -> None:
    p = await pool(dsn)
    node = f"bench-{os.getpid()}"
    oban = Oban(pool=p, node=node, queues={"default": {"limit": int(concurrency), "paused": True}})
    await oban.start()
    loop = asyncio.get_running_loop()
    stopped = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stopped.set)
    print("ready", flush=True)
    await loop.run_in_executor(None, sys.stdin.readline)
    await oban.resume_queue("default", node=node)  # this process's producer only
    await stopped.wait()
    await oban.stop()
    await p.close()


async def cmd_enqueue(dsn: str, n: str, batch: str) -> None:
    await empty(dsn)
    total, size = int(n), int(batch)
    p = await pool(dsn)
    async with Oban(pool=p) as oban:
        start = time.perf_counter()
        for i in range(0, total, size):
            await oban.enqueue_many([NoOp.new() for _ in range(min(size, total - i))])
        end = time.perf_counter()
    await p.close()
    print(total / (end - start))


async def cmd_concurrent(dsn: str, n: str, tasks: str) -> None:
    await empty(dsn)
    total, k = int(n), int(tasks)
    p = await pool(dsn, size=k)  # a connection per coroutine, as a web app's pool
    async with Oban(pool=p) as oban:

        async def submitter(count: int) -> None:
            for _ in range(count):
                await oban.enqueue(NoOp.new())

        start = time.perf_counter()
        await asyncio.gather(*(submitter(total // k + (i < total % k)) for i in range(k)))
        end = time.perf_counter()
    await p.close()
    print(total / (end - start))


COMMANDS = {
    "install": cmd_install,
    "load": cmd_load,
    "worker": cmd_worker,
    "enqueue": cmd_enqueue,
    "concurrent": cmd_concurrent,
}

if __name__ == "__main__":
    import logging

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    command, *arguments = sys.argv[1:]
    asyncio.run(COMMANDS[command](*arguments))
