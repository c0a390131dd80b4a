"""The ``postgres`` store: several jobsched processes on several hosts share one queue.

``JobScheduler(store="postgresql://user@host/db")``. Jobs are rows (registered
type name + JSON arguments, never pickles). A process takes the next due jobs
with ``SELECT ... FOR UPDATE SKIP LOCKED`` in the strategy's order (the
strategy key is stored as a sortable ``float8[]``) and holds a lease on each,
renewed while the job runs. A process that dies stops renewing; once its
leases expire any process puts those jobs back (attempt count kept):
at-least-once. Dependencies are resolved in the database, in the same
transaction that finishes the upstream. Idle processes wake on
``LISTEN/NOTIFY``; a slow poll is only the safety net.

The schema is created and migrated by jobsched itself (``schema_version``
table); a database whose schema is newer than this code is refused. Every
object lives in one PostgreSQL schema, ``jobsched`` unless the URL says
``?schema=NAME``, so several independent queues can share one database.

Needs the ``postgres`` extra: ``pip install 'jobsched[postgres]'`` (psycopg 3).

The package's parts, each a concern of the one `PostgresStore`:
``connection`` (URLs, transactions that survive a lost connection,
LISTEN/NOTIFY wake-ups), ``migrations`` (the schema and its versions),
``submit`` (inserting jobs), ``claims`` (claims, leases, cluster limits,
outcomes, cancellation), ``schedules`` and ``queries`` (reading jobs).
"""

from __future__ import annotations

from jobsched import hookimpl
from jobsched.hookspecs import Register

from .connection import parse_url, redact
from .migrations import SCHEMA_VERSION
from .store import PostgresStore

__all__ = ["SCHEMA_VERSION", "PostgresStore", "jobsched_register_stores", "parse_url", "redact"]


@hookimpl
def jobsched_register_stores(register: Register) -> None:
    register("postgresql", PostgresStore)
    register("postgres", PostgresStore)
