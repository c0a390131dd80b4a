"""The store contracts: what a third party implements to keep jobs durable.

A store keeps every job as *data* (its registered type name, JSON arguments
and options, status, attempts, times, result), never as a pickle, so that a
scheduler can rebuild its queues after a restart and other processes can run
the jobs. A store is a plugin registered by URL scheme::

    @hookimpl
    def jobsched_register_stores(register):
        register("mystore", MyStore)  # MyStore(url) builds one

``JobScheduler(store="mystore://...")`` resolves the scheme once, when the
scheduler is composed. There are two contracts, both built on `StoreBase`
(``url``, ``durable``, ``shared``, ``open``, ``close``):

- `Store`: **one owner**. One scheduler process owns the store (the SQLite
  file of ``jobsched run --store``); it keeps its queues in memory and writes
  every state change through `Store.write`, in batches of `JobRow` and
  `ScheduleRow` upserts. On restart `Store.open` returns a `Snapshot` of every
  row and the scheduler restores from it.
- `SharedStore`: **many processes on one queue** (PostgreSQL). No process
  keeps a queue of its own: jobs are inserted (`NewJob`), claimed in strategy
  order under a lease (`SharedJobRow`), finished (`Outcome`), and recurring
  schedules (`SharedScheduleRow`) fire once per period for the whole cluster.

`SharedStore` is the intersection of nine **roles** (`ROLES`), each a
protocol of its own: ``submit`` (`SubmitRole`), ``queue`` (`QueueRole`:
claims, leases, outcomes), ``lookup`` (`LookupRole`), ``inspect``
(`InspectRole`: pages, counts, stats), ``operate`` (`OperateRole`: retry,
requeue, purge, cancel, pause), ``schedules`` (`ScheduleRole`), ``limits``
(`LimitsRole`), ``workers`` (`WorkersRole`: the worker registry) and
``history`` (`HistoryRole`: throughput history, `HistoryRow`). A
store may implement only some: `Client` needs ``submit`` and ``lookup``,
``jobsched worker`` all of them, and each of them says, naming
the store and the role, when a store lacks one (`require_roles`,
`MissingRoleError`). docs/plugins.md has the table.

Conventions every method follows:

- Times are **wall-clock epoch seconds** (``time.time()``): monotonic times
  mean nothing after a restart or on another host. A shared store stamps
  leases and finish times with one clock for every process (PostgreSQL uses
  the server's).
- Job arguments, options and results are JSON. One-owner rows carry them as
  JSON *text*, encoded once by the scheduler (write them as they are); shared
  rows carry decoded JSON values (dicts), except `Outcome.result`, which is
  JSON text. A result JSON cannot hold arrives as
  ``{"$repr": repr(result), "$note": why}``. The options' keys and spellings
  are fixed by the scheduler's codec (see `NewJob.options`).
- Every call is made on the scheduler's event loop. A store built on a
  blocking driver runs it off the loop (a thread).
- Every failure is a `StoreError` whose message names the store (`url`) and
  the problem; the call changed nothing (each call is one transaction). A
  stored row that cannot be read (changed by hand) is a `BadRowError` naming
  the row and the column; a store a newer jobsched migrated is a
  `SchemaTooNewError` naming both versions.

The SQLite store (``jobsched_plugins.sqlite_store``) implements `Store`; the
PostgreSQL store (``jobsched_plugins.postgres_store``) implements
`SharedStore`. docs/durability.md is the guide.
"""

from __future__ import annotations

from .._errors import (
    BadRowError,
    MissingRoleError,
    SchemaTooNewError,
    StoreError,
    StoreOwnedError,
)
from .._trigger_rules import TRIGGER_RULES, Upstreams, check_trigger_rule
from ._checks import (
    bad_column,
    check_snapshot,
    checked_command,
    checked_shared_job,
    checked_shared_schedule,
    checked_worker,
    json_column,
)
from ._contracts import (
    BASE_MEMBERS,
    READER_MEMBERS,
    ROLE_MEMBERS,
    ROLES,
    SHARED_ROLES,
    SHARED_STORE_MEMBERS,
    STORE_MEMBERS,
    HistoryRole,
    InspectRole,
    LimitsRole,
    LookupRole,
    OperateRole,
    QueueRole,
    ScheduleRole,
    SchemaScript,
    SharedStore,
    Store,
    StoreBase,
    StoreReader,
    SubmitRole,
    TransactionSubmit,
    WorkersRole,
)
from ._encoding import (
    TRACEBACK_LIMIT,
    cut_middle,
    decode_result,
    encode_json,
    encode_result,
    result_as_json,
    storable_text,
    storable_traceback,
)
from ._history import (
    DURATION_BOUNDS,
    DURATION_COLUMNS,
    DURATION_SLOTS,
    FOLD_STEP,
    HISTORY_KEEP,
    HISTORY_STEPS,
    BacklogRow,
    HistoryFold,
    HistoryRead,
    HistoryRow,
    HistoryTable,
    bucket_start,
    check_history_rows,
    duration_slot,
    percentile,
    rows_per_step,
    sum_durations,
)
from ._resolve import (
    StoreFactories,
    as_shared_store,
    as_store,
    as_store_reader,
    lacking_roles,
    new_worker_id,
    offers,
    offers_a_role,
    offers_shared,
    read_store,
    require_roles,
    resolve_store,
    store_name,
)
from ._rows import (
    MAX_BUILD_REFUSALS,
    MAX_LEASE_EXPIRIES,
    UNSERVED_SCAN,
    WORKER_COLUMNS,
    WORKER_COMMANDS,
    WORKER_RETENTION,
    AttemptRow,
    JobKind,
    JobRow,
    LimitsData,
    NewJob,
    Outcome,
    PlainNewJobs,
    PurgeRow,
    QueueStatsRow,
    ScheduleRow,
    SharedJobRow,
    SharedScheduleRow,
    Snapshot,
    StoreContext,
    StoreStats,
    WorkerRow,
    build_refused_error,
    check_max_build_refusals,
    check_max_lease_expiries,
    check_worker_command,
    lease_expired_error,
    queue_rows,
)
from ._settle import settle_at_insert, settle_dependent
from ._sort_keys import pack_sort_key, unpack_sort_key

__all__ = [
    "BASE_MEMBERS",
    "DURATION_BOUNDS",
    "DURATION_COLUMNS",
    "DURATION_SLOTS",
    "FOLD_STEP",
    "HISTORY_KEEP",
    "HISTORY_STEPS",
    "MAX_BUILD_REFUSALS",
    "MAX_LEASE_EXPIRIES",
    "READER_MEMBERS",
    "ROLES",
    "ROLE_MEMBERS",
    "SHARED_ROLES",
    "SHARED_STORE_MEMBERS",
    "STORE_MEMBERS",
    "TRACEBACK_LIMIT",
    "TRIGGER_RULES",
    "UNSERVED_SCAN",
    "WORKER_COLUMNS",
    "WORKER_COMMANDS",
    "WORKER_RETENTION",
    "AttemptRow",
    "BacklogRow",
    "BadRowError",
    "HistoryFold",
    "HistoryRead",
    "HistoryRole",
    "HistoryRow",
    "HistoryTable",
    "InspectRole",
    "JobKind",
    "JobRow",
    "LimitsData",
    "LimitsRole",
    "LookupRole",
    "MissingRoleError",
    "NewJob",
    "OperateRole",
    "Outcome",
    "PlainNewJobs",
    "PurgeRow",
    "QueueRole",
    "QueueStatsRow",
    "ScheduleRole",
    "ScheduleRow",
    "SchemaScript",
    "SchemaTooNewError",
    "SharedJobRow",
    "SharedScheduleRow",
    "SharedStore",
    "Snapshot",
    "Store",
    "StoreBase",
    "StoreContext",
    "StoreError",
    "StoreFactories",
    "StoreOwnedError",
    "StoreReader",
    "StoreStats",
    "SubmitRole",
    "TransactionSubmit",
    "Upstreams",
    "WorkerRow",
    "WorkersRole",
    "as_shared_store",
    "as_store",
    "as_store_reader",
    "bad_column",
    "bucket_start",
    "build_refused_error",
    "check_history_rows",
    "check_max_build_refusals",
    "check_max_lease_expiries",
    "check_snapshot",
    "check_trigger_rule",
    "check_worker_command",
    "checked_command",
    "checked_shared_job",
    "checked_shared_schedule",
    "checked_worker",
    "cut_middle",
    "decode_result",
    "duration_slot",
    "encode_json",
    "encode_result",
    "json_column",
    "lacking_roles",
    "lease_expired_error",
    "new_worker_id",
    "offers",
    "offers_a_role",
    "offers_shared",
    "pack_sort_key",
    "percentile",
    "queue_rows",
    "read_store",
    "require_roles",
    "resolve_store",
    "result_as_json",
    "rows_per_step",
    "settle_at_insert",
    "settle_dependent",
    "storable_text",
    "storable_traceback",
    "store_name",
    "sum_durations",
    "unpack_sort_key",
]
