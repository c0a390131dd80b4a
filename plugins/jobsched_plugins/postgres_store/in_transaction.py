"""Submitting in the application's own transaction (``Client.submit(conn=...)``).

The caller's connection runs `submit`'s own statements: the read of the
stored jobs the batch names (its dependencies, keys and unique keys, ``FOR
SHARE``), then the one INSERT of jobs and dependencies whose ``pg_notify``
PostgreSQL delivers only when that transaction commits. A rollback leaves
no job and wakes nobody; nothing here commits or rolls back the caller's
transaction.

A batch with keys or unique keys runs in a savepoint: a job another
transaction inserts with the same key after the read makes the INSERT fail
with a unique violation, which is rolled back to the savepoint (the caller's
transaction lives on) and planned again from a new read, as the store's own
insert does. A batch without keys, unique keys or stored dependencies is
one statement (the first on a connection also checks which database and
schema it reaches, once).

The connection is the application's: a psycopg 3 ``Connection`` or
``AsyncConnection``, or an SQLAlchemy ``Connection``, ``Session``,
``AsyncConnection`` or ``AsyncSession`` on the psycopg driver (unwrapped to
its psycopg connection, after SQLAlchemy began its transaction, as its own
first statement would). The statements are planned once, as data
(`submit.InTransaction`), and sent by a sync or an async driver.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from jobsched import UnknownJobError
from jobsched.store import NewJob, StoreError

from .connection import Database
from .submit import InTransaction

if TYPE_CHECKING:
    import psycopg

_SAVEPOINT = "SAVEPOINT jobsched_submit"
_ROLLBACK = "ROLLBACK TO SAVEPOINT jobsched_submit"
_RELEASE = "RELEASE SAVEPOINT jobsched_submit"

# Which store schema, in which database, a connection was checked to reach
# (a connection's database never changes; checked once per connection).
_CHECKED: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()

_WHERE = """
SELECT current_database() AS database, to_regclass(%s) IS NOT NULL AS has_jobs
"""

_KINDS = (
    "a psycopg 3 Connection or AsyncConnection, or an SQLAlchemy Connection, Session, "
    "AsyncConnection or AsyncSession on the psycopg driver"
)


# ── what the caller gave ───────────────────────────────────────────────
def _psycopg() -> Any:
    import psycopg

    return psycopg


def _sqlalchemy_kind(conn: Any) -> str | None:
    """``"sync"``, ``"session"``, ``"async"`` or ``"async_session"`` for an
    SQLAlchemy connection or session; None for anything else."""
    if not type(conn).__module__.startswith("sqlalchemy"):
        return None
    from sqlalchemy.engine import Connection
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession
    from sqlalchemy.orm import Session

    for kind, cls in (
        ("sync", Connection),
        ("session", Session),
        ("async", AsyncConnection),
        ("async_session", AsyncSession),
    ):
        if isinstance(conn, cls):
            return kind
    return None


def _wrong_kind(db: Database, conn: Any, why: str = "") -> StoreError:
    what = f"{type(conn).__module__}.{type(conn).__qualname__}"
    return StoreError(f"{db.url}: conn= is a {what}{why}; this store takes {_KINDS}")


def _sqlalchemy_driver(db: Database, sa_conn: Any) -> None:
    driver = sa_conn.dialect.driver
    if sa_conn.dialect.name != "postgresql" or driver not in ("psycopg", "psycopg_async"):
        raise _wrong_kind(
            db, sa_conn, f" on {sa_conn.dialect.name}+{driver} (use postgresql+psycopg://)"
        )


def sync_connection(db: Database, conn: Any) -> psycopg.Connection[Any]:
    """The psycopg connection to run on, for a sync caller."""
    pg = _psycopg()
    if isinstance(conn, pg.Connection):
        return cast("psycopg.Connection[Any]", conn)
    if isinstance(conn, pg.AsyncConnection):
        raise _wrong_kind(db, conn, " (async): give it to an async Client, or pass a sync one")
    kind = _sqlalchemy_kind(conn)
    if kind == "session":
        conn = conn.connection()  # begins the session's transaction
        kind = "sync"
    if kind == "sync":
        _sqlalchemy_driver(db, conn)
        if not conn.in_transaction():
            conn.begin()  # what SQLAlchemy's own next statement would do
        return cast("psycopg.Connection[Any]", conn.connection.driver_connection)
    if kind is not None:
        raise _wrong_kind(db, conn, " (async): give it to an async Client, or pass a sync one")
    raise _wrong_kind(db, conn)


async def async_connection(
    db: Database, conn: Any
) -> psycopg.AsyncConnection[Any] | psycopg.Connection[Any]:
    """The psycopg connection to run on, for an async caller (a sync one is
    used as it is, in the calling thread)."""
    pg = _psycopg()
    if isinstance(conn, pg.AsyncConnection):
        return cast("psycopg.AsyncConnection[Any]", conn)
    kind = _sqlalchemy_kind(conn)
    if kind == "async_session":
        conn = await conn.connection()  # begins the session's transaction
        kind = "async"
    if kind == "async":
        _sqlalchemy_driver(db, conn)
        if not conn.in_transaction():
            await conn.begin()
        pooled = await conn.get_raw_connection()
        return cast("psycopg.AsyncConnection[Any]", pooled.driver_connection)
    return sync_connection(db, conn)


def _check_transaction(db: Database, raw: Any) -> None:
    """Refuse a connection whose statements would not join a transaction of
    the caller's, or could not."""
    from psycopg import pq

    state = raw.info.transaction_status
    if state == pq.TransactionStatus.INERROR:
        raise StoreError(
            f"{db.url}: conn= is in a failed transaction (an earlier statement failed): "
            "roll it back first"
        )
    if state == pq.TransactionStatus.IDLE and raw.autocommit:
        raise StoreError(
            f"{db.url}: conn= is in autocommit mode outside a transaction, so the jobs would "
            "be committed at once, not with the application's work: open a transaction "
            "(`with conn.transaction():`) or submit without conn="
        )


def _place_query(db: Database) -> tuple[str, list[Any]]:
    return _WHERE, [f'"{db.schema}".jobs']


def _check_place(db: Database, raw: Any, row: dict[str, Any] | None) -> None:
    assert row is not None
    wanted = db.database
    if wanted is not None and row["database"] != wanted:
        raise StoreError(
            f"{db.url}: conn= is connected to database {row['database']!r}, "
            f"not this store's {wanted!r}"
        )
    if not row["has_jobs"]:
        raise StoreError(
            f"{db.url}: conn='s database {row['database']!r} has no jobsched schema "
            f"{db.schema!r}: is it a connection to this store's database?"
        )
    with contextlib.suppress(TypeError):  # not weakly referenceable: checked each time
        _CHECKED.setdefault(raw, set()).add(db.schema)


def _checked(db: Database, raw: Any) -> bool:
    try:
        return db.schema in _CHECKED.get(raw, ())
    except TypeError:
        return False


# ── the two drivers ────────────────────────────────────────────────────
def insert_sync(db: Database, conn: Any, jobs: Sequence[NewJob]) -> list[str]:
    """Insert `jobs` in the transaction of `conn`, a sync connection."""
    raw = sync_connection(db, conn)
    if not jobs:
        return []
    _check_transaction(db, raw)
    from psycopg.rows import dict_row

    attempt = InTransaction(db, jobs)
    try:
        with raw.cursor(row_factory=dict_row) as cur:
            if not _checked(db, raw):
                cur.execute(*_place_query(db))
                _check_place(db, raw, cur.fetchone())
            for n in range(attempt.attempts):
                if attempt.racy:
                    cur.execute(_SAVEPOINT)
                try:
                    found: list[dict[str, Any]] = []
                    if attempt.reads:
                        cur.execute(*attempt.lookup())
                        found = cur.fetchall()
                    statement = attempt.write(found, UnknownJobError)
                    if statement is not None:
                        cur.execute(*statement)
                except Exception as exc:
                    if not attempt.racy:
                        raise
                    # The caller's transaction lives on without this batch.
                    cur.execute(_ROLLBACK)
                    cur.execute(_RELEASE)
                    if not _again(exc, n):
                        raise
                    continue
                if attempt.racy:
                    cur.execute(_RELEASE)
                return attempt.ids
    except _psycopg().Error as exc:
        raise _failed(db, exc) from exc
    raise AssertionError("unreachable")


async def insert_async(db: Database, conn: Any, jobs: Sequence[NewJob]) -> list[str]:
    """Insert `jobs` in the transaction of `conn` (async; a sync connection
    runs in the calling thread)."""
    pg = _psycopg()
    raw = await async_connection(db, conn)
    if not isinstance(raw, pg.AsyncConnection):
        return insert_sync(db, raw, jobs)
    if not jobs:
        return []
    _check_transaction(db, raw)
    from psycopg.rows import dict_row

    attempt = InTransaction(db, jobs)
    try:
        async with raw.cursor(row_factory=dict_row) as cur:
            if not _checked(db, raw):
                await cur.execute(*_place_query(db))
                _check_place(db, raw, await cur.fetchone())
            for n in range(attempt.attempts):
                if attempt.racy:
                    await cur.execute(_SAVEPOINT)
                try:
                    found: list[dict[str, Any]] = []
                    if attempt.reads:
                        await cur.execute(*attempt.lookup())
                        found = await cur.fetchall()
                    statement = attempt.write(found, UnknownJobError)
                    if statement is not None:
                        await cur.execute(*statement)
                except Exception as exc:
                    if not attempt.racy:
                        raise
                    await cur.execute(_ROLLBACK)
                    await cur.execute(_RELEASE)
                    if not _again(exc, n):
                        raise
                    continue
                if attempt.racy:
                    await cur.execute(_RELEASE)
                return attempt.ids
    except pg.Error as exc:
        raise _failed(db, exc) from exc
    raise AssertionError("unreachable")


def _again(exc: Exception, attempt: int) -> bool:
    """Whether to plan the batch again: another transaction inserted a job
    with one of its keys after the read (the next read sees it)."""
    unique = isinstance(exc, _psycopg().errors.UniqueViolation)
    return unique and attempt < InTransaction.attempts - 1


def _failed(db: Database, exc: Exception) -> StoreError:
    return StoreError(f"{db.url}: could not insert in the caller's transaction: {exc}".strip())
