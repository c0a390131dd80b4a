"""Finding a store by URL and checking which contract it keeps."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Sequence
from typing import Any, Protocol

from .._errors import PluginError, StoreError
from ._checks import check_snapshot
from ._contracts import (
    BASE_MEMBERS,
    READER_MEMBERS,
    SHARED_STORE_MEMBERS,
    STORE_MEMBERS,
    SharedStore,
    Store,
    StoreBase,
    StoreReader,
)
from ._rows import Snapshot, StoreContext


def new_worker_id() -> str:
    """A worker id unique across hosts and restarts (``host:pid:random``)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


# ── finding a store ────────────────────────────────────────────────────
class StoreFactories(Protocol):
    """Where store factories are found by URL scheme (a `jobsched.PluginManager`)."""

    def resolve(self, kind: str, name: str) -> Any: ...


def _lacking(store: object, members: Sequence[str]) -> list[str]:
    return [name for name in members if not hasattr(store, name)]


def resolve_store(
    store: StoreBase | str | None, plugins: StoreFactories
) -> Store | SharedStore | None:
    """The store a scheduler was given: an instance, a URL, or None (memory, no store).

    A URL is built by the factory registered for its scheme. The result is
    checked against the contract it prefers (`SharedStore` when ``shared``,
    else `Store`); a `TypeError` names what it lacks.
    """
    if store is None:
        return None
    if isinstance(store, str):
        scheme = store.partition(":")[0]
        if not scheme:
            raise PluginError(f"store URL {store!r} has no scheme (e.g. sqlite:///jobs.db)")
        try:
            factory = plugins.resolve("stores", scheme)
        except PluginError as exc:
            raise PluginError(f"store {store!r}: {exc}") from None
        try:
            store = factory(store)
        except (StoreError, ValueError) as exc:
            raise StoreError(str(exc)) from exc
    missing = _lacking(store, BASE_MEMBERS)
    if missing:
        raise TypeError(f"{store!r} is not a store: it lacks {', '.join(missing)}")
    if getattr(store, "shared", False):
        return as_shared_store(store)
    return as_store(store)


def offers_shared(store: object) -> bool:
    """Whether `store` implements `SharedStore` (several processes can share it)."""
    return not _lacking(store, SHARED_STORE_MEMBERS)


def as_store(store: object) -> Store:
    """`store` as a one-owner `Store`; `TypeError` naming what it lacks."""
    missing = _lacking(store, STORE_MEMBERS)
    if missing:
        raise TypeError(f"{store!r} is not a one-owner store: it lacks {', '.join(missing)}")
    return store  # type: ignore[return-value]


def as_shared_store(store: object) -> SharedStore:
    """`store` as a `SharedStore`; `TypeError` naming what it lacks."""
    missing = _lacking(store, SHARED_STORE_MEMBERS)
    if missing:
        raise TypeError(f"{store!r} is not a shared store: it lacks {', '.join(missing)}")
    return store  # type: ignore[return-value]


def as_store_reader(store: object) -> StoreReader:
    """`store` as a `StoreReader`; `TypeError` naming what it lacks."""
    missing = _lacking(store, READER_MEMBERS)
    if missing:
        raise TypeError(f"{store!r} cannot be read a page at a time: it lacks {', '.join(missing)}")
    return store  # type: ignore[return-value]


async def read_store(url: str, plugins: StoreFactories) -> Snapshot | None:
    """Everything a store holds, read without taking it over (``jobsched status``).

    None for a store that is not durable (it holds nothing).
    """
    store = resolve_store(url, plugins)
    assert store is not None
    if not store.durable:
        return None
    snapshot = await store.open(StoreContext(worker_id=new_worker_id(), readonly=True))
    await store.close()
    check_snapshot(store.url, snapshot)
    return snapshot
