"""``jobsched worker --store URL``, and ``run`` on shared stores.

Several worker processes, on any number of hosts, serve one shared store
(PostgreSQL). Each process is known by its identity, ``host:pid``, in the
store (``lease_owner``) and in its log lines (``process=``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import threading
import time
from typing import Any

import structlog

from .. import MAX_WORKERS, PluginManager, SchedulerError, check_queue
from ..store import (
    MAX_BUILD_REFUSALS,
    MAX_LEASE_EXPIRIES,
    SHARED_ROLES,
    SharedStore,
    as_shared_store,
    offers_a_role,
    require_roles,
    resolve_store,
)
from ..worker import run_worker
from ._common import (
    BadInput,
    add_import_option,
    add_logging_options,
    configure_logging,
    make_console,
    parse_duration,
    print_json,
)
from ._metrics import add_metrics_options, start_metrics
from ._summary import print_summary


def add_parser(subparsers: Any) -> None:
    worker = subparsers.add_parser(
        "worker",
        help="run jobs from a shared store until stopped",
        description="Serve a shared store's queue: claim due jobs in strategy order with a "
        "lease, run them, record the results. Start one per host (or several); a process "
        "that dies loses its leases and its jobs run again elsewhere (at-least-once). "
        "SIGINT/SIGTERM stop it gracefully: running jobs get --grace seconds to finish, "
        "unstarted ones go back; a second signal hands the running ones back at once. "
        "`jobsched workers stop ID` asks the same through the store, from anywhere; "
        "`jobsched workers drain ID` makes it claim nothing more.",
    )
    worker.add_argument(
        "--store",
        required=True,
        metavar="URL",
        help="postgresql://user@host/db, or sqlite:////abs/path/jobs.db (one host)",
    )
    worker.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="jobs run at once, all queues together (default: 4, or the sum of the "
        "--queue concurrencies if that is more)",
    )
    worker.add_argument(
        "--queue",
        action="append",
        metavar="NAME[=N]",
        help="claim the jobs of this queue, at most N of them running at once in this "
        "worker (no =N: no limit of its own); repeat for several queues (default: the "
        "'default' queue alone; docs/queues.md)",
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
        "interrupted and handed back to the queue; a second signal does that at once "
        "(default: 30)",
    )
    worker.add_argument(
        "--block-limit",
        type=float,
        metavar="SECONDS",
        help="end the worker (exit status 4) when a job blocks its event loop longer than "
        "this, naming the job with the loop's stack; its leases expire and other workers "
        "take its jobs (default: 10, or half the store's lease if that is shorter)",
    )
    worker.add_argument(
        "--result-ttl",
        metavar="DURATION",
        help="keep a completed job's result this long (7d, 12h, 30m, 45s or seconds) unless "
        "the job sets its own result_ttl; then this worker's reaper removes it "
        "(default: keep results)",
    )
    worker.add_argument(
        "--retention",
        metavar="DURATION",
        help="delete finished jobs (and their history) this long after they finished; "
        "the reaper runs at start and about once a minute (default: keep them)",
    )
    worker.add_argument(
        "--max-lease-expiries",
        type=int,
        default=MAX_LEASE_EXPIRIES,
        metavar="N",
        help="fail a job whose lease expired N times (each worker that ran it died or "
        "stalled) instead of running it again (default: %(default)s)",
    )
    worker.add_argument(
        "--max-build-refusals",
        type=int,
        default=MAX_BUILD_REFUSALS,
        metavar="N",
        help="fail a job that N worker processes claimed and could not build from its "
        "stored arguments (they run another version of its job type; each hands it back "
        "untouched and never claims it again) (default: %(default)s)",
    )
    add_import_option(worker)
    add_metrics_options(worker)
    add_logging_options(worker, default_level="info")
    worker.set_defaults(handler=worker_command)


def _shared_store(url: str, plugins: PluginManager) -> SharedStore:
    try:
        store = resolve_store(url, plugins)
    except SchedulerError as exc:
        raise BadInput(str(exc)) from None
    if store is None or not offers_a_role(store):
        raise BadInput(
            f"--store {url!r} is not a store several processes can share "
            "(postgresql://host/db or sqlite:////abs/path/jobs.db)"
        )
    # A worker runs every role: claims, schedules, limits, cancels (exit 2 naming a missing one).
    require_roles(store, SHARED_ROLES, "jobsched worker")
    return as_shared_store(store)


def parse_queues(values: list[str] | None) -> dict[str, int | None] | None:
    """``--queue NAME[=N]`` options as ``{name: concurrency}`` (None: none given);
    a bad one is `BadInput` naming it."""
    if not values:
        return None
    queues: dict[str, int | None] = {}
    for value in values:
        name, sep, count = value.partition("=")
        limit: int | None = None
        if sep:
            if not count.strip().isdigit() or not 1 <= int(count) <= MAX_WORKERS:
                raise BadInput(
                    f"--queue {value!r}: the concurrency after '=' must be a whole number "
                    f"from 1 to {MAX_WORKERS} (--queue emails=4)"
                )
            limit = int(count)
        try:
            check_queue(name, f"--queue {value!r}: the queue name")
        except ValueError as exc:
            raise BadInput(str(exc)) from None
        if name in queues:
            raise BadInput(f"--queue {name!r} is given twice")
        queues[name] = limit
    return queues


def worker_command(args: argparse.Namespace, plugins: PluginManager) -> int:
    configure_logging(args.log_format, args.log_level)
    queues = parse_queues(args.queue)
    if args.workers is None:
        wanted = sum(n or 0 for n in (queues or {}).values())
        args.workers = min(max(4, wanted), MAX_WORKERS)
    if not 1 <= args.workers <= MAX_WORKERS:
        raise BadInput(
            f"--workers must be at least 1 and at most {MAX_WORKERS} (MAX_WORKERS), "
            f"got {args.workers}"
        )
    ttl, retention = (
        None if text is None else parse_duration(text, option)
        for text, option in ((args.result_ttl, "--result-ttl"), (args.retention, "--retention"))
    )
    if retention == 0:
        raise BadInput("--retention must be longer than 0 (leave it out to keep finished jobs)")
    if args.max_lease_expiries < 1:
        raise BadInput(f"--max-lease-expiries must be at least 1, got {args.max_lease_expiries}")
    if args.max_build_refusals < 1:
        raise BadInput(f"--max-build-refusals must be at least 1, got {args.max_build_refusals}")
    store = _shared_store(args.store, plugins)
    block_limit = args.block_limit
    if block_limit is None:
        block_limit = min(DEFAULT_BLOCK_LIMIT, store.lease_seconds / 2)
    elif not block_limit > 0:  # NaN too
        raise BadInput(f"--block-limit must be more than 0 seconds, got {args.block_limit:g}")
    start_metrics(args, plugins)
    asyncio.run(
        _serve(
            store,
            workers=args.workers,
            plugins=plugins,
            strategy=args.strategy,
            grace=max(0.0, args.grace),
            result_ttl=ttl,
            retention=retention,
            block_limit=block_limit,
            max_lease_expiries=args.max_lease_expiries,
            max_build_refusals=args.max_build_refusals,
            queues=queues,
        )
    )
    return 0


#: ``--block-limit``'s default (or half the store's lease, if that is shorter).
DEFAULT_BLOCK_LIMIT = 10.0

#: Seconds the threads left after a worker stopped get to end (idle ones end at once).
THREAD_EXIT_WAIT = 1.0


async def _serve(store: SharedStore, **options: Any) -> None:
    """`run_worker`, then an exit that no thread outlives.

    A thread job that never returns (it was handed back: a thread cannot be
    stopped) would keep the interpreter from exiting, for good. Once the
    worker has stopped and written everything, the threads get
    `THREAD_EXIT_WAIT` seconds (idle pool threads end at once); then the
    process ends without them, and a signal ends it at once.
    """
    await run_worker(store, **options)
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(ValueError):  # not the main thread
            signal.signal(sig, _exit_now)
    loop = asyncio.get_running_loop()
    deadline = time.monotonic() + THREAD_EXIT_WAIT
    executor_down = asyncio.ensure_future(loop.shutdown_default_executor())
    await asyncio.wait({executor_down}, timeout=THREAD_EXIT_WAIT)
    me = threading.current_thread()
    for thread in threading.enumerate():
        if thread is not me and not thread.daemon:
            thread.join(max(0.0, deadline - time.monotonic()))
    stuck = [t.name for t in threading.enumerate() if t is not me and not t.daemon]
    if stuck:
        structlog.get_logger("jobsched.worker").warning(
            "exiting without the threads still running", threads=", ".join(stuck)
        )
        _exit_now()


def _exit_now(*_signal: object) -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a reader that left must not keep us here
            stream.flush()
    os._exit(0)


def is_shared(url: str, plugins: PluginManager) -> bool:
    """Whether `url` names a shared store (building a store does not connect)."""
    try:
        store = resolve_store(url, plugins)
    except SchedulerError:
        return False  # the durable-store path reports the problem
    return bool(getattr(store, "shared", False))


# ── jobsched run FILE --store URL ─────────────────────────────────────
def run_shared(
    jobfile: Any, plugins: PluginManager, url: str, *, as_json: bool, all_rows: bool = False
) -> int:
    """Submit a job file to a shared store and follow it until every job is finished.

    This process is a `jobsched.Client`: it only submits and watches; worker
    processes (``jobsched worker``) run the jobs. Each job's key is
    ``<file>#<id>``, so running the same file again after a crash resumes its
    jobs instead of duplicating them.
    """
    from .. import Client

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
    limits = jobfile.tables.get("limits")
    try:  # a clear error before anything is submitted
        client = Client(
            url,
            plugins=plugins,
            strategy=jobfile.scheduler.strategy,
            # The file's [limits] become the cluster's (or must match them: docs/limits.md).
            limits=limits.limits() if limits is not None else None,
        )
    except SchedulerError as exc:
        raise BadInput(str(exc)) from None
    result = asyncio.run(_follow(jobfile, plugins, client))
    if as_json:
        print_json(result.to_json())
    else:
        print_summary(make_console(), result, all_rows=all_rows)
    return int(result.exit_code)


async def _follow(jobfile: Any, plugins: PluginManager, client: Any) -> Any:
    from pathlib import Path

    from .. import JobInfo, Submission, build_job
    from ..jobfile import JobOutcome, RunResult

    source = str(Path(jobfile.source).resolve())
    start = time.monotonic()
    async with client:
        loop = asyncio.get_running_loop()
        later: list[asyncio.TimerHandle] = []

        def after(seconds: float, action: Any, arg: str) -> None:
            later.append(loop.call_later(seconds, lambda: asyncio.ensure_future(action(arg))))

        # One batch, one transaction: dependencies inside the file name the
        # entries' jobs; a key the store knows resumes that job.
        # In submit order: a result_of argument names an earlier job of the batch.
        built: dict[str, Any] = {}
        for entry in jobfile.submit_order:
            built[entry.id] = build_job(
                entry.type,
                jobfile.args_of(entry, built.__getitem__),
                plugins=plugins,
                label=entry.label,
                **entry.job_options(start),
            )
        stored = await client.submit_many(
            Submission(
                built[entry.id],
                delay=entry.delay,
                depends_on=[built[d] for d in entry.depends_on],
                key=f"{source}#{entry.id}",
                trigger_rule=entry.trigger_rule,
            )
            for entry in jobfile.submit_order
        )
        ids = dict(zip((entry.id for entry in jobfile.submit_order), stored, strict=True))
        for entry in jobfile.jobs:
            if entry.cancel_after is not None:
                after(entry.cancel_after, client.cancel, ids[entry.id])
        # [[recurring]]: shared schedules keyed by FILE#ID (running the file
        # again resumes them: a schedule that already ended fires no more).
        schedules: list[tuple[Any, str]] = []
        for rec in jobfile.recurring:
            template = build_job(
                rec.type, rec.args, plugins=plugins, label=rec.label, **rec.job_options(start)
            )
            schedule_id = await client.add_schedule(
                template,
                every=rec.every,
                trigger=rec.trigger,
                start_in=rec.start_in,
                allow_overlap=rec.allow_overlap,
                times=rec.times,
                key=f"{source}#{rec.id}",
            )
            schedules.append((rec, schedule_id))
            if rec.until is not None:
                after(rec.until, client.cancel_schedule, schedule_id)
        fired: dict[str, list[JobInfo]] = {}
        for rec, schedule_id in schedules:
            await client.wait_schedule(schedule_id)
            fired[rec.id] = await client.jobs(schedule=schedule_id)
        infos = await client.wait_many(
            [*ids.values(), *(info.job_id for runs in fired.values() for info in runs)]
        )
        for handle in later:
            handle.cancel()
    final = {info.job_id: info for info in infos}
    rows = {job_id: final[job_id] for job_id in ids.values()}
    fired = {rec_id: [final[info.job_id] for info in runs] for rec_id, runs in fired.items()}
    entries = {entry.id: entry for entry in jobfile.jobs}
    names = {job_id: entry_id for entry_id, job_id in ids.items()}

    def readable(error: str | None) -> str | None:
        # Errors name upstream jobs by job id; the file's reader knows its own ids.
        if error is None:
            return None
        for job_id, entry_id in names.items():
            error = error.replace(job_id, repr(entry_id))
        return error

    runs = [info for info in final.values() if info.started_at is not None]
    # The store records when each job (last) started: that order is the start order.
    start_order = {
        info.job_id: n
        for n, info in enumerate(sorted(runs, key=lambda r: (r.started_at, r.job_id)), start=1)
    }

    def outcome(entry_id: str, type_: str, info: JobInfo, recurring: str | None) -> Any:
        duration = (
            info.finished_at - info.started_at
            if info.finished_at is not None and info.started_at is not None
            else None
        )
        return JobOutcome(
            id=entry_id,
            type=type_,
            job_id=info.job_id,
            status=info.status,
            attempts=info.attempts,
            duration=duration,
            result=info.result,
            error=readable(info.last_error),
            recurring=recurring,
            start_order=start_order.get(info.job_id),
        )

    outcomes = [
        outcome(entry_id, entries[entry_id].type, rows[job_id], None)
        for entry_id, job_id in ids.items()
    ]
    for rec in jobfile.recurring:
        outcomes.extend(
            outcome(f"{rec.id}#{n}", rec.type, info, rec.id)
            for n, info in enumerate(fired.get(rec.id, []), start=1)
        )
    return RunResult(
        source=jobfile.source,
        strategy=jobfile.scheduler.strategy,
        workers=jobfile.scheduler.workers,
        outcomes=outcomes,
        elapsed=time.monotonic() - start,
        # Worker processes ran the jobs: how many ran at once is theirs to know.
        peak_running=None,
    )
