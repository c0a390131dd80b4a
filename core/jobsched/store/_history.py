"""Throughput history: ended attempts counted per time bucket, queue and job
type, with a fixed log-scale histogram of their durations (`HistoryRole`).

Workers fold the attempts they end in memory (`HistoryFold`) and hand the
folded rows to their store on the lease-renewal cadence, in one call
(`HistoryRole.add_history`); the store adds each row to two resolutions
(`HISTORY_STEPS`: 5-minute buckets kept a day, hourly buckets kept a week)
and drops what is older in the same transaction. Reading a week is then a
few hundred rows per job type, never a scan of job rows, and a percentile
comes from the histogram (`percentile`), as Prometheus' ``histogram_quantile``.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence

import attrs

#: Upper bounds (seconds, inclusive) of the duration histogram's buckets, a
#: 1-2-5 series from 1 ms to 2000 s; one more bucket counts what is longer.
DURATION_BOUNDS: tuple[float, ...] = (
    0.001,
    0.002,
    0.005,
    0.01,
    0.02,
    0.05,
    0.1,
    0.2,
    0.5,
    1.0,
    2.0,
    5.0,
    10.0,
    20.0,
    50.0,
    100.0,
    200.0,
    500.0,
    1000.0,
    2000.0,
)
#: How many counts a histogram holds: one per bound and the overflow.
DURATION_SLOTS = len(DURATION_BOUNDS) + 1
#: The columns a SQL store keeps the histogram in (``d00`` to ``d20``).
DURATION_COLUMNS: tuple[str, ...] = tuple(f"d{i:02d}" for i in range(DURATION_SLOTS))
#: The bucket sizes a store keeps, in seconds: 5 minutes and 1 hour.
HISTORY_STEPS: tuple[float, ...] = (300.0, 3600.0)
#: How long a store keeps the rows of each bucket size: a day of 5-minute
#: buckets (288), a week of hourly ones (168).
HISTORY_KEEP: dict[float, float] = {300.0: 86_400.0, 3600.0: 7 * 86_400.0}
#: The finest bucket: what a worker folds into and hands to the store.
FOLD_STEP = HISTORY_STEPS[0]
#: What `HistoryRole.history` returns: ``(start, completed, failed)`` per
#: bucket with attempts (by start), and a row per job type over the window.
HistoryRead = tuple[list[tuple[float, int, int]], list["HistoryRow"]]


@attrs.frozen(kw_only=True)
class HistoryRow:
    """The attempts that ended in one bucket of time, of one queue and job type.

    A worker hands `HistoryRole.add_history` rows of `FOLD_STEP` seconds; the
    store adds them to its rows of every step. `HistoryRole.history` returns
    a row per job type summed over a window (its `start` is then the
    window's, its `queue` the queue asked for, or ``"*"`` for all of them).
    """

    #: The bucket's size in seconds (one of `HISTORY_STEPS`).
    step: float
    #: The bucket's start, wall clock: a multiple of `step`.
    start: float
    queue: str
    type: str
    #: Attempts that returned.
    completed: int
    #: Attempts that raised or timed out (retried after or not).
    failed: int
    #: How many of those attempts (both kinds) took at most each of
    #: `DURATION_BOUNDS` and more than the bound before; the last count is
    #: those longer than every bound. `DURATION_SLOTS` counts.
    durations: tuple[int, ...]

    @property
    def ended(self) -> int:
        return self.completed + self.failed


@attrs.frozen(kw_only=True)
class BacklogRow:
    """One job type's queued and running jobs in one queue (`HistoryRole.backlog`)."""

    queue: str
    type: str
    #: Pending or waiting to retry, released by their dependencies (due or
    #: not); jobs still waiting for their dependencies are not counted.
    queued: int
    running: int
    #: The earliest ``run_at`` (wall clock) of its due jobs: pending or
    #: retry_wait, released by their dependencies, ``run_at`` passed; its
    #: age is how long the oldest due job has waited. None if none is due.
    oldest_due: float | None


def duration_slot(seconds: float) -> int:
    """The histogram count an attempt of `seconds` goes into."""
    return bisect.bisect_left(DURATION_BOUNDS, seconds)


def bucket_start(t: float, step: float) -> float:
    """The start of the `step`-second bucket wall time `t` falls in."""
    return math.floor(t / step) * step


def percentile(durations: Sequence[int], q: float) -> float | None:
    """The `q` quantile (0 to 1) of a duration histogram, interpolated
    linearly inside its bucket (as Prometheus' ``histogram_quantile``);
    None for an empty one. One in the overflow bucket is the last bound."""
    total = sum(durations)
    if total == 0:
        return None
    rank = q * total
    seen = 0
    for i, n in enumerate(durations):
        if n and seen + n >= rank:
            if i == len(DURATION_BOUNDS):
                return DURATION_BOUNDS[-1]
            low = DURATION_BOUNDS[i - 1] if i else 0.0
            high = DURATION_BOUNDS[i]
            return low + (high - low) * max(rank - seen, 0.0) / n
        seen += n
    return DURATION_BOUNDS[-1]


def sum_durations(rows: Iterable[HistoryRow]) -> tuple[int, ...]:
    """The histograms of `rows` added up."""
    total = [0] * DURATION_SLOTS
    for row in rows:
        for i, n in enumerate(row.durations):
            total[i] += n
    return tuple(total)


class HistoryFold:
    """Ended attempts counted in memory, by `FOLD_STEP` bucket, queue and job type.

    A worker adds each attempt its jobs end (`add`: a dict update, no I/O)
    and hands what it folded to its store now and then (`take`); what a
    failed write gives back is folded in again (`merge`), so a store that
    is down for a while loses nothing.
    """

    def __init__(self) -> None:
        # (start, queue, type) -> [completed, failed, *durations]
        self._cells: dict[tuple[float, str, str], list[int]] = {}

    def __bool__(self) -> bool:
        return bool(self._cells)

    def add(self, at: float, queue: str, type: str, ok: bool, seconds: float) -> None:
        """Count an attempt of job type `type` in `queue` that ended at wall
        time `at` after `seconds`: completed if `ok`, else failed."""
        key = (at - at % FOLD_STEP, queue, type)
        cell = self._cells.get(key)
        if cell is None:
            cell = self._cells[key] = [0] * (2 + DURATION_SLOTS)
        cell[0 if ok else 1] += 1
        cell[2 + bisect.bisect_left(DURATION_BOUNDS, seconds)] += 1

    def merge(self, rows: Iterable[HistoryRow]) -> None:
        """Fold rows back in (a write that failed)."""
        for row in rows:
            key = (row.start, row.queue, row.type)
            cell = self._cells.get(key)
            if cell is None:
                cell = self._cells[key] = [0] * (2 + DURATION_SLOTS)
            cell[0] += row.completed
            cell[1] += row.failed
            for i, n in enumerate(row.durations):
                cell[2 + i] += n

    def take(self) -> list[HistoryRow]:
        """What was folded, as `FOLD_STEP` rows sorted by key, and start afresh."""
        cells, self._cells = self._cells, {}
        return [
            HistoryRow(
                step=FOLD_STEP,
                start=start,
                queue=queue,
                type=type,
                completed=cell[0],
                failed=cell[1],
                durations=tuple(cell[2:]),
            )
            for (start, queue, type), cell in sorted(cells.items())
        ]


def rows_per_step(rows: Iterable[HistoryRow]) -> list[HistoryRow]:
    """`FOLD_STEP` rows as the rows of every one of `HISTORY_STEPS` they add
    to, each key once (summed), sorted by ``(step, start, queue, type)``:
    what a store upserts, in an order every writer shares (no deadlock)."""
    cells: dict[tuple[float, float, str, str], list[int]] = {}
    for row in rows:
        for step in HISTORY_STEPS:
            key = (step, bucket_start(row.start, step), row.queue, row.type)
            cell = cells.get(key)
            if cell is None:
                cell = cells[key] = [0] * (2 + DURATION_SLOTS)
            cell[0] += row.completed
            cell[1] += row.failed
            for i, n in enumerate(row.durations):
                cell[2 + i] += n
    return [
        HistoryRow(
            step=step,
            start=start,
            queue=queue,
            type=type,
            completed=cell[0],
            failed=cell[1],
            durations=tuple(cell[2:]),
        )
        for (step, start, queue, type), cell in sorted(cells.items())
    ]


def check_history_rows(rows: Sequence[HistoryRow]) -> None:
    """Refuse rows a worker cannot have folded (a `ValueError` naming one)."""
    for row in rows:
        if (
            row.step != FOLD_STEP
            or row.start % FOLD_STEP
            or len(row.durations) != DURATION_SLOTS
            or min(row.completed, row.failed, *row.durations) < 0
            or sum(row.durations) != row.ended
        ):
            raise ValueError(f"not a {FOLD_STEP:g}-second history row: {row!r}")


class HistoryTable:
    """The history rows of every step, in memory: what the ``memory`` store
    keeps, and an in-process scheduler's `LocalClient` too."""

    def __init__(self) -> None:
        self._rows: dict[tuple[float, float, str, str], HistoryRow] = {}

    def add(self, rows: Sequence[HistoryRow], now: float) -> None:
        """Add `FOLD_STEP` rows to every step's rows; drop those kept long
        enough (`HISTORY_KEEP`) as of wall time `now`."""
        for row in rows_per_step(rows):
            key = (row.step, row.start, row.queue, row.type)
            old = self._rows.get(key)
            self._rows[key] = row if old is None else _added(old, row)
        self.prune(now)

    def prune(self, now: float) -> None:
        """Drop the rows older than their step's `HISTORY_KEEP`."""
        old = [
            key
            for key, row in self._rows.items()
            if row.start + row.step <= now - HISTORY_KEEP[row.step]
        ]
        for key in old:
            del self._rows[key]

    def read(self, step: float, since: float, type: str | None, queue: str | None) -> HistoryRead:
        """`HistoryRole.history` over these rows."""
        buckets: dict[float, list[int]] = {}
        types: dict[str, HistoryRow] = {}
        for row in self._rows.values():
            if row.step != step or row.start < since:
                continue
            if (type is not None and row.type != type) or (
                queue is not None and row.queue != queue
            ):
                continue
            counts = buckets.setdefault(row.start, [0, 0])
            counts[0] += row.completed
            counts[1] += row.failed
            old = types.get(row.type)
            if old is None:
                types[row.type] = attrs.evolve(row, start=since, queue=queue or "*")
            else:
                types[row.type] = _added(old, row)
        return (
            [(start, c[0], c[1]) for start, c in sorted(buckets.items())],
            [types[name] for name in sorted(types)],
        )


def _added(old: HistoryRow, row: HistoryRow) -> HistoryRow:
    """`old` with `row`'s counts added."""
    return attrs.evolve(
        old,
        completed=old.completed + row.completed,
        failed=old.failed + row.failed,
        durations=tuple(a + b for a, b in zip(old.durations, row.durations, strict=True)),
    )
