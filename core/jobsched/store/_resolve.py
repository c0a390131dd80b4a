"""Finding a store by URL and checking which contract it keeps."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterable, Sequence
from typing import Any, Protocol, TypeVar

from .._errors import MissingRoleError, PluginError, StoreError
from ._checks import check_snapshot
from ._contracts import (
    BASE_MEMBERS,
    READER_MEMBERS,
    ROLE_MEMBERS,
    SHARED_ROLES,
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


def store_name(store: object) -> str:
    """How messages name a store: its URL (the scheme is its plugin's name)."""
    url = getattr(store, "url", None)
    return repr(url) if isinstance(url, str) else repr(store)


def lacking_roles(store: object, roles: Iterable[str]) -> dict[str, list[str]]:
    """The roles of `roles` that `store` lacks, each with the members it lacks."""
    lacking: dict[str, list[str]] = {}
    for role in roles:
        missing = _lacking(store, ROLE_MEMBERS[role])
        if missing:
            lacking[role] = missing
    return lacking


def offers(store: object, role: str) -> bool:
    """Whether `store` has every member of `role` (``"submit"``, ``"operate"``...)."""
    return not _lacking(store, ROLE_MEMBERS[role])


def offers_a_role(store: object) -> bool:
    """Whether `store` offers any role of a shared store: False for a store
    only one process can own (the memory store), which no role can serve."""
    return any(offers(store, role) for role in SHARED_ROLES)


_S = TypeVar("_S")


def require_roles(store: _S, roles: Iterable[str], user: str) -> _S:
    """`store`, checked to offer each of `roles` for `user` (``"jobsched web"``).

    A store lacking one is a `MissingRoleError`: one line naming the store,
    `user` and each missing role. A store that has these roles but lacks
    others comes back as a view of it whose members of the other roles raise
    the same error when used (naming the role), not an `AttributeError` far
    from its cause; a store with every role comes back as it is.
    """
    roles = tuple(roles)
    lacking = lacking_roles(store, roles)
    if lacking:
        raise MissingRoleError(store_name(store), user, lacking)
    others = lacking_roles(store, (role for role in SHARED_ROLES if role not in roles))
    if not others:
        return store
    return _PartialStore(store, user, others)  # type: ignore[return-value]


class _PartialStore:
    """A store with only some roles: using a member of another says which role it lacks."""

    def __init__(self, store: object, user: str, lacking: dict[str, list[str]]) -> None:
        self._store = store
        self._user = user
        self._roles = {member: role for role, members in lacking.items() for member in members}
        self._lacking = lacking

    def __getattr__(self, name: str) -> Any:
        role = self._roles.get(name)
        if role is not None:
            raise MissingRoleError(
                store_name(self._store), f"{self._user}'s {name}", {role: self._lacking[role]}
            )
        return getattr(self._store, name)

    def __repr__(self) -> str:
        return repr(self._store)


def resolve_store(store: StoreBase | str | None, plugins: StoreFactories) -> StoreBase | None:
    """The store a scheduler was given: an instance, a URL, or None (memory, no store).

    A URL is built by the factory registered for its scheme. A one-owner
    store (not ``shared``) is checked against `Store`; a `TypeError` names
    what it lacks. A shared store may serve only some roles: whoever uses it
    checks those it needs (`require_roles`; a scheduler, `as_shared_store`).
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
        return store  # type: ignore[return-value]  # a str was built into a store above
    return as_store(store)


def offers_shared(store: object) -> bool:
    """Whether `store` implements `SharedStore` (several processes can share it):
    every role."""
    return not lacking_roles(store, SHARED_ROLES)


def as_store(store: object) -> Store:
    """`store` as a one-owner `Store`; `TypeError` naming what it lacks."""
    missing = _lacking(store, STORE_MEMBERS)
    if missing:
        raise TypeError(f"{store!r} is not a one-owner store: it lacks {', '.join(missing)}")
    return store  # type: ignore[return-value]


def as_shared_store(store: object) -> SharedStore:
    """`store` as a `SharedStore` (every role); `TypeError` naming the members it lacks."""
    lacking = lacking_roles(store, SHARED_ROLES)
    if lacking:
        raise TypeError(
            f"{store!r} is not a shared store: it lacks {MissingRoleError.describe(lacking)}"
        )
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
