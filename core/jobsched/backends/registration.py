"""`Registration`: a shared-store process's row in the worker registry, and
the operators' requests it reads back from it.

The row is written when the process opens the store and on its lease
renewal cadence (every third of the lease), and deleted when it stops
cleanly (`WorkersRole`). An operator's request (``jobsched workers drain
ID``, `jobsched.Client.drain_worker`; ``stop`` likewise) is a column of that
row, which the heartbeat's own statement returns: the worker learns of it
without a query of its own, at the latest one heartbeat interval later,
and at once where the store tells it (`WorkersRole.on_worker_request`:
PostgreSQL's NOTIFY, memory://), which wakes the renewer for an early beat.

Requests escalate: ``drain`` (claim nothing more, hand back what it holds
unstarted, finish the running jobs, keep heartbeating as ``draining``),
then ``stop`` (that, and the process stops: `KernelPort.ask_stop`, which
``jobsched worker`` waits for and answers like SIGTERM).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from ..store import WORKER_COMMANDS, WORKER_RETENTION, SharedStore, WorkerRow


class Registration:
    """One process's registry row: written by `beat`, deleted by `forget`.

    `row()` describes the process as it stands; `act(command)` carries out
    an operator's request the first time a heartbeat returns it (and each
    time one escalates it: ``drain`` then ``stop``).
    """

    def __init__(
        self,
        store: SharedStore,
        identity: str,
        *,
        row: Callable[[], WorkerRow],
        act: Callable[[str], Awaitable[None]],
        log: Any,
    ) -> None:
        self.store = store
        self.identity = identity
        self._row = row
        self._act = act
        self._log = log
        #: It claims nothing more (stopping, or asked to drain): its row says ``draining``.
        self.draining = False
        #: The request acted on: None, ``"drain"`` or ``"stop"``.
        self.asked: str | None = None
        self._told = asyncio.Event()

    def told(self, worker_id: str) -> None:
        """`WorkersRole.on_worker_request`: a request for `worker_id` was left;
        if it is this process's, the next `wait` returns at once."""
        if worker_id == self.identity:
            self._told.set()

    async def wait(self, timeout: float) -> bool:
        """Wait `timeout` seconds, or less if a request for this process was
        told (True: beat now, the renewal's cadence is unchanged)."""
        if not self._told.is_set() and timeout > 0:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._told.wait(), timeout)
        told = self._told.is_set()
        self._told.clear()
        return told

    async def beat(self) -> None:
        """Write the row and act on the request it returns. Never raises: a
        missed beat is only a worker shown late, or lost for a while, and
        its request is read at the next one."""
        try:
            command = await self.store.heartbeat(self._row(), WORKER_RETENTION)
        except Exception as exc:
            self._log.warning("could not write the worker's heartbeat", error=str(exc))
            return
        if command is None or not _escalates(self.asked, command):
            return
        asked, self.asked = self.asked, command
        self._log.info(
            "an operator asked this worker to " + command,
            claims="none from now on",
            then="stops as on SIGTERM" if command == "stop" else "stays until stopped",
        )
        try:
            await self._act(command)
        except Exception:  # acting again is harmless: the next beat retries
            self.asked = asked
            self._log.exception("could not act on the operator's request", command=command)
            return
        await self.beat()  # the row says "draining" at once

    async def forget(self) -> None:
        """Delete the row: a clean stop, jobs drained (or, at open, a
        predecessor's with this identity: that process is gone)."""
        try:
            await self.store.forget_worker(self.identity)
        except Exception as exc:  # it shows lost, then goes after the retention
            self._log.warning("could not remove the worker's registry row", error=str(exc))


def _escalates(asked: str | None, command: str) -> bool:
    """Whether `command` asks more than `asked` (an unknown one: no)."""
    if command not in WORKER_COMMANDS:
        return False
    return asked is None or WORKER_COMMANDS.index(command) > WORKER_COMMANDS.index(asked)
