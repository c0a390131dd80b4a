"""The link to the server: store URLs, transactions that survive a lost
connection, and the LISTEN/NOTIFY wake-ups between processes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import structlog

from jobsched.store import BadRowError, StoreError

from .._wakeups import WakeupEvents

try:
    import psycopg
    import psycopg.conninfo
    from psycopg import sql
    from psycopg.rows import dict_row
except ImportError:  # pragma: no cover - exercised only without the extra
    psycopg = None  # type: ignore[assignment]

logger = structlog.get_logger("jobsched.postgres")

T = TypeVar("T")

#: The server's clock, in SQL: every process stamps leases and times with one clock.
NOW = "extract(epoch FROM clock_timestamp())::float8"

TERMINAL = ("completed", "failed", "timed_out", "cancelled")

_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,40}$")

# NOTIFY payloads on the store's channel.
WORK = "w"  # new work may be due
FINISHED = "f"  # some job may have finished
_CANCEL = "c:"  # + job id: its owner should cancel it
REQUEST = "r:"  # + worker id: an operator asked something of it (drain, stop)
CHANGED = "p"  # a job changed without new work or an end (progress, a claim)

# SQLSTATE classes worth a retry on a fresh connection: connection exceptions,
# a server short of resources (connections, disk, memory), system (I/O) errors.
_TRANSIENT_CLASSES = ("08", "53", "58")
# A transaction rolled back by a serialization failure or a deadlock, and an
# operator intervention that ends the session: admin, crash and startup
# shutdowns, an idle-session timeout. A cancelled statement (57014) is not.
_TRANSIENT_STATES = ("40001", "40P01", "57P01", "57P02", "57P03", "57P05")


def is_transient(exc: BaseException) -> bool:
    """Whether `exc` is a lost or refused connection (or a rolled-back
    transaction) that the same call may get past on a new attempt; False for
    an error of the statement itself, such as a value an index cannot hold."""
    state = getattr(exc, "sqlstate", None)
    if state is None:
        # Raised by the client, not the server: the link itself failed.
        return True
    return state[:2] in _TRANSIENT_CLASSES or state in _TRANSIENT_STATES


def to_json(value: Any) -> str:
    """Arguments, options or a trigger as JSON text (the scheduler's codec made
    them JSON values; results arrive as JSON text already)."""
    try:
        return json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"not JSON, so it cannot be stored: {exc}") from None


def redact(url: str) -> str:
    """The URL without its password, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return urlunsplit(parts._replace(netloc=netloc))


def parse_url(url: str) -> tuple[str, str, dict[str, str]]:
    """Split a store URL into (libpq DSN, schema, jobsched options).

    jobsched's own query parameters (``schema``, ``lease``) are removed; the
    rest (``sslmode``, ...) are passed on to libpq.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres"):
        raise StoreError(f"{redact(url)}: not a postgresql:// URL")
    query = dict(parse_qsl(parts.query))
    schema = query.pop("schema", "jobsched")
    ours = {k: query.pop(k) for k in ("lease",) if k in query}
    if not _SCHEMA_NAME.match(schema):
        raise StoreError(
            f"{redact(url)}: schema {schema!r} must be a lower-case identifier "
            "(letters, digits, underscore; at most 41 characters)"
        )
    dsn = urlunsplit(parts._replace(scheme="postgresql", query=urlencode(query)))
    return dsn, schema, ours


class Database:
    """One store's way to its server: the connection every call's transaction
    runs on (re-opened when it drops), SQL naming the store's schema, NOTIFY.

    `url` is the store URL; `options` holds jobsched's own URL parameters.
    """

    def __init__(self, url: str) -> None:
        if psycopg is None:
            raise StoreError("the postgres store needs psycopg 3: pip install 'jobsched[postgres]'")
        #: The URL with its password masked, for messages.
        self.url = redact(url)
        self.dsn, self.schema, self.options = parse_url(url)
        try:
            # libpq's own check of its parameters
            params = psycopg.conninfo.conninfo_to_dict(self.dsn)
        except psycopg.ProgrammingError as exc:
            raise StoreError(f"{self.url}: {exc}".strip()) from None
        #: The database the URL names (None: libpq's default), which an
        #: application's connection must be on to insert in its transaction.
        self.database: str | None = None if params.get("dbname") is None else str(params["dbname"])
        #: The LISTEN/NOTIFY channel of this schema's processes.
        self.channel = f"jobsched_{self.schema}"
        self._closed = False
        #: How often a lost connection (this one or the listener's) was re-opened.
        self.reconnects = 0
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._conn_lock = asyncio.Lock()
        # Outcomes are written on a connection of their own, so a worker's
        # finish and its next claim overlap instead of queueing for one link.
        self._side: dict[str, tuple[asyncio.Lock, list[psycopg.AsyncConnection[Any] | None]]] = {}

    @property
    def closed(self) -> bool:
        """True once `close` was called: every later transaction is refused."""
        return self._closed

    def q(self, text: str) -> sql.Composed:
        """`text` as SQL, with ``{s}`` naming the store's schema."""
        return sql.SQL(text).format(s=sql.Identifier(self.schema))

    async def connect(self, **kwargs: Any) -> psycopg.AsyncConnection[Any]:
        """A new connection of its own (rows as dicts); a clear error if it fails."""
        try:
            return await psycopg.AsyncConnection.connect(self.dsn, row_factory=dict_row, **kwargs)
        except psycopg.OperationalError as exc:
            raise StoreError(f"cannot connect to {self.url}: {exc}".strip()) from exc

    async def transaction(
        self, body: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]], *, lane: str = ""
    ) -> T:
        """Run `body` in one transaction, reconnecting and retrying if the link drops.

        Every write is idempotent or guarded by the lease owner, so a retry
        after a commit whose answer was lost does no harm. A `lane` names a
        connection of its own (opened on first use), so calls on different
        lanes run at the same time; the default is the store's connection.
        """
        return await self._run(body, atomic=True, lane=lane)

    async def statement(
        self, body: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]], *, lane: str = ""
    ) -> T:
        """Run `body` without BEGIN and COMMIT.

        The connection is in autocommit mode, so each statement `body` sends
        is a transaction of its own: one round trip instead of three (a
        body sends one statement, or statements that stand alone). Reconnects
        and retries as `transaction` does.
        """
        return await self._run(body, atomic=False, lane=lane)

    async def _run(
        self,
        body: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]],
        *,
        atomic: bool,
        lane: str,
    ) -> T:
        if lane:
            lock, slot = self._side.setdefault(lane, (asyncio.Lock(), [None]))
        else:
            lock, slot = self._conn_lock, []
        delay = 0.05
        for attempt in range(30):
            if self._closed:
                raise StoreError(f"PostgresStore({self.url!r}) is closed")
            async with lock:
                conn = slot[0] if lane else self._conn
                try:
                    if conn is None or conn.closed:
                        # Autocommit: `transaction` sends BEGIN/COMMIT itself,
                        # and `statement` needs neither.
                        conn = await psycopg.AsyncConnection.connect(
                            self.dsn, row_factory=dict_row, autocommit=True
                        )
                        if lane:
                            slot[0] = conn
                        else:
                            self._conn = conn
                    if not atomic:
                        return await body(conn)
                    async with conn.transaction():
                        return await body(conn)
                except BadRowError as exc:
                    raise exc.in_store(self.url) from None
                except psycopg.OperationalError as exc:
                    if not is_transient(exc):
                        # The statement failed, not the link: a retry would fail again.
                        raise StoreError(f"{self.url}: {exc}".strip()) from exc
                    # InterfaceError-like states leave the connection unusable: drop it.
                    if conn is not None:
                        with contextlib.suppress(Exception):
                            await conn.close()
                    if lane:
                        slot[0] = None
                    else:
                        self._conn = None
                    if attempt == 29:
                        raise StoreError(f"{self.url}: giving up: {exc}") from exc
                    self.reconnects += 1
                    logger.warning("postgres connection lost, reconnecting", error=str(exc))
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)
        raise AssertionError("unreachable")

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A transaction on the shared connection, without retries (for tools and tests)."""
        async with self._conn_lock:
            if self._conn is None or self._conn.closed:
                self._conn = await self.connect(autocommit=True)
            async with self._conn.transaction():
                yield self._conn

    async def close(self) -> None:
        """Refuse further transactions and close the connection."""
        self._closed = True
        async with self._conn_lock:
            if self._conn is not None:
                await self._conn.close()
                self._conn = None
        for lock, slot in self._side.values():
            async with lock:
                if slot[0] is not None:
                    await slot[0].close()
                    slot[0] = None

    # Notifications are sent inside the caller's transaction: PostgreSQL
    # delivers them only if it commits.
    async def notify_work(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Tell every process that new work may be due."""
        await self._notify(conn, WORK)

    async def notify_finished(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Tell every process that some job may have finished."""
        await self._notify(conn, FINISHED)

    async def notify_changed(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Tell live views that some job changed (progress)."""
        await self._notify(conn, CHANGED)

    async def notify_cancel(self, conn: psycopg.AsyncConnection[Any], job_id: str) -> None:
        """Ask the process that runs `job_id` to cancel it."""
        await self._notify(conn, _CANCEL + job_id)

    async def notify_cancels(self, conn: psycopg.AsyncConnection[Any], job_ids: list[str]) -> None:
        """`notify_cancel` for each of `job_ids`, in one statement."""
        await conn.execute(
            "SELECT pg_notify(%s, %s || j) FROM unnest(%s::text[]) AS j",
            [self.channel, _CANCEL, job_ids],
        )

    async def _notify(self, conn: psycopg.AsyncConnection[Any], payload: str) -> None:
        await conn.execute("SELECT pg_notify(%s, %s)", [self.channel, payload])


class Wakeups(WakeupEvents):
    """The LISTEN side: a dedicated connection, re-opened whenever it drops,
    that turns other processes' notifications into events and callbacks.
    Idle processes wait on it; a slow poll is only the safety net."""

    def __init__(self, db: Database) -> None:
        super().__init__()
        self.db = db
        self._task: asyncio.Task[None] | None = None
        self._listening = asyncio.Event()

    async def start(self) -> None:
        """Start listening; returns once the first LISTEN is in place."""
        self._task = asyncio.create_task(self._listen(), name=f"{self.db.channel}-listen")
        await self._listening.wait()

    async def stop(self) -> None:
        """Stop listening (a no-op if never started)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _listen(self) -> None:
        delay = 0.05
        while not self.db.closed:
            conn: psycopg.AsyncConnection[Any] | None = None
            try:
                conn = await self.db.connect(autocommit=True)
                await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.db.channel)))
                delay = 0.05
                # Anything could have happened while we were not listening.
                self.work_event.set()
                self.finished_event.set()
                self.changed_event.set()
                if self.on_resync is not None and self._listening.is_set():
                    self.on_resync()
                self._listening.set()
                async for note in conn.notifies():
                    self._dispatch(note.payload)
            except (psycopg.OperationalError, StoreError) as exc:
                # Not a close: `stop` cancels this task before the database closes.
                self.db.reconnects += 1
                logger.warning("postgres listener lost, reconnecting", error=str(exc))
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
            finally:
                if conn is not None:
                    with contextlib.suppress(Exception):
                        await conn.close()

    def _dispatch(self, payload: str) -> None:
        self.changed_event.set()
        if payload == WORK:
            self.work_event.set()
            if self.on_work is not None:
                self.on_work()
        elif payload == FINISHED:
            self.finished_event.set()
        elif payload.startswith(_CANCEL) and self.on_cancel is not None:
            self.on_cancel(payload[len(_CANCEL) :])
        elif payload.startswith(REQUEST) and self.on_worker_request is not None:
            self.on_worker_request(payload[len(REQUEST) :])
