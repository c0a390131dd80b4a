"""Issue 20 item 10 and issue 21 items 13-14: the same bad value gets the same
answer on every store and through every client — a key past the limit, text
no store can hold, arguments nested too deep, a job id that is not a string,
one string given where a collection of ids is taken."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
import pytest

from jobsched import (
    MAX_KEY_LENGTH,
    MAX_NESTING,
    AsyncJob,
    BlockingClient,
    Client,
    Job,
    JobInfo,
    JobScheduler,
    LocalClient,
    PluginManager,
    StoreError,
    hookimpl,
)
from jobsched.hookspecs import Register


@attrs.define(slots=True, eq=False, repr=False)
class Hold(AsyncJob):
    """Holds any JSON value as its argument; does nothing with it."""

    value: Any = None

    async def run(self) -> None:
        return None


class hold_plugin:
    @staticmethod
    @hookimpl
    def jobsched_register_job_types(register: Register) -> None:
        register("hold", Hold)


# ── every store, every way to submit ───────────────────────────────────
STORES = ("memory", "sqlite", "shared-sqlite", "postgresql")
#: (store, way to submit and look up) pairs that exist.
APIS = [
    ("memory", "scheduler"),
    ("memory", "local"),
    ("sqlite", "scheduler"),
    ("sqlite", "local"),
    ("shared-sqlite", "scheduler"),
    ("shared-sqlite", "client"),
    ("shared-sqlite", "blocking"),
    ("postgresql", "scheduler"),
    ("postgresql", "client"),
    ("postgresql", "blocking"),
]


@attrs.define
class Api:
    """One way to submit: the same coroutines whatever is behind them."""

    store: str
    kind: str
    target: Any
    url: str | None
    #: The scheduler behind a `scheduler` or `local` api (None for clients).
    scheduler: JobScheduler | None = None

    async def submit(self, job: Job, **options: Any) -> str:
        if self.kind == "scheduler":
            return str(self.target.submit(job, **options))
        if self.kind == "blocking":
            return str(self.target.submit(job, **options))
        return str(await self.target.submit(job, **options))

    async def get(self, job_id: Any) -> Any:
        if self.kind in ("scheduler", "blocking"):
            return self.target.get(job_id)
        return await self.target.get(job_id)

    async def stored(self, job_id: str) -> JobInfo:
        """The job as the store (or the in-memory scheduler) gives it back."""
        if self.kind != "scheduler":
            info: JobInfo = await self.get(job_id)
            return info
        if self.store in ("memory", "sqlite"):
            async with LocalClient(self.target) as local:
                return await local.get(job_id)
        await self.target.flush()  # a shared scheduler writes its submits in batches
        async with Client(self.url, plugins=PluginManager([hold_plugin])) as client:
            return await client.get(job_id)

    async def wait_many(self, job_ids: Any) -> Any:
        if self.kind == "blocking":
            return self.target.wait_many(job_ids, timeout=60)
        return await self.target.wait_many(job_ids, timeout=60)


def _url(store: str, request: pytest.FixtureRequest, tmp_path: Path) -> str | None:
    if store == "memory":
        return None
    if store == "postgresql":
        url: str = request.getfixturevalue("pg_schema")[0]
        return url
    return f"sqlite:///{tmp_path / 'jobs.db'}"


@pytest.fixture(params=APIS, ids=["-".join(p) for p in APIS])
async def api(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Api]:
    store, kind = request.param
    url = _url(store, request, tmp_path)
    plugins = PluginManager([hold_plugin])
    if kind in ("scheduler", "local"):
        shared = store in ("shared-sqlite", "postgresql")
        options: dict[str, Any] = {"shared": True} if store == "shared-sqlite" else {}
        async with JobScheduler(plugins=plugins, store=url, **options) as scheduler:
            if kind == "scheduler":
                yield Api(store, kind, scheduler, url, scheduler)
            else:
                assert not shared
                async with LocalClient(scheduler) as local:
                    yield Api(store, kind, local, url, scheduler)
    elif kind == "client":
        async with Client(url, plugins=plugins) as client:
            yield Api(store, kind, client, url)
    else:
        with BlockingClient(url, plugins=plugins) as blocking:
            yield Api(store, kind, blocking, url)


def _deep(levels: int) -> Any:
    value: Any = "bottom"
    for _ in range(levels):
        value = [value]
    return value


BAD_ARGUMENTS = {
    "nul": ("a\x00b", "NUL"),
    "lone-surrogate": ("a\ud800b", "lone surrogate"),
    "nul-in-a-key": ({"k\x00": 1}, "NUL"),
    "nested-5000-deep": (_deep(5000), "MAX_NESTING"),
    "nested-one-too-deep": (_deep(101), "MAX_NESTING"),
}


@pytest.mark.parametrize("case", list(BAD_ARGUMENTS))
async def test_arguments_no_store_can_hold_are_refused_at_submit_on_every_store(
    api: Api, case: str
) -> None:
    value, named = BAD_ARGUMENTS[case]
    if api.store == "memory":
        # The in-memory scheduler stores nothing: it keeps the job object as
        # given, as it keeps any argument that is not JSON.
        job_id = await api.submit(Hold(value))
        assert api.scheduler is not None
        assert api.scheduler.get(job_id).value is value  # type: ignore[attr-defined]
        return
    with pytest.raises(ValueError, match=named) as refused:
        await api.submit(Hold(value))
    assert "value" in str(refused.value)  # the argument is named
    assert len(str(refused.value)) < 2000  # one readable line, not the value


@pytest.mark.parametrize("name", ["a\x00b", "a\udfffb"])
async def test_a_name_no_store_can_hold_is_refused_at_submit(api: Api, name: str) -> None:
    job = Hold(1)
    job.name = name
    if api.store == "memory":
        assert (await api.get(await api.submit(job))) is not None
        return
    with pytest.raises(ValueError, match="option\\['name'\\]"):
        await api.submit(job)


async def test_text_every_store_holds_is_kept_the_same_everywhere(api: Api) -> None:
    value = {
        "emoji": "\U0001f600 ok",
        "deep": _deep(MAX_NESTING - 1),
        "backslash": "\\u0000 is text",
    }
    job_id = await api.submit(Hold(value))
    assert (await api.stored(job_id)).args["value"] == value


@pytest.mark.parametrize("option", ["key", "unique_key"])
async def test_a_key_past_the_limit_is_a_value_error_naming_it_on_every_store(
    api: Api, option: str
) -> None:
    started = time.monotonic()
    with pytest.raises(ValueError, match=f"{option} must be at most {MAX_KEY_LENGTH} characters"):
        await api.submit(Hold(1), **{option: "k" * 3000})
    with pytest.raises(ValueError, match="NUL"):
        await api.submit(Hold(1), **{option: "k\x00"})
    # At the limit, in characters of four UTF-8 bytes each, every store's index holds it.
    longest = "\U0001f600" * MAX_KEY_LENGTH
    stored = await api.stored(await api.submit(Hold(1), **{option: longest}))
    assert getattr(stored, option) == longest
    # Refused at once: never retried as a lost connection.
    assert time.monotonic() - started < 30


async def test_a_job_id_that_is_not_a_string_is_a_type_error_naming_it(api: Api) -> None:
    with pytest.raises(TypeError, match="a job id is a string, got integer 123"):
        await api.get(123)


async def test_one_string_of_ids_is_refused_not_split_into_characters(api: Api) -> None:
    upstream = await api.submit(Hold(1))
    with pytest.raises(TypeError, match=f"depends_on takes a collection of job ids.*'{upstream}'"):
        await api.submit(Hold(2), depends_on=upstream)
    if api.kind != "scheduler":
        with pytest.raises(TypeError, match=f"wait_many takes a collection.*'{upstream}'"):
            await api.wait_many(upstream)


# ── PostgreSQL: only a lost connection is retried ─────────────────────
async def test_a_statement_error_on_postgresql_is_not_retried_as_a_lost_connection(
    pg_schema: tuple[str, str],
) -> None:
    from jobsched_plugins.postgres_store.connection import Database

    db = Database(pg_schema[0])

    async def too_big(conn: Any) -> None:
        # What an index entry past its size raises (SQLSTATE 54000).
        await conn.execute(
            "DO $$ BEGIN RAISE EXCEPTION 'index row size exceeds maximum' "
            "USING ERRCODE = '54000'; END $$"
        )

    async def fine(conn: Any) -> int:
        cursor = await conn.execute("SELECT 1 AS one")
        row = await cursor.fetchone()
        return int(row["one"])

    try:
        with pytest.raises(StoreError, match="index row size exceeds maximum"):
            await asyncio.wait_for(db.transaction(too_big), 60)
        assert db.reconnects == 0
        assert await db.transaction(fine) == 1  # the connection is still good
        assert db.reconnects == 0
    finally:
        await db.close()


def test_transient_errors_are_the_connection_kind() -> None:
    import psycopg.errors

    from jobsched_plugins.postgres_store.connection import is_transient

    transient = [
        psycopg.OperationalError("server closed the connection unexpectedly"),
        psycopg.errors.AdminShutdown(),
        psycopg.errors.ConnectionFailure(),
        psycopg.errors.SerializationFailure(),
        psycopg.errors.DeadlockDetected(),
        psycopg.errors.TooManyConnections(),
    ]
    lasting = [psycopg.errors.ProgramLimitExceeded(), psycopg.errors.QueryCanceled()]
    assert [is_transient(e) for e in transient] == [True] * len(transient)
    assert [is_transient(e) for e in lasting] == [False] * len(lasting)


# ── SQLite URLs ────────────────────────────────────────────────────────
@pytest.mark.parametrize("url", ["sqlite:relative.db", "sqlite:/relative.db"])
async def test_a_sqlite_url_without_three_slashes_is_refused_with_the_spelling(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    opens: list[Callable[[], Awaitable[Any]]] = [
        lambda: Client(url).open(),
        lambda: JobScheduler(store=url).start(),
    ]
    for open_ in opens:
        with pytest.raises((StoreError, ValueError), match="must start with sqlite:///"):
            await open_()
    assert list(tmp_path.iterdir()) == []  # no elative.db


async def test_sqlite_urls_with_three_and_four_slashes_are_relative_and_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    for url, path in [
        ("sqlite:///sub/relative.db", tmp_path / "sub" / "relative.db"),
        (f"sqlite:///{tmp_path}/abs.db".replace(":///", ":////", 1), tmp_path / "abs.db"),
    ]:
        async with Client(url):
            pass
        assert path.exists(), url
