"""`BatchWriter`: one write in flight, the rest queued for the next.

Every batched write of jobsched has this shape: a client's submits, a shared
worker's inserts, attempt outcomes and progress. Items added while nothing is
being written start a write a turn of the event loop later (so the items the
same burst of tasks adds go together); items added while a write runs form
the next batch, written as soon as it ends. The writer never runs two writes at
once, so a store sees its rows in the order they were added.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class BatchWriter(Generic[T]):
    """Batches of `T` handed to `write`, one at a time.

    `write` answers its own items (errors included): what it raises is
    retrieved here and its batch is given up. A writer made `held` writes
    nothing until `release`.
    """

    def __init__(
        self, write: Callable[[list[T]], Awaitable[None]], *, name: str, held: bool = False
    ) -> None:
        self._write = write
        self._name = name
        self._held = held
        self._pending: list[T] = []
        self._task: asyncio.Task[None] | None = None
        # Items added and items written (or given up) so far, and who waits
        # for a count of them (`drain`).
        self._added = 0
        self._done = 0
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []

    def __len__(self) -> int:
        """Items waiting for a write (not those being written)."""
        return len(self._pending)

    @property
    def busy(self) -> bool:
        """Whether a write runs or items wait for one (a held writer's wait
        for `release`, not for a write)."""
        return self._task is not None or (bool(self._pending) and not self._held)

    def add(self, item: T) -> None:
        """Queue `item` for the next write (which starts soon if none runs)."""
        self._pending.append(item)
        self._added += 1
        if self._task is None and not self._held:
            self._start()

    def release(self) -> None:
        """Start writing (a writer made `held`), what was added meanwhile first."""
        self._held = False
        if self._task is None and self._pending:
            self._start()

    async def drain(self) -> None:
        """Return once everything added so far is written (or given up): not
        what is added meanwhile, so a steady stream cannot hold it up. A held
        writer returns at once.

        Waiting is shielded: a caller cancelled meanwhile leaves the write running.
        """
        if self._done >= self._added or self._held:
            return
        future = asyncio.get_running_loop().create_future()
        self._waiters.append((self._added, future))
        await asyncio.shield(future)

    def _start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=self._name)

    async def _run(self) -> None:
        try:
            while self._pending and not self._held:
                # Let the tasks woken by the same burst add theirs first: a
                # burst of outcomes (or submits) becomes one write, not several.
                await asyncio.sleep(0)
                batch, self._pending = self._pending, []
                try:
                    await self._write(batch)
                except Exception as exc:  # `write` answers its items: this is a bug there
                    asyncio.get_running_loop().call_exception_handler(
                        {"message": f"{self._name}: a batch write raised", "exception": exc}
                    )
                self._done += len(batch)
                self._settle()
        finally:
            self._task = None

    def _settle(self) -> None:
        waiting = []
        for target, future in self._waiters:
            if target > self._done:
                waiting.append((target, future))
            elif not future.done():
                future.set_result(None)
        self._waiters = waiting
