"""``jobsched status --store URL``: every job a durable store holds, and its state."""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import sys
from collections import Counter
from collections.abc import Callable
from typing import Any

from .. import JobStatus, PluginManager
from ..store import JobRow, ScheduleRow, Snapshot, StoreError, decode_result, read_store
from ._common import BadInput, make_console, print_json


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "status",
        help="show every job a store holds and its state",
        description="Show every job a durable store holds (e.g. what `jobsched run FILE "
        "--store URL` left there): its id in the job file, job id, type, status, attempts, "
        "when it runs next and its result or error; then the recurring schedules. Reads "
        "only: it works while a run is using the store. A job shown as running whose "
        "process died runs again when the run is started again.",
        epilog="Exit codes: 0 shown; 2 the store cannot be read (the message says why).",
    )
    parser.add_argument(
        "--store", metavar="URL", required=True, help="the store, e.g. sqlite:///jobs.db"
    )
    parser.add_argument("--json", action="store_true", help="print a JSON object (docs/cli.md)")
    parser.add_argument(
        "--metrics",
        action="store_true",
        help="print the store's jobs per status as Prometheus text "
        "(jobsched_store_jobs{status}; the prometheus plugin, docs/observability.md)",
    )
    parser.set_defaults(handler=status_command)


def status_command(args: argparse.Namespace, plugins: PluginManager) -> int:
    from ._worker import is_shared, shared_status

    if args.metrics:
        return _print_metrics(args.store, plugins, shared=is_shared(args.store, plugins))
    if is_shared(args.store, plugins):  # postgresql://: several processes
        return shared_status(args.store, plugins, as_json=args.json)
    snapshot = asyncio.run(read_store(args.store, plugins))
    if snapshot is None:
        raise BadInput(f"store {args.store!r} is not durable: it holds no jobs to show")
    if args.json:
        print_json(status_json(args.store, snapshot))
        return 0
    print_status(args.store, snapshot)
    return 0


def _print_metrics(url: str, plugins: PluginManager, *, shared: bool) -> int:
    from ._metrics import prometheus_plugin

    plugin = prometheus_plugin(plugins, "--metrics")
    if shared:
        from ._worker import store_counts

        counts = store_counts(url, plugins)
    else:
        snapshot = asyncio.run(read_store(url, plugins))
        if snapshot is None:
            raise BadInput(f"store {url!r} is not durable: it holds no jobs to count")
        counts = _counts(snapshot)
    sys.stdout.write(plugin.store_metrics_text(counts))
    return 0


def _decoded(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def job_json(row: JobRow) -> dict[str, Any]:
    """One job of ``status --json``."""
    return {
        "id": row.key,
        "job_id": row.job_id,
        "type": row.type,
        "status": row.status,
        "attempts": row.attempts,
        "run_at": row.run_at,
        "submitted_at": row.submitted_at,
        "finished_at": row.finished_at,
        "depends_on": list(row.depends_on),
        "trigger_rule": row.trigger_rule,
        "result": decode_result(row.result),
        "error": row.last_error,
        "schedule_id": row.schedule_id,
        "args": _decoded(row.args),
        "options": _decoded(row.options),
    }


def schedule_json(row: ScheduleRow) -> dict[str, Any]:
    """One recurring schedule of ``status --json``."""
    return {
        "id": row.key,
        "schedule_id": row.schedule_id,
        "trigger": _decoded(row.trigger),
        "next_run": row.next_run,
        "active": row.active,
        "allow_overlap": row.allow_overlap,
        "fired": row.fired,
        "skipped": row.skipped,
        "last_job_id": row.last_job_id,
        "paused": row.paused,
    }


def _counts(snapshot: Snapshot) -> dict[str, int]:
    found = Counter(row.status for row in snapshot.jobs)
    return {s.value: found.get(s.value, 0) for s in JobStatus}


def status_json(url: str, snapshot: Snapshot) -> dict[str, Any]:
    """The stable ``status --json`` document (docs/cli.md)."""
    return {
        "store": url,
        "counts": _counts(snapshot),
        "jobs": [_checked(url, f"job {row.job_id}", job_json, row) for row in snapshot.jobs],
        "schedules": [
            _checked(url, f"recurring schedule {row.schedule_id}", schedule_json, row)
            for row in snapshot.schedules
        ],
    }


def _checked(url: str, what: str, to_json: Callable[[Any], dict[str, Any]], row: Any) -> Any:
    # Rows were checked when the store was read; their arguments and options
    # are decoded only here, so a row changed by hand is still named, not a crash.
    try:
        return to_json(row)
    except ValueError as exc:
        raise StoreError(f"{url}: {what} has a column that is not JSON: {exc}") from None


def _when(wall: float | None) -> str:
    if wall is None:
        return "-"
    return datetime.datetime.fromtimestamp(wall).isoformat(sep=" ", timespec="seconds")


def print_status(url: str, snapshot: Snapshot) -> None:
    from rich import box
    from rich.table import Table
    from rich.text import Text

    console = make_console()
    table = Table(box=box.SIMPLE_HEAD, header_style="bold", pad_edge=False, show_edge=False)
    for column in ("ID", "JOB ID", "TYPE", "STATUS", "ATTEMPTS", "NEXT RUN", "RESULT / ERROR"):
        table.add_column(column, justify="right" if column == "ATTEMPTS" else "left")
    for row in snapshot.jobs:
        waiting = row.status in (JobStatus.PENDING.value, JobStatus.RETRY_WAIT.value)
        detail = row.result if row.status == JobStatus.COMPLETED.value else row.last_error
        table.add_row(
            row.key or "-",
            row.job_id,
            row.type,
            row.status,
            str(row.attempts),
            _when(row.run_at) if waiting else "-",
            Text("-" if detail is None else detail),
        )
    if snapshot.jobs:
        console.print(table)
    counts = _counts(snapshot)
    parts = ", ".join(f"{n} {status.replace('_', ' ')}" for status, n in counts.items() if n)
    total = len(snapshot.jobs)
    console.print(
        f"{total} job{'s' if total != 1 else ''} in {url}{': ' + parts if parts else ''}",
        markup=False,
    )
    if snapshot.schedules:
        schedules = Table(box=box.SIMPLE_HEAD, header_style="bold", pad_edge=False, show_edge=False)
        for column in ("ID", "SCHEDULE", "TRIGGER", "NEXT RUN", "FIRED", "STATE"):
            schedules.add_column(column)
        for srow in snapshot.schedules:
            trigger = (_decoded(srow.trigger) or {}).get("trigger", {})
            every = trigger.get("interval") if isinstance(trigger, dict) else None
            schedules.add_row(
                srow.key or "-",
                srow.schedule_id,
                f"every {every:g}s" if isinstance(every, int | float) else json.dumps(trigger),
                _when(srow.next_run) if srow.active else "-",
                str(srow.fired),
                "active" if srow.active else "ended",
            )
        console.print(schedules)
