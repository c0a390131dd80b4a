"""jobsched for the lifetime of a Starlette or FastAPI app (docs/integrations.md).

``app = FastAPI(lifespan=lifespan("postgresql://host/db"))`` opens a
`jobsched.Client` when the app starts and closes it when the app stops;
``lifespan(scheduler=JobScheduler)`` runs a scheduler in the app's own
process instead. Either way a request handler reaches the client through
the lifespan state, ``request.state.jobsched``, or `client` (also a FastAPI
dependency: ``jobs: Annotated[Client | LocalClient, Depends(client)]``).

Only Starlette is needed (FastAPI is built on it); this module uses
jobsched's public names only.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any

from jobsched import Client, JobScheduler, LocalClient, SchedulerError

try:
    from starlette.requests import HTTPConnection
except ImportError as exc:
    raise ImportError(
        "jobsched.integrations.starlette needs Starlette (FastAPI includes it): "
        "pip install starlette"
    ) from exc

__all__ = ["CLIENT_OPTIONS", "STATE_KEY", "InnerLifespan", "JobschedClient", "client", "lifespan"]

#: The name of the client in the lifespan state (``request.state.jobsched``).
STATE_KEY = "jobsched"

#: What a handler gets: a `Client` on a shared store, or a `LocalClient`
#: over the app's own scheduler. Both have the same coroutines
#: (`submit`, `get`, `wait`, `result`, `cancel`, ...).
JobschedClient = Client | LocalClient

#: The keyword arguments `lifespan` hands to `Client`.
CLIENT_OPTIONS = ("plugins", "strategy", "limits")

#: An app's own lifespan, as Starlette takes it: ``app -> async context
#: manager`` yielding None or a state mapping.
InnerLifespan = Callable[[Any], AbstractAsyncContextManager[Mapping[str, Any] | None]]


def lifespan(
    store: Any = None,
    *,
    scheduler: JobScheduler | Callable[[], JobScheduler] | None = None,
    inner: InnerLifespan | None = None,
    **client_options: Any,
) -> Callable[[Any], AbstractAsyncContextManager[dict[str, Any]]]:
    """A lifespan for ``Starlette(lifespan=...)`` or ``FastAPI(lifespan=...)``.

    - ``lifespan(store)``: open ``Client(store, **client_options)`` when the
      app starts and close it when it stops. `store` is a shared store's URL
      (a fresh connection each time the app starts) or a
      `jobsched.store.SharedStore`; `client_options` are `Client`'s ``plugins``,
      ``strategy`` and ``limits``. Workers are other processes (``jobsched
      worker``).
    - ``lifespan(scheduler=...)``: start a `JobScheduler` with the app and
      stop it with the app (running jobs finish, queued ones stay queued:
      give it a durable store to keep them). Handlers get a `LocalClient`
      over it. Pass the class or a function making one
      (``functools.partial(JobScheduler, store="sqlite:///jobs.db")``) to
      build a fresh scheduler each time the app starts, as tests do; an
      instance runs once only.
    - both: start the scheduler (a worker of the shared store) and hand
      handlers a `Client` on `store`.

    `inner` is the app's own lifespan: it starts once the client is open
    (and the scheduler started) and stops before they close; the state it
    yields is merged with ``{"jobsched": client}``. If it fails to start,
    what this opened is closed again. An app whose own startup needs the
    client nests the other way: ``async with jobs_lifespan(app) as state:``
    inside its lifespan (``state["jobsched"]`` is the client).
    """
    if store is None and scheduler is None:
        raise TypeError(
            "lifespan() needs store= (a shared store's URL, for a Client) "
            "or scheduler= (a JobScheduler to run in the app's process)"
        )
    unknown = sorted(set(client_options) - set(CLIENT_OPTIONS))
    if unknown:
        raise TypeError(f"lifespan() got an unexpected keyword argument {unknown[0]!r}")
    if client_options and store is None:
        raise TypeError(
            f"lifespan() got Client options ({', '.join(sorted(client_options))}) without store="
        )
    if scheduler is not None and not (isinstance(scheduler, JobScheduler) or callable(scheduler)):
        raise TypeError(
            f"scheduler must be a JobScheduler or a function making one, got {scheduler!r}"
        )
    if inner is not None and not callable(inner):
        raise TypeError(f"inner must be a lifespan (a function of the app), got {inner!r}")

    @contextlib.asynccontextmanager
    async def run(app: Any) -> AsyncIterator[dict[str, Any]]:
        async with contextlib.AsyncExitStack() as stack:
            jobs: JobschedClient
            if scheduler is None:
                jobs = Client(store, **client_options)
            else:
                running = await stack.enter_async_context(_scheduler(scheduler))
                jobs = LocalClient(running) if store is None else Client(store, **client_options)
            await stack.enter_async_context(jobs)
            state = {STATE_KEY: jobs}
            if inner is not None:
                inner_state = await stack.enter_async_context(inner(app))
                if inner_state and STATE_KEY in inner_state:
                    raise ValueError(
                        f"the app's lifespan state has a {STATE_KEY!r} key already; "
                        "it is where jobsched's lifespan puts its client"
                    )
                state.update(inner_state or {})
            yield state

    return run


def _scheduler(given: JobScheduler | Callable[[], JobScheduler]) -> JobScheduler:
    made = given if isinstance(given, JobScheduler) else given()
    if not isinstance(made, JobScheduler):
        raise TypeError(f"scheduler= made {made!r}, not a JobScheduler")
    return made


def client(conn: HTTPConnection) -> JobschedClient:
    """The client `lifespan` put in this request's (or websocket's) state.

    Usable as a FastAPI dependency (``Depends(client)``). `SchedulerError`
    if the app was not given jobsched's lifespan.
    """
    try:
        found: JobschedClient = getattr(conn.state, STATE_KEY)
    except AttributeError:
        raise SchedulerError(
            f"no jobsched client in the state of {conn.url.path!r}: give the app "
            "lifespan=jobsched.integrations.starlette.lifespan(...)"
        ) from None
    return found
