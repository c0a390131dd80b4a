"""``jobsched worker --store URL``, and ``status``/``run`` on shared stores.

Several worker processes, on any number of hosts, serve one shared store
(PostgreSQL). Each process is known by its identity, ``host:pid``, in the
store (``lease_owner``) and in its log lines (``process=``).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import time
from typing import Any

from .._errors import SchedulerError
from .._plugins import PluginManager
from .._shared import process_identity, run_worker
from .._store import StoreContext, offers_shared, resolve_store
from ._common import (
    BadInput,
    add_logging_options,
    configure_logging,
    load_plugins,
    make_console,
    print_json,
)


def add_parser(subparsers: Any) -> None:
    worker = subparsers.add_parser(
        "worker",
        help="run jobs from a shared store until stopped",
        description="Serve a shared store's queue: claim due jobs in strategy order with a "
        "lease, run them, record the results. Start one per host (or several); a process "
        "that dies loses its leases and its jobs run again elsewhere (at-least-once). "
        "SIGINT/SIGTERM stop it gracefully: running jobs finish, unstarted ones go back.",
    )
    worker.add_argument(
        "--store",
        required=True,
        metavar="URL",
        help="postgresql://user@host/db, or sqlite:////abs/path/jobs.db (one host)",
    )
    worker.add_argument(
        "--workers", type=int, default=4, metavar="N", help="jobs run at once (default: 4)"
    )
    worker.add_argument(
        "--strategy", default="priority", help="the ordering strategy (default: priority)"
    )
    worker.add_argument(
        "--grace",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="on SIGINT/SIGTERM, how long running jobs may finish before they are "
        "interrupted and handed back to the queue (default: 30)",
    )
    add_logging_options(worker, default_level="info")
    worker.set_defaults(handler=worker_command)


def _shared_store(url: str, plugins: PluginManager) -> Any:
    try:
        store = resolve_store(url, plugins)
    except SchedulerError as exc:
        raise BadInput(str(exc)) from None
    if store is None or not offers_shared(store):
        raise BadInput(
            f"--store {url!r} is not a store several processes can share "
            "(postgresql://host/db or sqlite:////abs/path/jobs.db)"
        )
    return store


def worker_command(args: argparse.Namespace) -> int:
    configure_logging(args.log_format, args.log_level)
    if args.workers < 1:
        raise BadInput(f"--workers must be at least 1, got {args.workers}")
    plugins = load_plugins()
    store = _shared_store(args.store, plugins)
    asyncio.run(
        run_worker(
            store,
            workers=args.workers,
            plugins=plugins,
            strategy=args.strategy,
            grace=max(0.0, args.grace),
        )
    )
    return 0


def is_shared(url: str, plugins: PluginManager) -> bool:
    """Whether `url` names a shared store (building a store does not connect)."""
    try:
        store = resolve_store(url, plugins)
    except SchedulerError:
        return False  # the durable-store path reports the problem
    return bool(getattr(store, "shared", False))


def shared_status(url: str, *, as_json: bool) -> int:
    """``jobsched status --store postgresql://...``: every job and who holds it."""
    configure_logging("console", "warning")
    plugins = load_plugins()
    store = _shared_store(url, plugins)
    rows = asyncio.run(_read(store))
    now = time.time()
    if as_json:
        print_json(
            [
                {
                    "id": r.job_id,
                    "key": r.key,
                    "type": r.type,
                    "status": r.status,
                    "attempts": r.attempts,
                    "held_by": r.lease_owner,
                    "lease_expires_in": None
                    if r.lease_expires is None
                    else round(r.lease_expires - now, 3),
                    "submitted_by": r.submitted_by,
                    "error": r.last_error,
                    "result": r.result,
                }
                for r in rows
            ]
        )
        return 0
    from rich import box
    from rich.table import Table

    console = make_console()
    table = Table(box=box.SIMPLE_HEAD, header_style="bold", pad_edge=False, show_edge=False)
    for column in ("ID", "TYPE", "STATUS", "ATTEMPTS", "HELD BY", "LEASE", "ERROR"):
        table.add_column(column, overflow="fold")
    for r in rows:
        lease = "-" if r.lease_expires is None else f"{r.lease_expires - now:.1f}s"
        table.add_row(
            r.job_id,
            r.type,
            r.status,
            str(r.attempts),
            r.lease_owner or "-",
            lease,
            r.last_error or "-",
        )
    console.print(table)
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.status] = counts.get(r.status, 0) + 1
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no jobs"
    console.print(f"{len(rows)} jobs in {store.url}: {summary}", markup=False)
    return 0


async def _read(store: Any) -> list[Any]:
    await store.open(StoreContext(worker_id=process_identity(), readonly=True))
    try:
        return list(await store.jobs())
    finally:
        await store.close()


# ── jobsched run FILE --store URL ─────────────────────────────────────
def _same(job: Any) -> Any:
    return job


def run_shared(
    jobfile: Any, plugins: PluginManager, url: str, *, as_json: bool, all_rows: bool = False
) -> int:
    """Submit a job file to a shared store and follow it until every job is finished.

    This process only submits and watches; worker processes (``jobsched
    worker``) run the jobs. Each job's key is ``<file>#<id>``, so running the
    same file again after a crash resumes its jobs instead of duplicating them.
    """
    from ._run import print_summary

    for rec in jobfile.recurring:
        # Shared schedules coalesce missed periods into one fire and have no jitter.
        unsupported = [
            name
            for name, used in (
                ("misfire_grace_time", rec.misfire_grace_time is not None),
                ("coalesce", rec.coalesce != "one"),
                ("jitter", bool(rec.jitter)),
            )
            if used
        ]
        if unsupported:
            raise BadInput(
                f"{jobfile.source}: {rec.label}: {', '.join(unsupported)} "
                "not supported with a shared store (--store postgresql://...); missed "
                "periods coalesce into one run"
            )
    _shared_store(url, plugins)  # a clear error before anything is submitted
    result = asyncio.run(_follow(jobfile, plugins, url))
    if as_json:
        print_json(result.to_json())
    else:
        print_summary(make_console(), result, all_rows=all_rows)
    return int(result.exit_code)


async def _follow(jobfile: Any, plugins: PluginManager, url: str) -> Any:
    from pathlib import Path

    from .._jobtypes import build_job
    from .._scheduler import JobScheduler
    from .._status import JobStatus
    from ..jobfile._run import JobOutcome, RunResult

    settings = jobfile.scheduler
    limits = jobfile.tables.get("limits")
    # The file's [limits] become the cluster's (or must match them: docs/limits.md).
    scheduler = JobScheduler(
        settings.strategy,
        num_workers=settings.workers,
        plugins=plugins,
        store=url,
        limits=limits.limits() if limits is not None else None,
    )
    shared = scheduler._shared
    assert shared is not None
    shared.claims = False
    source = str(Path(jobfile.source).resolve())
    start = time.monotonic()
    await scheduler.start()
    try:
        ids: dict[str, str] = {}
        for entry in jobfile.submit_order:
            job = build_job(
                entry.type,
                entry.args,
                plugins=plugins,
                label=entry.label,
                **entry.job_options(start),
            )
            ids[entry.id] = scheduler.submit(
                job,
                delay=entry.delay,
                depends_on=[ids[d] for d in entry.depends_on],
                key=f"{source}#{entry.id}",
            )
        await shared._drain_writes()
        ids = {entry_id: shared.aliases.get(job_id, job_id) for entry_id, job_id in ids.items()}
        loop = asyncio.get_running_loop()
        for entry in jobfile.jobs:
            if entry.cancel_after is not None:
                loop.call_later(entry.cancel_after, scheduler.cancel, ids[entry.id])
        # [[recurring]]: shared schedules keyed by FILE#ID (running the file
        # again resumes them: a schedule that already ended fires no more).
        schedules: list[tuple[Any, str]] = []
        for rec in jobfile.recurring:
            template = build_job(
                rec.type, rec.args, plugins=plugins, label=rec.label, **rec.job_options(start)
            )
            schedule_id = shared.schedule_recurring(
                functools.partial(_same, template),
                rec.every,
                start_in=rec.start_in,
                allow_overlap=rec.allow_overlap,
                trigger=rec.trigger,
                times=rec.times,
                key=f"{source}#{rec.id}",
            )
            schedules.append((rec, schedule_id))
            if rec.until is not None:
                loop.call_later(rec.until, scheduler.cancel_recurring, schedule_id)
        fired: dict[str, list[Any]] = {}
        for rec, schedule_id in schedules:
            await shared.wait_schedule(schedule_id)
            fired[rec.id] = await shared.store.schedule_jobs(schedule_id)
            shared._submitted.update(r.job_id for r in fired[rec.id])
        await scheduler.join()
        rows = {r.job_id: r for r in await shared.store.jobs(list(ids.values()))}
        for rec_id, runs in fired.items():
            done = {r.job_id: r for r in await shared.store.jobs([r.job_id for r in runs])}
            fired[rec_id] = [done[r.job_id] for r in runs]
    finally:
        await scheduler.stop()
    entries = {entry.id: entry for entry in jobfile.jobs}
    names = {job_id: entry_id for entry_id, job_id in ids.items()}

    def readable(error: str | None) -> str | None:
        # Errors name upstream jobs by job id; the file's reader knows its own ids.
        if error is None:
            return None
        for job_id, entry_id in names.items():
            error = error.replace(job_id, repr(entry_id))
        return error

    runs = [row for row in rows.values() if row.started_at is not None]
    runs += [row for fired_rows in fired.values() for row in fired_rows if row.started_at]
    # The store records when each job (last) started: that order is the start order.
    start_order = {
        row.job_id: n
        for n, row in enumerate(sorted(runs, key=lambda r: (r.started_at, r.job_id)), start=1)
    }

    def outcome(entry_id: str, type_: str, row: Any, recurring: str | None) -> Any:
        duration = (
            row.finished_at - row.started_at
            if row.finished_at is not None and row.started_at is not None
            else None
        )
        return JobOutcome(
            id=entry_id,
            type=type_,
            job_id=row.job_id,
            status=JobStatus(row.status),
            attempts=row.attempts,
            duration=duration,
            result=row.result,
            error=readable(row.last_error),
            recurring=recurring,
            start_order=start_order.get(row.job_id),
        )

    outcomes = [
        outcome(entry_id, entries[entry_id].type, rows[job_id], None)
        for entry_id, job_id in ids.items()
    ]
    for rec in jobfile.recurring:
        outcomes.extend(
            outcome(f"{rec.id}#{n}", rec.type, row, rec.id)
            for n, row in enumerate(fired.get(rec.id, []), start=1)
        )
    return RunResult(
        source=jobfile.source,
        strategy=settings.strategy,
        workers=settings.workers,
        outcomes=outcomes,
        elapsed=time.monotonic() - start,
        # Worker processes ran the jobs: how many ran at once is theirs to know.
        peak_running=None,
    )
