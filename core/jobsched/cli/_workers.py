"""``jobsched workers``: the worker registry of a shared store, one row per worker;
``jobsched workers drain|stop ID``: an operator's request to one of them."""

from __future__ import annotations

import argparse
from functools import partial
from typing import Any

from .. import OperatorAPI, PluginManager, WorkerRecord
from ._common import BadInput, make_console, print_json
from ._operate import add_store_options, format_duration, iso_time, operate, wall_time


def add_parser(subparsers: Any) -> None:
    sub = subparsers.add_parser(
        "workers",
        help="list the workers of a shared store (live, idle, draining, lost); drain or stop one",
        description="List the workers a shared store's registry knows: each worker's id, "
        "host and pid, its queues with their concurrency, the jobs it runs, when it was last "
        "seen, its jobsched version and its state (live, idle, draining or lost: no heartbeat "
        "for longer than its lease time; a lost worker's row goes after an hour). "
        "`workers drain ID` and `workers stop ID` ask one worker to drain or stop.",
    )
    # The listing's --store is checked by its handler: `drain` and `stop` take their own.
    add_store_options(sub, "print a JSON list", required=False)
    sub.set_defaults(handler=workers_command)
    commands = sub.add_subparsers(title="commands", metavar="COMMAND")
    for name, text in (
        (
            "drain",
            "claim nothing more (the jobs it claimed and has not started go back to the "
            "queue), finish the running jobs and stay, shown draining, until stopped",
        ),
        (
            "stop",
            "drain, then exit as on SIGTERM (running jobs get its --grace, then go back to "
            "the queue); it leaves the registry",
        ),
    ):
        command = commands.add_parser(
            name,
            help=f"ask a worker to {name}: {text.split(' (')[0]}",
            description=f"Ask one live worker to {text}. The worker reads the request with "
            "its next heartbeat (every third of its lease time; at once on PostgreSQL, which "
            "notifies it). A drained worker claims again only once restarted. An unknown or "
            "lost worker id is bad input (exit code 2).",
        )
        command.add_argument("worker_id", metavar="ID", help="a worker id (as `workers` lists it)")
        add_store_options(command, "print a JSON object")
        command.set_defaults(handler=partial(request_command, name))


def worker_json(w: WorkerRecord) -> dict[str, Any]:
    """One worker of ``workers --json`` (and of the dashboard's API)."""
    return {
        "worker_id": w.worker_id,
        "host": w.host,
        "pid": w.pid,
        "queues": dict(w.queues),
        "job_types": list(w.job_types),
        "version": w.version,
        "started_at": w.started_at,
        "started_at_local": iso_time(w.started_at),
        "last_seen": w.last_seen,
        "seen_ago": w.seen_ago,
        "running": w.running,
        "state": w.state,
        "command": w.command,
    }


def _state(w: WorkerRecord) -> str:
    """The STATE cell: a lost worker's in capitals; an operator's request beside it."""
    if w.lost:
        return w.state.upper()
    return f"{w.state} ({w.command} asked)" if w.command else w.state


def _ago(seconds: float) -> str:
    if seconds < 1:
        return "now"
    return f"{format_duration(float(round(seconds)))} ago"


def request_command(command: str, args: argparse.Namespace, plugins: PluginManager) -> int:
    """``workers drain ID`` and ``workers stop ID``."""

    async def ask(client: OperatorAPI) -> None:
        if command == "drain":
            await client.drain_worker(args.worker_id)
        else:
            await client.stop_worker(args.worker_id)

    operate(args, plugins, ask, needs=("workers",))
    if args.json:
        print_json({"worker_id": args.worker_id, "command": command})
        return 0
    then = "then exits" if command == "stop" else "then stays, drained, until stopped"
    make_console().print(
        f"asked worker {args.worker_id} to {command}: from its next heartbeat it claims "
        f"nothing more, finishes its running jobs, {then}",
        markup=False,
        soft_wrap=True,
    )
    return 0


def workers_command(args: argparse.Namespace, plugins: PluginManager) -> int:
    if args.store is None:
        raise BadInput("jobsched workers needs --store URL (the shared store to list)")

    async def workers(client: OperatorAPI) -> list[WorkerRecord]:
        return await client.workers()

    found = operate(args, plugins, workers, needs=("workers",))
    if args.json:
        print_json([worker_json(w) for w in found])
        return 0
    from rich import box
    from rich.table import Table
    from rich.text import Text

    console = make_console()
    if found:
        table = Table(box=box.SIMPLE_HEAD, header_style="bold", pad_edge=False, show_edge=False)
        columns = ("WORKER", "HOST", "PID", "STATE", "QUEUES", "RUNNING", "LAST SEEN", "STARTED")
        for column in (*columns, "VERSION"):
            table.add_column(column, justify="right" if column in ("PID", "RUNNING") else "left")
        for w in found:
            queues = ", ".join(f"{name}={n}" for name, n in sorted(w.queues.items()))
            table.add_row(
                *(
                    Text(cell)
                    for cell in (
                        w.worker_id,
                        w.host,
                        str(w.pid),
                        _state(w),
                        queues or "-",
                        str(w.running),
                        _ago(w.seen_ago),
                        wall_time(w.started_at),
                        w.version,
                    )
                )
            )
        console.print(table)
    states = {state: sum(1 for w in found if w.state == state) for state in _ORDER}
    plural = "" if len(found) == 1 else "s"
    detail = ", ".join(f"{n} {state}" for state, n in states.items() if n)
    console.print(f"{len(found)} worker{plural}" + (f": {detail}" if detail else ""), markup=False)
    return 0


_ORDER = ("live", "idle", "draining", "lost")
