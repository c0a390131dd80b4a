"""The public store contracts (`jobsched.store`) and the stores that keep them."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path
from typing import Any

import pytest

import jobsched
import jobsched.store as store_module
from jobsched import PluginManager
from jobsched.store import (
    BASE_MEMBERS,
    READER_MEMBERS,
    ROLE_MEMBERS,
    ROLES,
    SHARED_STORE_MEMBERS,
    STORE_MEMBERS,
    InspectRole,
    MissingRoleError,
    SharedStore,
    Store,
    StoreBase,
    StoreContext,
    StoreError,
    StoreReader,
    SubmitRole,
    lacking_roles,
    require_roles,
    resolve_store,
)
from jobsched_plugins.memory_queue import SharedMemoryStore
from jobsched_plugins.memory_store import MemoryStore, memory_store
from jobsched_plugins.postgres_store import PostgresStore
from jobsched_plugins.sqlite_store import SQLiteStore


def members(protocol: type) -> set[str]:
    """What a protocol class declares: its attributes and methods, inherited too."""
    names: set[str] = set()
    for cls in protocol.__mro__:
        if cls in (object,) or cls.__name__ in ("Protocol", "Generic"):
            continue
        names |= set(getattr(cls, "__annotations__", {}))
        names |= {n for n, v in vars(cls).items() if callable(v) and not n.startswith("_")}
    return names


def test_the_member_lists_are_the_protocols() -> None:
    assert members(StoreBase) == set(BASE_MEMBERS)
    assert members(Store) == set(STORE_MEMBERS)
    assert members(SharedStore) == set(SHARED_STORE_MEMBERS)
    assert members(StoreReader) == set(READER_MEMBERS)
    assert set(READER_MEMBERS) <= set(SHARED_STORE_MEMBERS)  # every shared store is one
    for role, protocol in ROLES.items():
        assert members(protocol) == {*BASE_MEMBERS, *ROLE_MEMBERS[role]}, role


def test_the_shared_store_is_the_intersection_of_the_roles() -> None:
    assert set(ROLES.values()) <= set(SharedStore.__mro__)
    every_role = set(BASE_MEMBERS).union(*ROLE_MEMBERS.values())
    assert every_role == set(SHARED_STORE_MEMBERS)
    assert StoreReader in InspectRole.__mro__  # jobsched status reads any inspectable store


@pytest.mark.parametrize("protocol", [StoreBase, Store, SharedStore, StoreReader, *ROLES.values()])
def test_every_method_of_the_contracts_is_documented(protocol: type) -> None:
    for name, value in vars(protocol).items():
        if callable(value) and not name.startswith("_"):
            assert len(inspect.getdoc(value) or "") > 30, f"{protocol.__name__}.{name}"


def test_postgres_keeps_the_shared_store_contract() -> None:
    # mypy checks the same in jobsched_plugins/postgres_store/store.py.
    contract: type[SharedStore] = PostgresStore
    store = contract("postgresql://user:secret@db.invalid/jobs")  # connects only on open
    assert isinstance(store, SharedStore)
    assert not isinstance(store, Store)  # no journal to write
    assert store.url == "postgresql://user:***@db.invalid/jobs"
    built = resolve_store("postgresql://user@db.invalid/jobs", PluginManager())
    assert isinstance(built, PostgresStore)


@pytest.mark.parametrize("role", list(ROLES))
def test_the_built_in_shared_stores_keep_every_role(role: str, tmp_path: Path) -> None:
    for store in (
        PostgresStore("postgresql://user@db.invalid/jobs"),
        SQLiteStore(f"sqlite:///{tmp_path}/jobs.db"),
        SharedMemoryStore("memory://queue"),
    ):
        assert isinstance(store, ROLES[role]), (store, role)
        assert lacking_roles(store, [role]) == {}


async def test_a_store_lacking_a_role_is_named_with_the_role_and_its_user() -> None:
    class SubmitOnly:
        url = "redis://queue"
        durable = True
        shared = True

        async def open(self, context: object) -> None: ...

        async def close(self) -> None: ...

        async def insert(self, jobs: object) -> list[str]:
            return []

    store = SubmitOnly()
    assert isinstance(store, SubmitRole) and not isinstance(store, SharedStore)
    assert require_roles(store, ["submit"], "a test") is not None
    with pytest.raises(MissingRoleError) as caught:
        require_roles(store, ["submit", "operate"], "jobsched jobs retry")
    assert str(caught.value) == (
        "store 'redis://queue' cannot serve jobsched jobs retry: it lacks the operate role "
        "(retry, requeue, purge, request_cancel, request_cancel_many, delete_finished, "
        "set_queue_paused, queue_paused) "
        "(docs/plugins.md#store-roles says which roles serve what)"
    )
    assert caught.value.lacking == {"operate": list(ROLE_MEMBERS["operate"])}
    # A member of a role it was not asked for names that role when used.
    view: Any = require_roles(store, ["submit"], "a Client")
    with pytest.raises(
        MissingRoleError, match="cannot serve a Client's retry: it lacks the operate"
    ):
        await view.retry(["job-1"])
    assert view.url == "redis://queue"


def test_the_memory_plugin_builds_a_shared_queue_only_for_a_name() -> None:
    assert isinstance(memory_store("memory://"), MemoryStore)
    named = memory_store("memory://queue?lease=5")
    assert isinstance(named, SharedMemoryStore) and isinstance(named, SharedStore)
    assert (named.name, named.lease_seconds) == ("queue", 5.0)
    built = resolve_store("memory://queue", PluginManager())
    assert isinstance(built, SharedMemoryStore)
    with pytest.raises(ValueError, match="lease must be a number of seconds > 0"):
        memory_store("memory://queue?lease=0")


async def test_a_memory_queue_must_exist_to_be_read() -> None:
    with pytest.raises(StoreError, match="memory://nowhere: no queue of this name"):
        await SharedMemoryStore("memory://nowhere").open(StoreContext(worker_id="w", readonly=True))


def test_sqlite_and_memory_keep_the_one_owner_contract(tmp_path: Path) -> None:
    assert isinstance(SQLiteStore(f"sqlite:///{tmp_path}/jobs.db"), Store)
    assert isinstance(MemoryStore(), Store)


def test_a_store_lacking_the_basics_is_refused_by_name() -> None:
    class Half:
        url = "half://"
        durable = True

    with pytest.raises(TypeError, match="is not a store: it lacks shared, open, close"):
        resolve_store(Half(), PluginManager())  # type: ignore[arg-type]

    class OneOwnerWithoutWrite(Half):
        shared = False

        async def open(self, context: object) -> None: ...

        async def close(self) -> None: ...

    with pytest.raises(TypeError, match="is not a one-owner store: it lacks write"):
        resolve_store(OneOwnerWithoutWrite(), PluginManager())  # type: ignore[arg-type]


def test_the_public_module_exports_its_names_and_the_old_one_is_gone() -> None:
    for name in store_module.__all__:
        assert hasattr(store_module, name), name
    # Yesterday's top-level names still work, and are the same objects.
    for name in ("JobRow", "NewJob", "Outcome", "SharedStore", "Store", "StoreError"):
        assert getattr(jobsched, name) is getattr(store_module, name)
    assert StoreError is jobsched.StoreError
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("jobsched._store")
