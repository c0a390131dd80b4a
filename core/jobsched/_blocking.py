"""`BlockingClient`: `Client` as plain calls, for code without an event loop.

A `Client` runs on a `Portal` (an event loop on a thread of its own), and
each method of `BlockingClient` is derived from the `Client` coroutine of
the same name (`_Blocking`): it hands the call to the portal and blocks until
it is answered, so any number of threads may share one client. Across
`os.fork` a client made from a store URL reopens itself in the child at its
first call there (a connection, loop and thread of its own).
"""

from __future__ import annotations

import gc
import inspect
import os
import threading
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

import structlog

from ._client import Client
from ._errors import SchedulerError
from ._fork import on_fork_in_child
from ._limits import Limits
from ._plugins import PluginManager
from ._portal import Portal

T = TypeVar("T")
P = ParamSpec("P")

logger = structlog.get_logger("jobsched.client")


#: The calls that take the application's connection (``conn=``), and the
#: `Client` method running each in the calling thread.
_ON_CONNECTION = {"submit": "_submit_on", "submit_many": "_submit_many_on"}


class _Blocking(Generic[P, T]):
    """A `Client` coroutine as a plain method of `BlockingClient`: same
    parameters, same docstring, its result (or exception) returned in the
    calling thread."""

    def __init__(self, method: Callable[Concatenate[Client, P], Coroutine[Any, Any, T]]) -> None:
        self.name = method.__name__
        self.__doc__ = method.__doc__
        # What help() and inspect show: the coroutine's parameters, but self.
        signature = inspect.signature(method)
        self.signature = signature.replace(parameters=list(signature.parameters.values())[1:])

    @overload
    def __get__(self, client: None, owner: type[BlockingClient]) -> _Blocking[P, T]: ...

    @overload
    def __get__(self, client: BlockingClient, owner: type[BlockingClient]) -> Callable[P, T]: ...

    def __get__(
        self, client: BlockingClient | None, owner: type[BlockingClient]
    ) -> _Blocking[P, T] | Callable[P, T]:
        if client is None:
            return self
        name = self.name

        def call(*args: P.args, **kwargs: P.kwargs) -> T:
            if kwargs.get("conn") is not None and name in _ON_CONNECTION:
                # The application's own connection and transaction belong to
                # this thread: the insert runs here, not on the portal's loop.
                on: Callable[..., T] = getattr(client._ready(), _ON_CONNECTION[name])
                client._portal_of()  # refused as every call is once closed
                return on(kwargs.pop("conn"), *args, **kwargs)
            method: Callable[P, Coroutine[Any, Any, T]] = getattr(client._ready(), name)
            return client._portal_of().call(method, *args, **kwargs)

        call.__name__ = call.__qualname__ = name
        call.__doc__ = self.__doc__
        call.__dict__["__signature__"] = self.signature
        # Built once per client: the instance's attribute answers the next lookups.
        vars(client)[name] = call
        return call


class BlockingClient:
    """`Client` as plain calls, for code without an event loop (Django, Flask, scripts).

    ``with BlockingClient("postgresql://host/db") as client: client.submit(job)``.
    It runs a `Client` on an event loop in its own daemon thread; every
    method hands its call to that loop and blocks until it is answered, so
    several threads may use one client at once. `close` (or leaving the
    ``with`` block) stops the thread; a closed client refuses every call.

    A client opened before the process forks (gunicorn ``--preload``,
    Celery's prefork pool, multiprocessing's "fork") reopens itself in each
    child at its first call there: a new connection, loop and thread of the
    child's own, while the parent's stay the parent's (never used or closed
    in the child). That needs the store as a URL; one given as a store
    object cannot be rebuilt, and the child's calls raise `SchedulerError`
    saying so.
    """

    def __init__(
        self,
        store: Any,
        *,
        plugins: PluginManager | None = None,
        strategy: Any = "priority",
        limits: Limits | None = None,
    ) -> None:
        self._client = Client(store, plugins=plugins, strategy=strategy, limits=limits)
        # What a forked child builds its own Client from (`_reopen`).
        self._store = store
        self._options: dict[str, Any] = {"plugins": plugins, "strategy": strategy, "limits": limits}
        self._portal: Portal | None = None
        self._closed = False
        # Opened in a process this one forked from: reopen before the next call.
        self._parents = False
        self._lock = threading.Lock()
        on_fork_in_child(self._forked)

    def __repr__(self) -> str:
        return f"BlockingClient({self._client.store.url!r})"

    @property
    def client(self) -> Client:
        """The async `Client` it runs (for its attributes; call it only on its loop)."""
        return self._client

    # ── lifecycle ───────────────────────────────────────────────────
    def open(self) -> BlockingClient:
        """Start the loop thread and open the client; returns self."""
        with self._lock:
            if self._closed:
                raise SchedulerError(f"{self!r} is closed; open a new client")
            if self._portal is not None:
                raise SchedulerError(f"{self!r} was already opened; a client opens once")
            portal = self._portal = Portal("jobsched-blocking-client")
        try:
            portal.call(self._client.open)
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Close the client and stop its thread. Closing twice is harmless.

        In a forked child that has not reopened the client it only marks it
        closed (what it holds is the parent's)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            portal = self._portal
            if self._parents or portal is None:
                return
        try:
            portal.call(self._client.close)
        finally:
            portal.stop()

    def __enter__(self) -> BlockingClient:
        return self.open()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ── across a fork ───────────────────────────────────────────────
    def _forked(self) -> None:
        """In a forked child: the loop, its thread and the client are the parent's."""
        # Another thread of the parent may have held the lock at the fork.
        self._lock = threading.Lock()
        if self._portal is not None and not self._closed:
            self._parents = True

    def _reopen(self) -> None:
        """In a forked child: a client, loop and thread of this process's own."""
        with self._lock:
            if not self._parents or self._closed:
                return
            if not isinstance(self._store, str):
                raise SchedulerError(
                    f"{self!r} was opened before this process ({os.getpid()}) forked, with a "
                    "store object, which cannot be rebuilt here: its connection stays the "
                    "parent's. Open a new BlockingClient in the child, or give the store's "
                    "URL, and the client reopens itself in each child"
                )
            # The parent's client, loop and thread are let go, never called or
            # closed: as SQLAlchemy's dispose(close=False) does. Collected before
            # this process connects: psycopg never ends a session from a process
            # that did not open it, and a SQLite handle collected here releases
            # this process's own locks only, while one left open would share its
            # lock bookkeeping with the new connection to the same file.
            self._client = Client(self._store, **self._options)
            self._portal = None
            gc.collect()
            portal = Portal("jobsched-blocking-client")
            try:
                portal.call(self._client.open)
            except BaseException:
                portal.stop()  # not reopened: the next call tries again
                raise
            self._portal = portal
            self._parents = False
        logger.info("client reopened after a fork", store=self._client.store.url, pid=os.getpid())

    # ── the calls ───────────────────────────────────────────────────
    def _ready(self) -> Client:
        """The client to call, reopened first in a forked child."""
        if self._parents:
            self._reopen()
        return self._client

    def _portal_of(self) -> Portal:
        """The portal to call through; refused if closed, not open, or from its own loop."""
        portal = self._portal
        if self._closed or portal is None:
            state = (
                "closed; open a new client" if self._closed else "not open: use `with` or open()"
            )
            raise SchedulerError(f"{self!r} is {state}")
        if portal.in_loop_thread():
            raise SchedulerError(f"{self!r} cannot be called from its own loop; use its Client")
        return portal

    submit = _Blocking(Client.submit)
    submit_many = _Blocking(Client.submit_many)
    get = _Blocking(Client.get)
    dependents = _Blocking(Client.dependents)
    dependents_of = _Blocking(Client.dependents_of)
    jobs = _Blocking(Client.jobs)
    cancel = _Blocking(Client.cancel)
    wait = _Blocking(Client.wait)
    wait_many = _Blocking(Client.wait_many)
    result = _Blocking(Client.result)
    add_schedule = _Blocking(Client.add_schedule)
    update_schedule = _Blocking(Client.update_schedule)
    schedule_runs = _Blocking(Client.schedule_runs)
    cancel_schedule = _Blocking(Client.cancel_schedule)
    wait_schedule = _Blocking(Client.wait_schedule)
    page = _Blocking(Client.page)
    stats = _Blocking(Client.stats)
    history = _Blocking(Client.history)
    workers = _Blocking(Client.workers)
    drain_worker = _Blocking(Client.drain_worker)
    stop_worker = _Blocking(Client.stop_worker)
    retry = _Blocking(Client.retry)
    requeue = _Blocking(Client.requeue)
    purge = _Blocking(Client.purge)
    retry_many = _Blocking(Client.retry_many)
    cancel_many = _Blocking(Client.cancel_many)
    purge_many = _Blocking(Client.purge_many)
    schedules = _Blocking(Client.schedules)
    pause_schedule = _Blocking(Client.pause_schedule)
    resume_schedule = _Blocking(Client.resume_schedule)
    trigger_schedule = _Blocking(Client.trigger_schedule)
    pause_queue = _Blocking(Client.pause_queue)
    resume_queue = _Blocking(Client.resume_queue)
    queue_paused = _Blocking(Client.queue_paused)
    queues = _Blocking(Client.queues)
    wait_for_change = _Blocking(Client.wait_for_change)
