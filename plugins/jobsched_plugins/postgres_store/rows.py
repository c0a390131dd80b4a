"""Decoding rows: the one place this store turns a record into a row, each
column checked (`jobsched.store.checked_shared_job`): a row changed by hand is
a `BadRowError` naming the job or schedule and the column, never a crash."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from jobsched.store import (
    AttemptRow,
    SharedJobRow,
    SharedScheduleRow,
    StoreError,
    bad_column,
    checked_shared_job,
    checked_shared_schedule,
    unpack_sort_key,
)

_JOB_FIELDS = frozenset(f.name for f in attrs.fields(SharedJobRow))
_SCHEDULE_FIELDS = frozenset(f.name for f in attrs.fields(SharedScheduleRow))


def _known(what: str, rec: Mapping[str, Any], fields: frozenset[str], id_column: str) -> None:
    unknown = rec.keys() - fields
    if unknown:
        # A column this code does not know: a newer jobsched migrated the
        # schema (the worker checks the version on this error and stops).
        raise StoreError(
            f"{what} {rec.get(id_column)} has columns this jobsched does not know "
            f"({', '.join(sorted(unknown))}): was the schema migrated by a newer jobsched?"
        )


def job_row(rec: Mapping[str, Any]) -> SharedJobRow:
    """A jobs record (``SELECT *``, plus ``depends_on`` and ``history`` for
    one job) as a checked `SharedJobRow`."""
    _known("job", rec, _JOB_FIELDS, "job_id")
    values = dict(rec)
    try:
        values["sort_key"] = unpack_sort_key(values["sort_key"])
    except ValueError:
        raise bad_column(
            "job", rec["job_id"], "sort_key", values["sort_key"], "a packed strategy key"
        ) from None
    if "depends_on" in values:
        values["depends_on"] = tuple(values["depends_on"])
    if "refused_by" in values:
        values["refused_by"] = tuple(values["refused_by"])
    if "history" in values:
        values["history"] = tuple(_attempt(rec["job_id"], a) for a in values["history"])
    return checked_shared_job(SharedJobRow(**values))


def _attempt(job_id: str, a: Any) -> AttemptRow:
    if type(a) is not list or len(a) != 7:
        raise bad_column("job", job_id, "history", a, "an attempt")
    return AttemptRow(
        number=a[0],
        status=a[1],
        error=a[2],
        started_at=a[3],
        finished_at=a[4],
        worker=a[5],
        traceback=a[6],
    )


def schedule_row(rec: Mapping[str, Any]) -> SharedScheduleRow:
    """A schedules record as a checked `SharedScheduleRow`."""
    _known("recurring schedule", rec, _SCHEDULE_FIELDS, "schedule_id")
    return checked_shared_schedule(SharedScheduleRow(**rec))


def checked_limits(data: Any) -> dict[str, Any]:
    """The stored limits (`SharedStore.sync_limits`); `BadRowError` if they are no JSON object."""
    if type(data) is not dict:
        raise bad_column("limits row", 1, "data", data, "a JSON object")
    return data
