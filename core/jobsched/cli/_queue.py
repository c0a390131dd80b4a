"""``jobsched queue pause|resume|status|list``: stop and restart claiming, across
the cluster, for every queue or for one named queue; and each queue at a glance."""

from __future__ import annotations

import argparse
from typing import Any

from .. import OperatorAPI, PluginManager, QueueInfo, check_queue
from ._common import BadInput, print_json
from ._operate import add_store_options, operate


def add_parser(subparsers: Any) -> None:
    group = subparsers.add_parser(
        "queue",
        help="pause, resume or list a shared store's queues",
        description="Pause or resume the queues of a shared store: while a queue is paused, "
        "no worker claims its jobs (running jobs finish; submitting still works). Without "
        "a NAME, pause and resume act on every queue at once (one switch of its own, apart "
        "from each queue's); `queue list` shows each queue at a glance.",
    )
    commands = group.add_subparsers(title="commands", metavar="COMMAND", required=True)
    for name, text in (
        ("pause", "stop every worker claiming new jobs of NAME, or of every queue"),
        ("resume", "let the workers claim jobs of NAME, or of every queue, again"),
        ("status", "say whether NAME, or every queue, is paused"),
    ):
        sub = commands.add_parser(name, help=text, description=f"{text[0].upper()}{text[1:]}.")
        sub.add_argument(
            "name", nargs="?", metavar="NAME", help="a queue's name (default: every queue)"
        )
        add_store_options(sub, "print a JSON object")
        sub.set_defaults(handler=queue_command, action=name)
    listing = commands.add_parser(
        "list",
        help="each queue: depth, oldest ready job's age, running, throughput, paused",
        description="Each queue of the store, by name: jobs ready to run (depth), how long "
        "the oldest of them has been ready, jobs running, jobs finished in the last minute, "
        "and whether it is paused. Lists every queue holding an unfinished job, one that "
        "finished a job in the last minute, a paused one, and 'default'.",
    )
    add_store_options(listing, "print a JSON array of queues")
    listing.set_defaults(handler=list_command)


def queue_command(args: argparse.Namespace, plugins: PluginManager) -> int:
    name: str | None = args.name
    if name is not None:
        try:
            check_queue(name)
        except ValueError as exc:
            raise BadInput(str(exc)) from None

    async def act(client: OperatorAPI) -> tuple[bool, bool, bool]:
        if args.action == "pause":
            changed = await client.pause_queue(name)
        elif args.action == "resume":
            changed = await client.resume_queue(name)
        else:
            changed = False
        everything = await client.queue_paused()
        return changed, everything, await client.queue_paused(name)

    changed, everything, paused = operate(args, plugins, act, needs=("operate",))
    if args.json:
        document: dict[str, Any] = {"paused": paused}
        if name is not None:
            document = {"queue": name, "paused": paused, "all_paused": everything}
        if args.action != "status":
            document["changed"] = changed
        print_json(document)
        return 0
    what = "queue" if name is None else f"queue {name!r}"
    if name is None:
        state = "paused: workers claim no new jobs" if paused else "running: workers claim jobs"
    elif paused:
        state = "paused: workers claim none of its jobs" + (
            " (every queue is paused)" if everything else ""
        )
    else:
        state = "running: workers claim its jobs"
    if args.action == "status":
        print(f"{what} is {state}")
    elif changed:
        print(f"{what} {args.action}d; it is {state}")
    else:
        was = "paused" if args.action == "pause" else "running"
        print(f"{what} was already {was}; it is {state}")
    return 0


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def list_command(args: argparse.Namespace, plugins: PluginManager) -> int:
    async def act(client: OperatorAPI) -> tuple[list[QueueInfo], bool]:
        return await client.queues(), await client.queue_paused()

    queues, everything = operate(args, plugins, act, needs=("inspect", "operate"))
    if args.json:
        print_json(
            [
                {
                    "name": q.name,
                    "depth": q.depth,
                    "oldest_age": q.oldest_age,
                    "running": q.running,
                    "throughput": q.throughput,
                    "paused": q.paused or everything,
                }
                for q in queues
            ]
        )
        return 0
    header = ("QUEUE", "DEPTH", "OLDEST", "RUNNING", "DONE/MIN", "STATE")
    rows = [
        (
            q.name,
            str(q.depth),
            _age(q.oldest_age),
            str(q.running),
            str(q.throughput),
            "paused" if q.paused or everything else "running",
        )
        for q in queues
    ]
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
    for row in (header, *rows):
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )
    if everything:
        print("every queue is paused (jobsched queue resume)")
    return 0
