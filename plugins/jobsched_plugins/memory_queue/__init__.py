"""A shared store in memory: every role of `jobsched.store.SharedStore`, no database.

``memory://NAME`` (the ``memory`` store plugin with a name) is a queue that
every store of that name in this process shares: a `jobsched.Client`, a
``JobScheduler(store="memory://NAME")`` (the shared backend, as a worker
runs it) and the dashboard see the same jobs, claims, leases, schedules and
limits, with the semantics of the SQLite and PostgreSQL shared stores. It
exists to run the client, backend and dashboard tests without a database
(PgQueuer's in-memory adapter is the model) and to try the shared mode in a
notebook. Nothing survives the process; other processes cannot see it.

``memory://NAME?lease=SECONDS`` sets the lease (30 by default). A read-only
open (``jobsched status``, the operator commands' check) of a name never
opened is refused, as a missing file or schema is.

Each call is one transaction: it holds the queue's lock from start to end
(stores of one name may run on several event loops, as `BlockingClient`
does), and wakes the other stores only after it let go, each on its own loop.
"""

from __future__ import annotations

from .store import SharedMemoryStore

__all__ = ["SharedMemoryStore"]
