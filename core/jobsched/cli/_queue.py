"""``jobsched queue pause|resume|status``: stop and restart claiming, across the cluster."""

from __future__ import annotations

import argparse
from typing import Any

from .. import OperatorAPI, PluginManager
from ._common import print_json
from ._operate import add_store_options, operate


def add_parser(subparsers: Any) -> None:
    group = subparsers.add_parser(
        "queue",
        help="pause or resume a shared store's queue",
        description="Pause or resume the queue of a shared store: while it is paused, no "
        "worker claims a job (running jobs finish; submitting still works).",
    )
    commands = group.add_subparsers(title="commands", metavar="COMMAND", required=True)
    for name, text in (
        ("pause", "stop every worker claiming new jobs (running jobs finish)"),
        ("resume", "let the workers claim jobs again"),
        ("status", "say whether the queue is paused"),
    ):
        sub = commands.add_parser(name, help=text, description=f"{text[0].upper()}{text[1:]}.")
        add_store_options(sub, "print a JSON object")
        sub.set_defaults(handler=queue_command, action=name)


def queue_command(args: argparse.Namespace, plugins: PluginManager) -> int:
    async def act(client: OperatorAPI) -> tuple[bool, bool]:
        if args.action == "pause":
            changed = await client.pause_queue()
        elif args.action == "resume":
            changed = await client.resume_queue()
        else:
            changed = False
        return changed, await client.queue_paused()

    changed, paused = operate(args, plugins, act, needs=("operate",))
    if args.json:
        document = {"paused": paused}
        if args.action != "status":
            document["changed"] = changed
        print_json(document)
        return 0
    state = "paused: workers claim no new jobs" if paused else "running: workers claim jobs"
    if args.action == "status":
        print(f"queue is {state}")
    elif changed:
        print(f"queue {args.action}d; it is {state}")
    else:
        print(f"queue was already {'paused' if paused else 'running'}; it is {state}")
    return 0
