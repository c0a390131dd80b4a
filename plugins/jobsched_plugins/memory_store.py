"""The ``memory`` store: nothing is kept, and the kernel does no store work.

``JobScheduler(store="memory://")`` is the same as no store at all: the store
says it is not durable, so the scheduler never builds a journal and its hot
path is untouched. It exists so a store URL can always be given (a CLI flag,
a config file) and so ``plugins list`` shows the default.

``memory://NAME`` is another store: a queue in this process's memory that
every store of that name shares, with every role of a shared store
(`jobsched_plugins.memory_queue`).
"""

from __future__ import annotations

from collections.abc import Sequence

from jobsched import hookimpl
from jobsched.hookspecs import Register
from jobsched.store import JobRow, PurgeRow, ScheduleRow, Snapshot, StoreContext

from .memory_queue import SharedMemoryStore


class MemoryStore:
    """Keeps nothing: jobs live only in the scheduler's own structures."""

    durable = False
    shared = False

    def __init__(self, url: str = "memory://") -> None:
        scheme, _, rest = url.partition(":")
        if scheme != "memory" or rest.strip("/"):
            raise ValueError(f"memory store URL must be 'memory://', got {url!r}")
        self.url = url

    async def open(self, context: StoreContext) -> Snapshot:
        return Snapshot()

    async def write(self, batch: Sequence[JobRow | ScheduleRow | PurgeRow]) -> None:
        pass

    async def close(self) -> None:
        pass

    def __repr__(self) -> str:
        return "MemoryStore()"


def memory_store(url: str = "memory://") -> MemoryStore | SharedMemoryStore:
    """``memory://``: keep nothing; ``memory://NAME``: the shared queue of that name."""
    if url.partition("://")[2].partition("?")[0].strip("/"):
        return SharedMemoryStore(url)
    return MemoryStore(url)


@hookimpl
def jobsched_register_stores(register: Register) -> None:
    register("memory", memory_store)
