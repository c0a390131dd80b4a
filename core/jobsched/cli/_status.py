"""``jobsched status --store URL``: a durable store's newest jobs, its totals, its schedules.

The same columns and the same JSON on every durable store (an SQLite file in
either mode, PostgreSQL): one page of jobs read through the store's
`jobsched.store.StoreReader` role, the totals from the counts the store keeps,
so a store of a million jobs is shown as fast as one of ten.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import attrs

from .. import (
    JobInfo,
    JobStatus,
    PluginManager,
    ScheduleInfo,
    SchedulerError,
    StoreError,
    WorkerRecord,
)
from ..store import (
    UNSERVED_SCAN,
    BadRowError,
    SharedJobRow,
    StoreContext,
    StoreReader,
    as_store_reader,
    new_worker_id,
    offers,
    resolve_store,
)
from ._common import BadInput, configure_logging, make_console, print_json
from ._operate import describe_trigger, status_list
from ._schedules import schedule_json

#: Jobs shown when no ``--limit`` is given, and the most ``--limit`` takes.
DEFAULT_LIMIT = 50
MAX_LIMIT = 1000
#: Characters of a result or error shown in the table (``--json`` has all of it).
DETAIL_CHARS = 200
_STATUSES = tuple(s.value for s in JobStatus)


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "status",
        help="show a store's newest jobs, its totals and its schedules",
        description="Show the newest jobs a durable store holds (an SQLite file, whichever "
        "process wrote it, or PostgreSQL): their id in the job file, job id, type, status, "
        "attempts, when they run next, the worker holding them and their result or error; "
        f"at most --limit jobs (default {DEFAULT_LIMIT}), newest first; then the jobs per "
        "status, how many jobs match (and how many more than shown) and the recurring "
        "schedules. Reads only: it works "
        "while workers or a run use the store. A job shown as running whose process died "
        "runs again (when its lease expires, or when the run is started again).",
        epilog="Exit codes: 0 shown; 2 bad input: an unknown status, a bad --type or "
        "--limit, or a store that cannot be read (the message says why).",
    )
    parser.add_argument(
        "--store", metavar="URL", required=True, help="the store, e.g. sqlite:///jobs.db"
    )
    parser.add_argument(
        "--status",
        dest="statuses",
        action="append",
        metavar="STATUS[,STATUS]",
        type=status_list(_STATUSES, "a job can be in"),
        help=f"only jobs in these statuses (repeatable): {', '.join(_STATUSES)}",
    )
    parser.add_argument(
        "--type",
        dest="job_type",
        metavar="TYPE",
        type=_job_type,
        help=("only jobs of this job type"),
    )
    parser.add_argument(
        "--limit",
        type=_limit,
        default=DEFAULT_LIMIT,
        metavar="N",
        help=f"show the newest N matching jobs (default {DEFAULT_LIMIT}, at most {MAX_LIMIT})",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object: the counts, the jobs shown and the schedules (docs/cli.md)",
    )
    parser.add_argument(
        "--metrics",
        action="store_true",
        help="print the store's jobs per status as Prometheus text "
        "(jobsched_store_jobs{status}; the prometheus plugin, docs/observability.md)",
    )
    parser.set_defaults(handler=status_command)


def _shown(text: str) -> str:
    """`text` as an error message repeats it: at most 40 characters."""
    return repr(text) if len(text) <= 40 else repr(text[:40]) + "..."


def _job_type(text: str) -> str:
    if not text.strip() or "\x00" in text:
        raise argparse.ArgumentTypeError(f"{_shown(text)} is not a job type name")
    return text


def _limit(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_LIMIT:
        raise argparse.ArgumentTypeError(
            f"{_shown(text)} is not a number of jobs from 1 to {MAX_LIMIT}"
        )
    return value


@attrs.frozen(kw_only=True)
class StoreView:
    """What ``jobsched status`` shows: one page of jobs and the store's totals."""

    url: str
    #: Jobs per status, every status present.
    counts: dict[str, int]
    #: The newest matching jobs, newest first.
    jobs: list[JobInfo]
    #: How many jobs match the filters in all.
    matching: int
    schedules: list[ScheduleInfo]
    #: When the store was read (wall clock).
    at: float
    #: Due jobs per job type that no live worker registered: they wait for a
    #: worker that knows their type (a store with a worker registry only).
    unserved: dict[str, int] = attrs.field(factory=dict)


def status_command(args: argparse.Namespace, plugins: PluginManager) -> int:
    configure_logging("console", "warning")
    if args.metrics:
        from ._metrics import prometheus_plugin

        plugin = prometheus_plugin(plugins, "--metrics")
        counts = asyncio.run(read_counts(args.store, plugins))
        sys.stdout.write(plugin.store_metrics_text(counts))
        return 0
    statuses = None
    if args.statuses is not None:
        statuses = list(dict.fromkeys(s for group in args.statuses for s in group))
    view = asyncio.run(read_view(args.store, plugins, statuses, args.job_type, args.limit))
    if args.json:
        print_json(status_json(view, statuses, args.job_type, args.limit))
    else:
        filtered = statuses is not None or args.job_type is not None
        print_status(view, limit=args.limit, filtered=filtered)
    return 0


@contextlib.asynccontextmanager
async def _reading(url: str, plugins: PluginManager) -> AsyncIterator[StoreReader]:
    """The store at `url` open for reading: it creates, migrates and locks nothing."""
    try:
        store = resolve_store(url, plugins)
    except SchedulerError as exc:
        raise BadInput(str(exc)) from None
    if store is None or not store.durable:
        raise BadInput(f"store {url!r} is not durable: it holds no jobs to show")
    try:
        reader = as_store_reader(store)
    except TypeError as exc:
        raise BadInput(f"--store {url!r}: {exc}") from None
    await reader.open(StoreContext(worker_id=new_worker_id(), readonly=True, load=False))
    try:
        yield reader
    finally:
        await reader.close()


def _every_status(kept: dict[str, int]) -> dict[str, int]:
    counts = dict.fromkeys(_STATUSES, 0)
    counts.update(kept)
    return counts


async def read_counts(url: str, plugins: PluginManager) -> dict[str, int]:
    """The jobs per status of the store at `url`, every status present."""
    async with _reading(url, plugins) as reader:
        return _every_status(await reader.counts())


async def read_view(
    url: str, plugins: PluginManager, statuses: list[str] | None, job_type: str | None, limit: int
) -> StoreView:
    """One page of the store at `url` (the newest `limit` matching jobs) and its totals."""
    async with _reading(url, plugins) as reader:
        rows, matching = await reader.page(statuses, job_type, None, limit, 0)
        counts = _every_status(await reader.counts())
        schedules = await reader.schedules()
        unserved = await _unserved(reader)
    now = time.time()
    return StoreView(
        url=url,
        counts=counts,
        jobs=[_info(url, row) for row in rows],
        matching=matching,
        schedules=[ScheduleInfo.from_row(row, now) for row in schedules],
        at=now,
        unserved=unserved,
    )


async def _unserved(reader: StoreReader) -> dict[str, int]:
    """Due jobs per job type no live worker of the registry runs (`Stats.unserved`)."""
    if not offers(reader, "workers"):
        return {}
    try:
        rows, now = await reader.workers()  # type: ignore[attr-defined]
        live = [WorkerRecord.from_row(row, now) for row in rows]
        known = sorted({t for w in live if not w.lost for t in w.job_types})
        found: dict[str, int] = await reader.unserved_types(  # type: ignore[attr-defined]
            known, UNSERVED_SCAN
        )
    except BadRowError:
        raise
    except StoreError:
        # Read-only, nothing is migrated: a store from before the registry
        # has none to tell (its first worker of this version adds it).
        return {}
    return dict(sorted(found.items()))


def _info(url: str, row: SharedJobRow) -> JobInfo:
    try:
        return JobInfo.from_row(row)
    except (TypeError, ValueError) as exc:  # a row changed by hand
        raise StoreError(f"{url}: job {row.job_id} cannot be read: {exc}") from None


def job_json(info: JobInfo, now: float) -> dict[str, Any]:
    """One job of ``status --json``."""
    progress = info.progress
    return {
        "id": info.key,
        "job_id": info.job_id,
        "type": info.type,
        "status": info.status.value,
        "attempts": info.attempts,
        "run_at": info.run_at,
        "submitted_at": info.submitted_at,
        "started_at": info.started_at,
        "finished_at": info.finished_at,
        "trigger_rule": info.trigger_rule,
        "group": info.group,
        "result": info.result,
        "error": info.last_error,
        "traceback": info.traceback,
        "build_refusals": info.build_refusals,
        "last_refusal": info.last_refusal,
        "schedule_id": info.schedule_id,
        "held_by": info.lease_owner,
        "lease_expires_in": None
        if info.lease_expires is None
        else round(info.lease_expires - now, 3),
        "submitted_by": info.submitted_by,
        "progress": None if progress is None else attrs.asdict(progress),
        "args": dict(info.args),
        "options": dict(info.options),
    }


def status_json(
    view: StoreView, statuses: list[str] | None, job_type: str | None, limit: int
) -> dict[str, Any]:
    """The stable ``status --json`` document (docs/cli.md)."""
    return {
        "store": view.url,
        "counts": view.counts,
        "filters": {"status": statuses, "type": job_type},
        "limit": limit,
        "matching": view.matching,
        "jobs": [job_json(info, view.at) for info in view.jobs],
        "schedules": [schedule_json(info) for info in view.schedules],
        "waiting_for_worker": view.unserved,
    }


def _when(wall: float | None) -> str:
    if wall is None:
        return "-"
    return datetime.datetime.fromtimestamp(wall).isoformat(sep=" ", timespec="seconds")


def _detail(info: JobInfo) -> str:
    if info.status is JobStatus.COMPLETED:
        value = info.result
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    else:
        text = info.last_error or "-"
    return text if len(text) <= DETAIL_CHARS else text[: DETAIL_CHARS - 1] + "…"


def _held_by(info: JobInfo, now: float) -> str:
    if info.lease_owner is None:
        return "-"
    if info.lease_expires is None:
        return info.lease_owner
    return f"{info.lease_owner} ({info.lease_expires - now:.1f}s)"


def print_status(view: StoreView, *, limit: int, filtered: bool) -> None:
    from rich import box
    from rich.table import Table
    from rich.text import Text

    console = make_console()
    waiting = (JobStatus.PENDING, JobStatus.RETRY_WAIT)
    if view.jobs:
        table = Table(box=box.SIMPLE_HEAD, header_style="bold", pad_edge=False, show_edge=False)
        for column in COLUMNS:
            table.add_column(column, justify="right" if column == "ATTEMPTS" else "left")
        for info in view.jobs:
            table.add_row(
                *(
                    Text(cell)
                    for cell in (
                        info.key or "-",
                        info.job_id,
                        info.type,
                        info.status.value,
                        str(info.attempts),
                        _when(info.run_at) if info.status in waiting else "-",
                        _held_by(info, view.at),
                        _detail(info),
                    )
                )
            )
        console.print(table)
    total = sum(view.counts.values())
    parts = ", ".join(f"{n} {status.replace('_', ' ')}" for status, n in view.counts.items() if n)
    console.print(
        f"{total} job{'s' if total != 1 else ''} in {view.url}{': ' + parts if parts else ''}",
        markup=False,
    )
    matching = "matching jobs" if filtered else "jobs"
    more = view.matching - len(view.jobs)
    if more > 0:
        how = f"--limit N shows up to {MAX_LIMIT}, " if limit < MAX_LIMIT else ""
        console.print(
            f"showing the newest {len(view.jobs)} of {view.matching} {matching}; {more} more: "
            f"{how}--status and --type narrow the list",
            markup=False,
            soft_wrap=True,
        )
    elif filtered:
        console.print(f"{view.matching} {matching}", markup=False)
    for job_type, n in view.unserved.items():
        console.print(
            f"{n} due job{'s' if n != 1 else ''} of type {job_type!r} "
            f"wait{'' if n != 1 else 's'} for a worker: no live "
            f"worker runs job type {job_type!r} (start one that registers it; jobsched workers "
            "lists what each worker runs)",
            markup=False,
            soft_wrap=True,
        )
    if view.schedules:
        schedules = Table(box=box.SIMPLE_HEAD, header_style="bold", pad_edge=False, show_edge=False)
        for column in SCHEDULE_COLUMNS:
            schedules.add_column(column, justify="right" if column == "FIRED" else "left")
        for s in view.schedules:
            state = "ended" if not s.active else "paused" if s.paused else "active"
            schedules.add_row(
                *(
                    Text(cell)
                    for cell in (
                        s.schedule_id,
                        s.name or "-",
                        s.type or "-",
                        describe_trigger(dict(s.trigger)),
                        "-" if s.next_run is None or not s.active else _when(s.next_run),
                        str(s.fired),
                        state,
                    )
                )
            )
        console.print(schedules)


#: The table's columns, the same on every store.
COLUMNS = ("ID", "JOB ID", "TYPE", "STATUS", "ATTEMPTS", "NEXT RUN", "HELD BY", "RESULT / ERROR")
SCHEDULE_COLUMNS = ("SCHEDULE", "NAME", "TYPE", "TRIGGER", "NEXT RUN", "FIRED", "STATE")
