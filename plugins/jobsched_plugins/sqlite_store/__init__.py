"""The ``sqlite`` store: every job in one SQLite file (stdlib ``sqlite3``, WAL mode).

URL: ``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db`` (the
SQLAlchemy convention: the path follows the third slash), with options as a
query string:

- ``timeout=5``: seconds to wait for a lock another connection holds.
- ``synchronous=full`` (default): a commit survives power loss (an fsync per
  batch); ``synchronous=normal``: a commit survives a crash of the process
  but not of the machine (WAL mode's usual setting, faster).
- ``lease=30`` (shared mode): seconds a claimed job's lease lasts.
- ``poll=0.05`` (shared mode): seconds between two looks for other
  processes' commits, the wake-up latency.

Two modes, chosen when a new file is created; a file is in one mode for its
whole life, and every tool opens a file of either mode (``jobsched status``,
``web``, ``jobs ...``, `Client`: reads, and operator actions; a scheduler left
to choose follows the file's mode). Only a process that would run a file's
jobs against its mode is refused, naming both: a worker on a single-owner
file, an owner (``shared=False``) on a shared one.

- **single-owner** (``JobScheduler(store="sqlite:///...")``, ``jobsched run
  --store``): one scheduler owns the file (a lock file ``<path>.lock`` held
  with ``flock``, ``host:pid`` in it), keeps its queues in memory and writes
  a journal of full rows; ``open`` returns every job to restore. A `Client`
  reads the journal (``journal_reads``) and, while no owner holds the lock,
  writes the operator actions in it (``journal_ops``) for the next owner to
  restore; while one does, an action is a `StoreOwnedError` naming it.
- **shared** (``jobsched worker --store``, ``Client``,
  ``JobScheduler(store=..., shared=True)``): several processes on one host
  share the file as PostgreSQL processes share a database (the
  `jobsched.store.SharedStore` calls): claims in strategy order with leases, in
  ``BEGIN IMMEDIATE`` transactions; dependencies, cancellation, unique keys,
  cluster limits and once-per-period schedules as in the postgres store.
  Wake-ups come from polling ``PRAGMA data_version`` every ``poll`` seconds.

Every SQLite call of a store runs on one thread of its own, never on the
event loop. The package's parts: ``connection`` (URLs, the thread, transactions,
the file lock, wake-ups), ``migrations`` (both schemas, which mode a file is
in), ``journal`` (opening, the single-owner journal), ``journal_reads`` and
``journal_ops`` (a journal as a `Client` reads and operates it), ``submit``, ``claims``
(claims, leases, limits, outcomes, cancellation), ``schedules``, ``queries``.
"""

from __future__ import annotations

from jobsched import hookimpl
from jobsched.hookspecs import Register

from .connection import parse_url
from .migrations import SCHEMA_VERSION
from .store import SQLiteStore

__all__ = ["SCHEMA_VERSION", "SQLiteStore", "jobsched_register_stores", "parse_url"]


@hookimpl
def jobsched_register_stores(register: Register) -> None:
    register("sqlite", SQLiteStore)
