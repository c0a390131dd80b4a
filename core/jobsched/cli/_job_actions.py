"""``jobsched jobs retry|requeue|cancel|purge``: operator actions on a store's jobs."""

from __future__ import annotations

import argparse
import time
from typing import Any

import attrs
from rich.markup import escape

from .. import JobInfo, JobStatus, OperatorAPI, PluginManager, UnknownJobError
from ._common import BadInput, make_console, print_json
from ._operate import (
    RETRYABLE,
    TERMINAL,
    add_store_options,
    flatten,
    format_duration,
    operate,
    parse_duration,
    status_list,
    unique,
)


def add_parsers(commands: Any) -> None:
    """Add the action subcommands to the ``jobs`` group's `commands`."""
    retry = commands.add_parser(
        "retry",
        help="run failed, timed-out or cancelled jobs again",
        description="Put each job back in the queue: it runs again with its attempts reset "
        "to 0 (the earlier attempts stay in its history). Only failed, timed_out and "
        "cancelled jobs can be retried. Every id is checked first: an unknown id or a job "
        "in another status is bad input (exit code 2, naming them all) and nothing changes.",
    )
    retry.add_argument("ids", nargs="+", metavar="ID", help="a job id (as `status` shows it)")
    add_store_options(retry, "print a JSON array of the jobs retried")
    retry.set_defaults(handler=retry_command)

    requeue = commands.add_parser(
        "requeue",
        help="retry every job in a status (failed by default)",
        description="Retry, at once, every job in the given statuses (default: failed), "
        "optionally only those of one job type. Prints each job requeued; none is not an error.",
    )
    requeue.add_argument(
        "--status",
        action="append",
        type=status_list(RETRYABLE, "that can be requeued"),
        metavar="STATUS",
        help="failed, timed_out or cancelled; repeat it or separate with commas (default: failed)",
    )
    requeue.add_argument("--type", metavar="TYPE", help="only jobs of this job type")
    add_store_options(requeue, "print a JSON array of the jobs requeued")
    requeue.set_defaults(handler=requeue_command)

    cancel = commands.add_parser(
        "cancel",
        help="cancel jobs wherever they are",
        description="Cancel each job: a waiting one at once (with the jobs that depend on it), "
        "a running one by the worker that holds it (soon after). A job that had already "
        "finished is left as it is and said so. Every id is checked first: unknown ids are "
        "bad input (exit code 2, naming them all) and nothing changes.",
    )
    cancel.add_argument("ids", nargs="+", metavar="ID", help="a job id (as `status` shows it)")
    add_store_options(cancel, "print a JSON array, one object per job")
    cancel.set_defaults(handler=cancel_command)

    purge = commands.add_parser(
        "purge",
        help="delete finished jobs older than a duration",
        description="Delete the jobs that finished (completed, failed, timed_out, cancelled) "
        "more than --older-than ago, by the store's clock; only those in --status if given. "
        "Jobs not finished are never deleted.",
    )
    purge.add_argument(
        "--older-than",
        required=True,
        type=parse_duration,
        metavar="DURATION",
        help="7d, 12h, 30m, 45s, 1.5h or plain seconds; 0 purges every finished job",
    )
    purge.add_argument(
        "--status",
        action="append",
        type=status_list(TERMINAL, "a finished job can have"),
        metavar="STATUS",
        help="completed, failed, timed_out or cancelled; repeat it or separate with commas "
        "(default: all four)",
    )
    add_store_options(purge, "print a JSON object")
    purge.set_defaults(handler=purge_command)


# ── what changed ──────────────────────────────────────────────────────
def _change(info: JobInfo, before: str, after: str, **more: Any) -> dict[str, Any]:
    return {"job_id": info.job_id, "type": info.type, "before": before, "status": after, **more}


def _print_changes(verb: str, changes: list[dict[str, Any]]) -> None:
    for change in changes:
        print(f"{verb} {change['job_id']} ({change['before']} -> {change['status']})")


async def known_jobs(client: OperatorAPI, job_ids: list[str], store: str) -> dict[str, JobInfo]:
    """Each job as stored now; `BadInput` naming every unknown id and the `store`
    (before any change)."""
    found: dict[str, JobInfo] = {}
    unknown: list[str] = []
    for job_id in job_ids:
        try:
            found[job_id] = await client.get(job_id)
        except UnknownJobError:
            unknown.append(job_id)
    if unknown:
        plural = "s" if len(unknown) > 1 else ""
        raise BadInput(
            f"unknown job id{plural} in {store}: {', '.join(unknown)}; nothing was changed"
        )
    return found


# ── jobs show ID --store URL ──────────────────────────────────────────
def show_stored_job(args: argparse.Namespace, plugins: PluginManager) -> int:
    from ._status import job_json

    async def get(client: OperatorAPI) -> JobInfo:
        try:
            return await client.get(args.name)
        except UnknownJobError:
            raise BadInput(f"unknown job id in {args.store}: {args.name}") from None

    info = operate(args, plugins, get, needs=("lookup",))
    if args.json:
        shown = job_json(info, time.time())
        shown["history"] = [attrs.asdict(attempt) for attempt in info.history]
        print_json(shown)
        return 0
    console = make_console()
    # Only the id is styled: a job type's name is text, brackets included.
    console.print(
        f"[bold]{escape(info.job_id)}[/]  {escape(info.type)}  {info.status.value}", markup=True
    )
    console.print(f"  attempts  {info.attempts}", markup=False)
    if info.group is not None:
        console.print(f"  group     {info.group}", markup=False)
    if info.status is JobStatus.COMPLETED:
        console.print(f"  result    {info.result!r}", markup=False)
    elif info.last_error is not None:
        console.print(f"  error     {info.last_error}", markup=False)
    if info.build_refusals:
        console.print(
            f"  refused   by {info.build_refusals} worker(s) that could not build it: "
            f"{info.last_refusal}",
            markup=False,
        )
    if info.traceback is not None:
        console.print("  traceback (last failed attempt):", markup=False)
        for line in info.traceback.rstrip("\n").splitlines():
            console.print(f"    {line}", markup=False, highlight=False, soft_wrap=True)
    for attempt in info.history:
        error = f"  {attempt.error}" if attempt.error else ""
        console.print(f"  attempt {attempt.number}: {attempt.status}{error}", markup=False)
    return 0


# ── jobs retry ID… ────────────────────────────────────────────────────
def retry_command(args: argparse.Namespace, plugins: PluginManager) -> int:
    job_ids = unique(args.ids)

    async def retry(client: OperatorAPI) -> list[dict[str, Any]]:
        infos = await known_jobs(client, job_ids, args.store)
        wrong = [
            f"{i} ({infos[i].status.value})"
            for i in job_ids
            if infos[i].status.value not in RETRYABLE
        ]
        if wrong:
            raise BadInput(
                f"cannot retry {', '.join(wrong)}: only {', '.join(RETRYABLE)} jobs can be "
                "retried; nothing was changed"
            )
        changes = []
        for job_id in job_ids:
            after = await client.retry(job_id)
            # What the retry did: a worker may have claimed the job already.
            changes.append(_change(after, infos[job_id].status.value, JobStatus.PENDING.value))
        return changes

    changes = operate(args, plugins, retry, needs=("operate",))
    if args.json:
        print_json(changes)
    else:
        _print_changes("retried", changes)
    return 0


# ── jobs requeue --status S [--type T] ───────────────────────────────
def requeue_command(args: argparse.Namespace, plugins: PluginManager) -> int:
    statuses = flatten(args.status) or ["failed"]

    async def requeue(client: OperatorAPI) -> list[dict[str, Any]]:
        before = {info.job_id: info for info in await client.jobs(status=statuses, type=args.type)}
        requeued = await client.requeue(status=tuple(statuses), type=args.type)
        changes = []
        for job_id in requeued:
            now = await client.get(job_id)
            was = before.get(job_id)
            changes.append(_change(now, was.status.value if was else "?", "pending"))
        return changes

    changes = operate(args, plugins, requeue, needs=("inspect", "operate"))
    if args.json:
        print_json(changes)
    elif not changes:
        of_type = f" of type {args.type!r}" if args.type else ""
        print(f"no {' or '.join(statuses)} jobs{of_type} to requeue")
    else:
        _print_changes("requeued", changes)
    return 0


# ── jobs cancel ID… ───────────────────────────────────────────────────
def cancel_command(args: argparse.Namespace, plugins: PluginManager) -> int:
    job_ids = unique(args.ids)

    async def cancel(client: OperatorAPI) -> list[dict[str, Any]]:
        infos = await known_jobs(client, job_ids, args.store)
        changes = []
        for job_id in job_ids:
            before = infos[job_id].status.value
            if not await client.cancel(job_id):
                changes.append(_change(infos[job_id], before, before, outcome="finished"))
                continue
            now = await client.get(job_id)
            outcome = "cancelled" if now.status.is_terminal else "requested"
            changes.append(_change(now, before, now.status.value, outcome=outcome))
        return changes

    changes = operate(args, plugins, cancel, needs=("operate",))
    if args.json:
        print_json(changes)
        return 0
    for change in changes:
        job_id, before = change["job_id"], change["before"]
        if change["outcome"] == "cancelled":
            print(f"cancelled {job_id} ({before} -> {change['status']})")
        elif change["outcome"] == "requested":
            print(f"cancelling {job_id} ({change['status']}: the worker holding it stops it)")
        else:
            print(f"left {job_id} as it is: already {before}")
    return 0


# ── jobs purge --older-than D [--status S] ───────────────────────────
def purge_command(args: argparse.Namespace, plugins: PluginManager) -> int:
    statuses = flatten(args.status)

    async def purge(client: OperatorAPI) -> int:
        return await client.purge(older_than=args.older_than, status=statuses)

    purged = operate(args, plugins, purge, needs=("operate",))
    if args.json:
        print_json(
            {"purged": purged, "older_than": args.older_than, "status": statuses or list(TERMINAL)}
        )
        return 0
    which = " or ".join(statuses) if statuses else "finished"
    plural = "" if purged == 1 else "s"
    print(
        f"purged {purged} {which} job{plural} that finished more than "
        f"{format_duration(args.older_than)} ago"
    )
    return 0
