"""Worker processes: run the jobs of a shared store until told to stop.

``jobsched worker --store URL`` is `run_worker`; a program can run one too::

    asyncio.run(run_worker("postgresql://host/db", workers=8))
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable
from typing import Any

from . import JobScheduler

__all__ = ["run_worker"]


async def run_worker(
    store: str | Any,
    *,
    workers: int = 4,
    plugins: Any = None,
    strategy: Any = None,
    grace: float = 30.0,
    stop: asyncio.Event | None = None,
    on_started: Callable[[JobScheduler], None] | None = None,
    result_ttl: float | None = None,
    retention: float | None = None,
) -> None:
    """Run a worker process on a shared store until `stop` is set (or SIGINT/SIGTERM).

    This is ``jobsched worker --store URL --workers N``. Stopping claims
    nothing more, hands back the claimed jobs that have not started, and gives
    the running attempts `grace` seconds to finish; those still running then
    are interrupted and handed back too (another process runs them again,
    their attempt counted).

    `result_ttl` and `retention` are ``jobsched worker --result-ttl`` and
    ``--retention`` (seconds; see `JobScheduler`).
    """
    scheduler = JobScheduler(
        strategy,
        num_workers=workers,
        plugins=plugins,
        store=store,
        shared=True,
        result_ttl=result_ttl,
        retention=retention,
    )
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    await scheduler.start()
    # A worker that cannot go on (a store a newer jobsched migrated) stops as
    # on a signal, and `stop()` then raises why.
    waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(scheduler.wait_failed())]
    try:
        if on_started is not None:
            on_started(scheduler)
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()
        stopping = asyncio.ensure_future(scheduler.stop())
        done, _ = await asyncio.wait({stopping}, timeout=grace)
        if not done:
            # Interrupt the attempts (not cancel the jobs): the backend hands
            # them back, and another process runs them again.
            scheduler.interrupt_running()
        await stopping
