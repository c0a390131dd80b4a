"""``jobsched schedules list|pause|resume|trigger``: a shared store's recurring schedules."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .. import OperatorAPI, PluginManager
from ._common import BadInput, make_console, print_json
from ._operate import (
    add_store_options,
    describe_trigger,
    iso_time,
    operate,
    trigger_zone,
    wall_time,
)

if TYPE_CHECKING:
    from .. import ScheduleInfo


def add_parser(subparsers: Any) -> None:
    group = subparsers.add_parser(
        "schedules",
        help="list, pause, resume or fire a shared store's recurring schedules",
        description="The recurring schedules a shared store holds (what `jobsched worker "
        "--store URL` fires): list them, pause and resume them, fire one now.",
    )
    commands = group.add_subparsers(title="commands", metavar="COMMAND", required=True)
    listing = commands.add_parser(
        "list",
        help="list every schedule and when it fires next",
        description="List every schedule: id, name, trigger, next fire time (in the "
        "trigger's time zone for a cron trigger with one, else local time; with the UTC "
        "offset), whether it is paused, and how often it fired and skipped a period. "
        "Every worker on the store fires every stored schedule whose job type it has; a "
        "schedule whose next fire is more than 10 s past is marked overdue: no process "
        "fires it.",
    )
    add_store_options(listing, "print a JSON array")
    listing.set_defaults(handler=list_command)
    for name, verb, text in (
        ("pause", "pause", "it fires no more until resumed (jobs it submitted still run)"),
        ("resume", "resume", "it fires again from the next period after now"),
        (
            "trigger",
            "fire",
            "submit its stored job once now (as stored: its job type or task need not be "
            "installed here); its next fire time does not move",
        ),
    ):
        sub = commands.add_parser(
            name,
            help=f"{verb} a schedule: {text}",
            description=f"{verb.capitalize()} one schedule: {text}. An unknown id is bad "
            "input (exit code 2).",
        )
        sub.add_argument("schedule_id", metavar="ID", help="a schedule id (as `list` shows it)")
        add_store_options(sub, "print a JSON object")
        sub.set_defaults(handler=_HANDLERS[name])


def schedule_json(info: ScheduleInfo) -> dict[str, Any]:
    """One schedule of ``schedules list --json``."""
    return {
        "schedule_id": info.schedule_id,
        "name": info.name,
        "type": info.type,
        "trigger": dict(info.trigger),
        "next_run": info.next_run,
        "next_run_local": iso_time(info.next_run, trigger_zone(info.trigger)),
        "paused": info.paused,
        "active": info.active,
        "fired": info.fired,
        "skipped": info.skipped,
        "last_job_id": info.last_job_id,
        "overdue": info.overdue,
    }


def _next_fire(info: ScheduleInfo) -> str:
    if not info.active or info.next_run is None:
        return "- (ended)"
    when = wall_time(info.next_run, trigger_zone(info.trigger))
    return f"{when} (overdue)" if info.overdue else when


def list_command(args: argparse.Namespace, plugins: PluginManager) -> int:
    async def schedules(client: OperatorAPI) -> list[ScheduleInfo]:
        return list(await client.schedules())

    infos = operate(args, plugins, schedules, needs=("schedules",))
    if args.json:
        print_json([schedule_json(info) for info in infos])
        return 0
    from rich import box
    from rich.table import Table
    from rich.text import Text

    console = make_console()
    if infos:
        table = Table(box=box.SIMPLE_HEAD, header_style="bold", pad_edge=False, show_edge=False)
        for column in ("ID", "NAME", "TYPE", "TRIGGER", "NEXT FIRE", "PAUSED", "FIRED", "SKIPPED"):
            table.add_column(column, justify="right" if column in ("FIRED", "SKIPPED") else "left")
        for info in infos:
            table.add_row(
                *(
                    Text(cell)
                    for cell in (
                        info.schedule_id,
                        info.name or "-",
                        info.type,
                        describe_trigger(dict(info.trigger)),
                        _next_fire(info),
                        "yes" if info.paused else "no",
                        str(info.fired),
                        str(info.skipped),
                    )
                )
            )
        console.print(table)
    late = [info for info in infos if info.overdue]
    for info in late:
        due = wall_time(info.next_run, trigger_zone(info.trigger))
        console.print(
            f"overdue: {info.schedule_id} was due at {due} and no process fired it: start a "
            f"worker with job type {info.type!r} installed (jobsched worker --store URL), "
            f"or pause it (jobsched schedules pause {info.schedule_id})",
            markup=False,
            soft_wrap=True,
        )
    paused = sum(1 for info in infos if info.paused)
    plural = "" if len(infos) == 1 else "s"
    summary = f"{len(infos)} schedule{plural}, {paused} paused"
    console.print(summary + (f", {len(late)} overdue" if late else ""), markup=False)
    return 0


async def _find(client: OperatorAPI, schedule_id: str, store: str) -> ScheduleInfo:
    for info in await client.schedules():
        if info.schedule_id == schedule_id:
            return info
    raise BadInput(f"unknown schedule id in {store}: {schedule_id}; nothing was changed")


def _set_paused(args: argparse.Namespace, plugins: PluginManager, *, paused: bool) -> int:
    """``schedules pause ID`` (`paused`) or ``schedules resume ID``."""

    async def change(client: OperatorAPI) -> tuple[bool, ScheduleInfo]:
        await _find(client, args.schedule_id, args.store)
        if paused:
            changed = await client.pause_schedule(args.schedule_id)
        else:
            changed = await client.resume_schedule(args.schedule_id)
        return changed, await _find(client, args.schedule_id, args.store)

    changed, info = operate(args, plugins, change, needs=("schedules",))
    if args.json:
        print_json({"changed": changed, "schedule": schedule_json(info)})
    elif paused:
        print(
            f"paused schedule {info.schedule_id}"
            if changed
            else f"schedule {info.schedule_id} was already paused"
        )
    elif changed:
        print(f"resumed schedule {info.schedule_id}: next fire {_next_fire(info)}")
    else:
        print(f"schedule {info.schedule_id} was not paused: next fire {_next_fire(info)}")
    return 0


def pause_command(args: argparse.Namespace, plugins: PluginManager) -> int:
    return _set_paused(args, plugins, paused=True)


def resume_command(args: argparse.Namespace, plugins: PluginManager) -> int:
    return _set_paused(args, plugins, paused=False)


def trigger_command(args: argparse.Namespace, plugins: PluginManager) -> int:
    async def trigger(client: OperatorAPI) -> tuple[str, ScheduleInfo]:
        await _find(client, args.schedule_id, args.store)
        job_id = await client.trigger_schedule(args.schedule_id)
        return job_id, await _find(client, args.schedule_id, args.store)

    job_id, info = operate(args, plugins, trigger, needs=("schedules",))
    if args.json:
        print_json({"job_id": job_id, "schedule": schedule_json(info)})
    else:
        print(
            f"triggered schedule {info.schedule_id}: submitted {job_id}; "
            f"next fire still {_next_fire(info)}"
        )
    return 0


_HANDLERS = {"pause": pause_command, "resume": resume_command, "trigger": trigger_command}
