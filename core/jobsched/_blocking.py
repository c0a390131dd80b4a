"""`BlockingClient`: `Client` as plain calls, for code without an event loop.

It runs a `Client` on its own loop thread and hands each call to it with
`asyncio.run_coroutine_threadsafe`, so any number of threads may share one.
Across `os.fork` a client made from a store URL reopens itself in the child
at its first call there (a connection, loop and thread of its own).
"""

from __future__ import annotations

import asyncio
import gc
import os
import threading
from collections.abc import Callable, Coroutine, Iterable
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

import structlog

from ._client import Client
from ._errors import SchedulerError
from ._fork import on_fork_in_child
from ._job import Job
from ._limits import Limits
from ._options import id_list
from ._plugins import PluginManager
from ._records import JobInfo, JobPage, ScheduleInfo, Stats
from ._submission import Submission
from ._workflow import Workflow

T = TypeVar("T")
P = ParamSpec("P")

logger = structlog.get_logger("jobsched.client")


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
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
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

    def open(self) -> BlockingClient:
        """Start the loop thread and open the client; returns self."""
        with self._lock:
            if self._closed:
                raise SchedulerError(f"{self!r} is closed; open a new client")
            if self._loop is not None:
                raise SchedulerError(f"{self!r} was already opened; a client opens once")
            self._start_loop()
        try:
            self._call(Client.open)
        except BaseException:
            self.close()
            raise
        return self

    def _start_loop(self) -> tuple[asyncio.AbstractEventLoop, threading.Thread]:
        loop = asyncio.new_event_loop()
        thread = threading.Thread(
            target=loop.run_forever, name="jobsched-blocking-client", daemon=True
        )
        thread.start()
        self._loop, self._thread = loop, thread
        return loop, thread

    def _forked(self) -> None:
        """In a forked child: the loop, its thread and the client are the parent's."""
        # Another thread of the parent may have held the lock at the fork.
        self._lock = threading.Lock()
        if self._loop is not None and not self._closed:
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
            self._loop = self._thread = None
            gc.collect()
            loop, thread = self._start_loop()
            try:
                asyncio.run_coroutine_threadsafe(self._client.open(), loop).result()
            except BaseException:
                # Not reopened: the next call tries again.
                loop.call_soon_threadsafe(loop.stop)
                thread.join()
                loop.close()
                self._loop = self._thread = None
                raise
            self._parents = False
        logger.info("client reopened after a fork", store=self._client.store.url, pid=os.getpid())

    def close(self) -> None:
        """Close the client and stop its thread. Closing twice is harmless.

        In a forked child that has not reopened the client it only marks it
        closed (what it holds is the parent's)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            loop, thread = self._loop, self._thread
            if self._parents:
                return
        if loop is None or thread is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self._client.close(), loop).result()
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join()
            loop.close()

    def __enter__(self) -> BlockingClient:
        return self.open()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _call(
        self,
        method: Callable[Concatenate[Client, P], Coroutine[Any, Any, T]],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """``method(client, *args, **kwargs)`` on the loop thread, its answer here."""
        if self._parents:
            self._reopen()
        loop = self._loop
        if self._closed or loop is None:
            state = (
                "closed; open a new client" if self._closed else "not open: use `with` or open()"
            )
            raise SchedulerError(f"{self!r} is {state}")
        if threading.current_thread() is self._thread:
            raise SchedulerError(f"{self!r} cannot be called from its own loop; use its Client")
        coro = method(self._client, *args, **kwargs)
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    def submit(self, job: Job | Workflow, **options: Any) -> str:
        """`Client.submit` (a job or a workflow)."""
        return self._call(Client.submit, job, **options)

    def submit_many(self, jobs: Iterable[Job | Submission | Workflow]) -> list[str]:
        """`Client.submit_many`."""
        return self._call(Client.submit_many, list(jobs))

    def get(self, job_id: str) -> JobInfo:
        """`Client.get`."""
        return self._call(Client.get, job_id)

    def dependents(self, job_id: str) -> list[str]:
        """`Client.dependents`."""
        return self._call(Client.dependents, job_id)

    def jobs(self, **filters: Any) -> list[JobInfo]:
        """`Client.jobs`."""
        return self._call(Client.jobs, **filters)

    def cancel(self, job_id: str) -> bool:
        """`Client.cancel`."""
        return self._call(Client.cancel, job_id)

    def wait(self, job_id: str, timeout: float | None = None) -> JobInfo:
        """`Client.wait`."""
        return self._call(Client.wait, job_id, timeout=timeout)

    def wait_many(self, job_ids: Iterable[str], timeout: float | None = None) -> list[JobInfo]:
        """`Client.wait_many`."""
        return self._call(Client.wait_many, id_list(job_ids, "wait_many"), timeout=timeout)

    def add_schedule(self, job: Job, **options: Any) -> str:
        """`Client.add_schedule` (the workers serve the schedule, and this client while open)."""
        return self._call(Client.add_schedule, job, **options)

    def cancel_schedule(self, schedule_id: str) -> bool:
        """`Client.cancel_schedule`."""
        return self._call(Client.cancel_schedule, schedule_id)

    def wait_schedule(self, schedule_id: str, timeout: float | None = None) -> None:
        """`Client.wait_schedule`."""
        return self._call(Client.wait_schedule, schedule_id, timeout=timeout)

    def result(self, job_id: str, timeout: float | None = None) -> Any:
        """`Client.result`."""
        return self._call(Client.result, job_id, timeout=timeout)

    def page(self, **filters: Any) -> JobPage:
        """`Client.page`."""
        return self._call(Client.page, **filters)

    def stats(self) -> Stats:
        """`Client.stats`."""
        return self._call(Client.stats)

    def retry(self, job_id: str) -> JobInfo:
        """`Client.retry`."""
        return self._call(Client.retry, job_id)

    def requeue(self, **filters: Any) -> list[str]:
        """`Client.requeue`."""
        return self._call(Client.requeue, **filters)

    def purge(self, *, older_than: float, status: Any = None) -> int:
        """`Client.purge`."""
        return self._call(Client.purge, older_than=older_than, status=status)

    def schedules(self) -> list[ScheduleInfo]:
        """`Client.schedules`."""
        return self._call(Client.schedules)

    def pause_schedule(self, schedule_id: str) -> bool:
        """`Client.pause_schedule`."""
        return self._call(Client.pause_schedule, schedule_id)

    def resume_schedule(self, schedule_id: str) -> bool:
        """`Client.resume_schedule`."""
        return self._call(Client.resume_schedule, schedule_id)

    def trigger_schedule(self, schedule_id: str) -> str:
        """`Client.trigger_schedule`."""
        return self._call(Client.trigger_schedule, schedule_id)

    def pause_queue(self) -> bool:
        """`Client.pause_queue`."""
        return self._call(Client.pause_queue)

    def resume_queue(self) -> bool:
        """`Client.resume_queue`."""
        return self._call(Client.resume_queue)

    def queue_paused(self) -> bool:
        """`Client.queue_paused`."""
        return self._call(Client.queue_paused)

    def wait_for_change(self, timeout: float) -> bool:
        """`Client.wait_for_change`."""
        return self._call(Client.wait_for_change, timeout)
