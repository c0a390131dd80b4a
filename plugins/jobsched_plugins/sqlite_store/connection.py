"""The link to the file: store URLs, the one thread and connection every call
runs on, transactions, the file lock of the single-owner mode, and the
wake-ups between processes of the shared mode (a poll of ``PRAGMA data_version``).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import json
import math
import os
import socket
import sqlite3
import time
import urllib.parse
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import structlog

from jobsched.store import BadRowError, StoreError, StoreOwnedError

from .._wakeups import WakeupEvents

fcntl: Any
try:
    import fcntl
except ImportError:  # Windows: no ownership lock (documented)
    fcntl = None

logger = structlog.get_logger("jobsched.sqlite")

T = TypeVar("T")

TERMINAL = ("completed", "failed", "timed_out", "cancelled")

_OPTIONS = ("timeout", "synchronous", "lease", "poll")

# SQLite's fixed message for each result code an open or a transaction can
# meet (sqlite3_errstr), for Python 3.10, whose exceptions name no code.
_NAMES_BY_MESSAGE = {
    "database is locked": "SQLITE_BUSY",
    "database table is locked": "SQLITE_LOCKED",
    "database or disk is full": "SQLITE_FULL",
    "attempt to write a readonly database": "SQLITE_READONLY",
    "unable to open database file": "SQLITE_CANTOPEN",
    "access permission denied": "SQLITE_PERM",
    "disk I/O error": "SQLITE_IOERR",
    "file is not a database": "SQLITE_NOTADB",
    "database disk image is malformed": "SQLITE_CORRUPT",
}


def parse_url(url: str) -> tuple[str, dict[str, str]]:
    """``(path, options)`` of a ``sqlite:///path?option=value`` URL."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "sqlite":
        raise ValueError(f"not a sqlite URL: {url!r}")
    if not url.partition(":")[2].startswith("//"):
        # sqlite:jobs.db or sqlite:/jobs.db: the path would lose its first character.
        raise ValueError(
            f"sqlite URL {url!r} must start with sqlite:/// (three slashes): write "
            "sqlite:///relative/jobs.db for a path relative to the working directory, "
            "or sqlite:////absolute/jobs.db (four slashes) for an absolute one"
        )
    if parts.netloc:
        raise ValueError(
            f"sqlite URL {url!r} has a host ({parts.netloc!r}); write sqlite:///relative.db "
            "or sqlite:////absolute/path.db"
        )
    path = urllib.parse.unquote(parts.path)[1:]  # the path follows the third slash
    if not path or path == ":memory:":
        raise ValueError(
            f"sqlite URL {url!r} needs a file path: sqlite:///jobs.db (relative) or "
            "sqlite:////var/lib/jobs.db (absolute)"
        )
    options = dict(urllib.parse.parse_qsl(parts.query, keep_blank_values=True))
    unknown = set(options) - set(_OPTIONS)
    if unknown:
        raise ValueError(
            f"sqlite URL {url!r}: unknown option(s) {', '.join(sorted(unknown))} "
            f"(known: {', '.join(_OPTIONS)})"
        )
    return path, options


def seconds_option(url: str, options: dict[str, str], name: str, default: float) -> float:
    """A positive number of seconds from the URL's options."""
    try:
        value = float(options.get(name, default))
    except ValueError:
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"{url}: {name} must be a number of seconds > 0, got {options[name]!r}")
    return value


# ── values as SQLite keeps them ───────────────────────────────────────
# One encoder for every call: json.dumps with an option builds a new one each
# time, which costs more than encoding a job's small dicts. Same text as
# json.dumps(value, allow_nan=False).
_encode = json.JSONEncoder(allow_nan=False).encode


def to_json(value: Any) -> str:
    """Arguments, options or a trigger as JSON text (the scheduler's codec made
    them JSON values; results arrive as JSON text already)."""
    if not value and type(value) is dict:
        return "{}"  # most jobs have no arguments
    try:
        return _encode(value)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"not JSON, so it cannot be stored: {exc}") from None


class Database:
    """One store's way to its file: one thread, one connection, in order.

    sqlite3 connections belong to the thread that made them, and one thread
    keeps calls in order; the event loop never blocks on SQLite.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.path, self.options = parse_url(url)
        self.timeout = seconds_option(url, self.options, "timeout", 5.0)
        self.synchronous = self.options.get("synchronous", "full").upper()
        if self.synchronous not in ("FULL", "NORMAL"):
            raise ValueError(f"{url}: synchronous must be 'full' or 'normal'")
        self._thread: ThreadPoolExecutor | None = None
        self.conn: sqlite3.Connection | None = None
        self._lock_fd: int | None = None
        # Writing transactions waiting for the thread (see `transaction`).
        self._group: collections.deque[_Call] = collections.deque()

    @property
    def started(self) -> bool:
        return self._thread is not None

    def start(self) -> None:
        if self._thread is not None:
            raise StoreError(f"{self.url}: already open")
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="jobsched-sqlite")

    def stop_thread(self) -> None:
        if self._thread is not None:
            self._thread.shutdown(wait=False)
            self._thread = None

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on the store's thread."""
        if self._thread is None:
            raise StoreError(f"{self.url}: the store is not open")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, fn, *args)

    def connect(self, readonly: bool) -> sqlite3.Connection:
        """A new connection to the file (autocommit: transactions are explicit)."""
        if readonly:
            target = "file:" + urllib.parse.quote(os.path.abspath(self.path)) + "?mode=ro"
            return sqlite3.connect(target, uri=True, timeout=self.timeout, isolation_level=None)
        return sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)

    def use_wal(self, conn: sqlite3.Connection) -> None:
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StoreError(f"{self.url}: cannot switch {self.path} to WAL mode (got {mode!r})")
        conn.execute(f"PRAGMA synchronous={self.synchronous}")

    # ── transactions (in the store's thread) ───────────────────────
    def in_transaction(
        self, body: Callable[[sqlite3.Connection], T], what: str, *, write: bool = True
    ) -> T:
        """`body(conn)` in one transaction; a `StoreError` naming `what` if SQLite fails.

        A writing transaction starts with ``BEGIN IMMEDIATE``: it takes the
        file's write lock first (waiting up to `timeout` for another
        process), so it can never fail half-way for a lock another
        transaction took (SQLITE_BUSY on upgrade).
        """
        conn = self.conn
        if conn is None:
            raise StoreError(f"{self.url}: the store is not open")
        try:
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                result = body(conn)
                conn.execute("COMMIT")
            except BaseException:
                # SQLite may already have rolled back (a full disk does).
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise StoreError(
                f"{self.url}: could not {what} {self.path}: {self.problem(exc)}; "
                "the file keeps its last committed state"
            ) from exc
        except BadRowError as exc:
            raise exc.in_store(self.url) from None
        return result

    async def transaction(
        self, body: Callable[[sqlite3.Connection], T], what: str, *, write: bool = True
    ) -> T:
        """`in_transaction` on the store's thread.

        Writing transactions that wait for the thread together are committed
        together (group commit): one ``BEGIN IMMEDIATE`` ... ``COMMIT``, so
        one fsync, for a claim, a finish and an insert that arrive while
        another transaction commits. Each body runs in a savepoint of its
        own: a body that raises is undone alone and its caller gets the
        error; the others commit. No caller hears of success before the
        ``COMMIT`` that holds its changes has returned.
        """
        if not write:
            return await self.call(functools.partial(self.in_transaction, write=False), body, what)
        if self._thread is None:
            raise StoreError(f"{self.url}: the store is not open")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        call: _Call = (body, what, future, loop)
        self._group.append(call)
        # Every call queues a drain; a drain takes every body waiting by then,
        # so the drains queued behind it find nothing left and return.
        try:
            self._thread.submit(self._drain)
        except RuntimeError:  # the thread was shut down meanwhile
            with contextlib.suppress(ValueError):
                self._group.remove(call)
            raise StoreError(f"{self.url}: the store is not open") from None
        result: T = await future
        return result

    def _drain(self) -> None:
        """Run the writing transactions waiting now as one transaction (store's thread)."""
        group = []
        while True:
            try:
                group.append(self._group.popleft())
            except IndexError:
                break
        if not group:
            return
        settled: list[tuple[bool, Any]]
        if len(group) == 1:
            body, what, _, _ = group[0]
            try:
                settled = [(True, self.in_transaction(body, what))]
            except BaseException as exc:
                settled = [(False, exc)]
        else:
            try:
                settled = self._in_group(group)
            except BaseException as exc:  # never leave a caller waiting
                conn = self.conn
                with contextlib.suppress(sqlite3.Error):
                    if conn is not None and conn.in_transaction:
                        conn.execute("ROLLBACK")
                settled = [(False, self._failed(exc, what)) for _, what, _, _ in group]
        for (_, _, future, loop), (ok, value) in zip(group, settled, strict=True):
            loop.call_soon_threadsafe(_settle, future, ok, value)

    def _in_group(self, group: list[_Call]) -> list[tuple[bool, Any]]:
        conn = self.conn
        if conn is None:
            return [(False, StoreError(f"{self.url}: the store is not open"))] * len(group)
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            return [(False, self._failed(exc, what)) for _, what, _, _ in group]
        settled: list[tuple[bool, Any]] = []
        for body, what, _, _ in group:
            conn.execute("SAVEPOINT jobsched_call")
            try:
                value = body(conn)
            except BaseException as exc:
                try:
                    conn.execute("ROLLBACK TO jobsched_call")
                    conn.execute("RELEASE jobsched_call")
                except sqlite3.Error:
                    # SQLite rolled back the whole transaction (a full disk
                    # does): every body of the group is undone.
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    return [(False, self._failed(exc, w)) for _, w, _, _ in group]
                settled.append((False, self._failed(exc, what)))
            else:
                conn.execute("RELEASE jobsched_call")
                settled.append((True, value))
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            return [(False, self._failed(exc, what)) for _, what, _, _ in group]
        return settled

    def _failed(self, exc: BaseException, what: str) -> BaseException:
        """`in_transaction`'s error for a body that raised `exc`."""
        if isinstance(exc, BadRowError):
            return exc.in_store(self.url)
        if not isinstance(exc, sqlite3.Error):
            return exc
        error = StoreError(
            f"{self.url}: could not {what} {self.path}: {self.problem(exc)}; "
            "the file keeps its last committed state"
        )
        error.__cause__ = exc
        return error

    def close_sync(self) -> None:
        conn, self.conn = self.conn, None
        try:
            if conn is not None:
                conn.close()
        finally:
            self.release_ownership()

    # ── errors ──────────────────────────────────────────────────────
    def problem(self, exc: sqlite3.Error) -> str:
        name = self.error_name(exc)
        return f"{exc} ({name})" if name else str(exc)

    @staticmethod
    def error_name(exc: sqlite3.Error) -> str:
        """SQLite's name for `exc` (``"SQLITE_FULL"``...), or ``""``.

        Python 3.10's exceptions carry no ``sqlite_errorname``: there the
        name comes from SQLite's own fixed message for the code.
        """
        name = getattr(exc, "sqlite_errorname", None)
        if name:
            return str(name)
        return _NAMES_BY_MESSAGE.get(str(exc), "")

    def hint(self) -> str:
        """For a relative path: how to write the absolute one (a common slip)."""
        if os.path.isabs(self.path):
            return ""
        return (
            f" ({self.path} is relative to the current folder {os.getcwd()}; for the "
            f"absolute path /{self.path} write sqlite:////{self.path}, with four slashes)"
        )

    def remove_new_file(self) -> None:
        """Undo the creation of a store file whose first open failed (say, a full disk)."""
        for suffix in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(OSError):
                os.remove(self.path + suffix)

    def open_error(self, exc: sqlite3.Error, readonly: bool) -> StoreError:
        """The one-line error for an open that SQLite refused."""
        path, problem = self.path, self.problem(exc)
        name = self.error_name(exc)
        unchanged = "jobsched left it unchanged"
        if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in str(exc):
            return StoreError(
                f"{self.url}: {path} is locked by another connection (waited "
                f"{self.timeout:g}s): {problem}; {unchanged}"
            )
        if name == "SQLITE_FULL":
            return StoreError(
                f"{self.url}: the disk holding {path} is full: {problem}; {unchanged}"
            )
        if name.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM")):
            folder = os.path.dirname(os.path.abspath(path))
            verb = "read" if readonly else "open"
            return StoreError(
                f"{self.url}: cannot {verb} {path}: {problem}; SQLite needs to create "
                f"{os.path.basename(path)}-wal and -shm beside it: can this user write to "
                f"{path} and to its folder {folder}? {unchanged}"
            )
        if name.startswith("SQLITE_IOERR"):
            return StoreError(f"{self.url}: I/O error on {path}: {problem}; {unchanged}")
        if name.startswith(("SQLITE_NOTADB", "SQLITE_CORRUPT")):
            return StoreError(
                f"{self.url}: {path} is not a usable SQLite database: {problem}; {unchanged}"
            )
        return StoreError(f"{self.url}: cannot open {path}: {problem}; {unchanged}")

    # ── one owner per file (single-owner mode) ─────────────────────
    # The owner holds ``<path>.lock`` with ``flock``, its ``host:pid`` written
    # in it. The flock is what says an owner runs: the OS drops it when the
    # process ends, crash included, so a lock file a crash left behind is
    # never taken for a running owner.
    def take_ownership(self) -> None:
        """Hold ``<path>.lock`` (released by the OS if the process dies)."""
        self._lock_fd = self._lock(
            "is in use by another jobsched process ({owner}, lock file {lock}); "
            "stop it first, or use another store file"
        )

    def as_owner(self, body: Callable[[sqlite3.Connection], T], what: str) -> T:
        """`body(conn)` in one writing transaction, as the file's owner for
        that long (in the store's thread): an operator action on a
        single-owner file no process runs, restored by its next owner. While
        an owner runs, a `StoreOwnedError` names its ``host:pid``."""
        fd = self._lock(
            "is owned by a running jobsched process ({owner}), which alone writes it "
            f"while it runs; could not {what}: let it finish (or stop it) and try again"
        )
        try:
            return self.in_transaction(body, f"{what} in")
        finally:
            if fd is not None:
                os.close(fd)  # closing the descriptor releases the flock

    def _lock(self, refusal: str) -> int | None:
        """``<path>.lock``'s descriptor, flocked, with this process's
        ``host:pid`` in it; a `StoreOwnedError` from `refusal` (naming
        ``{owner}`` and ``{lock}``) while another process holds it. None where there is
        no flock (Windows, documented)."""
        if fcntl is None:
            return None
        lock_path = self.path + ".lock"
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise self._lock_error(lock_path, exc) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            found = os.read(fd, 300).decode(errors="replace").strip()
            os.close(fd)
            # A jobsched from before host:pid wrote its pid alone.
            owner = f"pid {found}" if found.isdigit() else (found or "pid unknown")
            message = refusal.format(owner=owner, lock=lock_path)
            raise StoreOwnedError(f"{self.url}: {self.path} {message}", owner) from None
        try:
            me = f"{socket.gethostname()}:{os.getpid()}".encode()
            os.pwrite(fd, me, 0)
            os.ftruncate(fd, len(me))
        except OSError as exc:
            os.close(fd)
            raise self._lock_error(lock_path, exc) from None
        return fd

    def _lock_error(self, lock_path: str, exc: OSError) -> StoreError:
        return StoreError(
            f"{self.url}: cannot write the lock file {lock_path}: {exc.strerror or exc} "
            f"(every jobsched run on {self.path} needs it, in the same folder); "
            "jobsched left the store unchanged"
        )

    def release_ownership(self) -> None:
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)  # closing the descriptor releases the flock


# A writing transaction waiting for the thread: its body, what it does (for
# errors), and the future its caller awaits on its loop.
_Call = tuple[
    Callable[[sqlite3.Connection], Any], str, "asyncio.Future[Any]", asyncio.AbstractEventLoop
]


def _settle(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if future.done():  # the caller was cancelled: the transaction happened anyway
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


class Wakeups(WakeupEvents):
    """The shared mode's notifications, by polling: every `interval` seconds
    one ``PRAGMA data_version`` (a read of the WAL index, no lock, no I/O)
    tells whether another connection committed. If one did, idle claimers
    wake (`on_work`), waiters for finished jobs wake, and running jobs that
    someone asked to cancel since are passed to `on_cancel`. This
    process's own commits notify directly, without waiting for a poll.
    """

    def __init__(self, db: Database, interval: float) -> None:
        super().__init__()  # on_resync is never called: a poll cannot miss a change
        self.db = db
        self.interval = interval
        self.owner = ""
        self._task: asyncio.Task[None] | None = None
        self._signalled: set[str] = set()  # cancel requests already passed on
        self._cancels = True

    def start(self, owner: str, *, cancels: bool = True) -> None:
        """Poll from now on; `cancels` False: the file holds no cancel requests
        (a single-owner file an operator watches)."""
        self.owner = owner
        self._cancels = cancels
        self._task = asyncio.create_task(self._poll(), name=f"jobsched-sqlite-poll-{owner}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    # ── this process's own commits ──────────────────────────────────
    def work(self) -> None:
        self.work_event.set()
        self.changed_event.set()
        if self.on_work is not None:
            self.on_work()

    def finished(self) -> None:
        self.finished_event.set()
        self.changed_event.set()

    def changed(self) -> None:
        self.changed_event.set()

    def cancel(self, job_id: str) -> None:
        if self.on_cancel is not None:
            self.on_cancel(job_id)

    # ── other processes' commits ───────────────────────────────────
    async def _poll(self) -> None:
        seen = await self.db.call(self._version)
        while True:
            await asyncio.sleep(self.interval)
            try:
                version, cancels = await self.db.call(self._changes, seen)
            except Exception as exc:  # a busy or vanished file: try again next time
                logger.warning("sqlite poll failed", error=str(exc))
                continue
            if version == seen:
                continue
            seen = version
            self.work_event.set()
            self.finished_event.set()
            self.changed_event.set()
            if self.on_work is not None:
                self.on_work()
            for job_id in cancels:
                self.cancel(job_id)

    def _version(self) -> int:
        assert self.db.conn is not None
        return int(self.db.conn.execute("PRAGMA data_version").fetchone()[0])

    def _changes(self, seen: int) -> tuple[int, list[str]]:
        """The file's version and, if it changed, the new cancel requests.

        Every process hears of every request, as with PostgreSQL's NOTIFY;
        the kernel ignores those for jobs it does not run.
        """
        version = self._version()
        if version == seen or not self._cancels:
            return version, []
        assert self.db.conn is not None
        requested = {
            r[0]
            for r in self.db.conn.execute(
                "SELECT job_id FROM jobsched_shared_jobs WHERE cancel_requested = 1 "
                "AND status = 'running'"
            )
        }
        new = sorted(requested - self._signalled)
        self._signalled = requested
        return version, new


def now() -> float:
    """Wall-clock time: every process on the host stamps leases with one clock."""
    return time.time()
