"""Tasks of named queues, for the queue tests (also run by ``jobsched worker
--import queue_tasks`` processes started from this folder).

`hold` appends ``start``/``end`` lines with its process id and the time to a
file, so a test can check how many ran at once, in which process.
"""

from __future__ import annotations

import asyncio
import os
import time

from jobsched import task


@task(queue="emails")
async def mail(to: str) -> str:
    """Pretend to send a mail; it names the process that ran it."""
    return f"{to} by {os.getpid()}"


@task
async def crunch(n: int) -> str:
    """A job of the default queue; it names the process that ran it."""
    return f"{n} by {os.getpid()}"


@task(queue="slow")
async def hold(path: str, tag: str, seconds: float = 0.05) -> str:
    """Write when it starts and ends (``start TAG PID TIME``) around a nap."""
    with open(path, "a", encoding="utf-8") as out:
        out.write(f"start {tag} {os.getpid()} {time.time()!r}\n")
    await asyncio.sleep(seconds)
    with open(path, "a", encoding="utf-8") as out:
        out.write(f"end {tag} {os.getpid()} {time.time()!r}\n")
    return tag


def most_at_once(path: str) -> int:
    """The most `hold` jobs that ran at once, from its file."""
    events = []
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            kind, _, _, at = line.split()
            events.append((float(at), 0 if kind == "end" else 1))
    running = most = 0
    for _, starts in sorted(events):
        running += 1 if starts else -1
        most = max(most, running)
    return most
