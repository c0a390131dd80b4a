"""``jobsched jobs list`` and ``jobsched jobs show NAME``: the registered job types.

The same group holds the operator actions on a store's jobs (``jobs show ID
--store URL``, ``retry``, ``requeue``, ``cancel``, ``purge``: `_job_actions`).
"""

from __future__ import annotations

import argparse
import inspect
import sys
from typing import Any

from .. import ArgumentInfo, JobTypeInfo, PluginManager, describe_job_type, job_type_info, job_types
from . import _job_actions
from ._common import add_import_option, make_console, print_json


def add_parser(subparsers: Any) -> None:
    group = subparsers.add_parser(
        "jobs",
        help="list and describe job types; retry, requeue, cancel and purge stored jobs",
        description="Inspect the job types that plugins register (what a job file's `type` "
        "names), and act on the jobs of a store (--store URL): PostgreSQL, or any "
        "SQLite file jobsched wrote.",
    )
    commands = group.add_subparsers(title="commands", metavar="COMMAND", required=True)
    listing = commands.add_parser(
        "list",
        help="list every job type",
        description="List every registered job type: its plugin, execution model, "
        "arguments (name, type, default) and the first line of its docstring. A name "
        "that two plugins register is listed once per plugin with a warning: jobs of "
        "that type cannot run until one plugin is disabled.",
    )
    listing.add_argument("--json", action="store_true", help="print a JSON array (docs/cli.md)")
    add_import_option(listing)
    listing.set_defaults(handler=list_jobs)
    show = commands.add_parser(
        "show",
        help="describe one job type, or (with --store) one stored job",
        description="Describe one job type: its plugin, class, execution model, full "
        "docstring and every argument. Exit code 2 if no job type has that name. "
        "With --store URL, NAME is a job id instead: that job as the store holds it, "
        "its error, the traceback of its last failed attempt and its attempt history "
        "(exit code 2 if the store has no such job).",
    )
    show.add_argument(
        "name", metavar="NAME", help="a job type name, as in `jobs list`; a job id with --store"
    )
    show.add_argument("--json", action="store_true", help="print a JSON object (docs/cli.md)")
    show.add_argument(
        "--store", metavar="URL", help="show the stored job NAME of this store (docs/cli.md)"
    )
    add_import_option(show)
    show.set_defaults(handler=show_job)
    _job_actions.add_parsers(commands)


def _argument(arg: ArgumentInfo) -> str:
    text = f"{arg.name}: {arg.type}"
    return text if arg.required else f"{text} = {arg.default!r}"


def list_jobs(args: argparse.Namespace, plugins: PluginManager) -> int:
    # (info, warning): the usable types, and each claim on a name two plugins registered.
    rows: list[tuple[JobTypeInfo, str | None]] = [(info, None) for info in job_types(plugins)]
    for clash in plugins.clashes("job_types"):
        rows += [
            (describe_job_type(reg.factory, clash.name, reg.plugin), clash.message)
            for reg in clash.registrations
        ]
    rows.sort(key=lambda row: (row[0].name, row[0].plugin or ""))
    for clash in plugins.clashes("job_types"):
        print(f"jobsched: warning: {clash.message}", file=sys.stderr)
    if args.json:
        print_json([{**info.to_json(), "warning": warning} for info, warning in rows])
        return 0
    from rich import box
    from rich.table import Table
    from rich.text import Text

    console = make_console()
    table = Table(box=box.SIMPLE_HEAD, header_style="bold", pad_edge=False, show_edge=False)
    for column in ("TYPE", "PLUGIN", "MODEL", "ARGUMENTS", "DESCRIPTION"):
        table.add_column(column, overflow="fold")
    for info, warning in rows:
        description = Text(info.summary or "-")
        if warning is not None:
            description = Text(f"warning: {warning}", style="yellow")
        table.add_row(
            info.name,
            info.plugin or "-",
            info.model,
            ", ".join(_argument(a) for a in info.arguments) or "-",
            description,
        )
    console.print(table)
    console.print(f"{len(rows)} job types. `jobsched jobs show NAME` describes one.")
    return 0


def show_job(args: argparse.Namespace, plugins: PluginManager) -> int:
    if args.store is not None:
        return _job_actions.show_stored_job(args, plugins)
    info: JobTypeInfo = job_type_info(args.name, plugins)
    if args.json:
        print_json(info.to_json())
        return 0
    from rich import box
    from rich.table import Table

    console = make_console()
    console.print(f"[bold]{info.name}[/]  (plugin {info.plugin or '-'})")
    console.print(f"  class   {info.qualname}")
    console.print(f"  model   {info.model}")
    if info.doc:
        console.print()
        for line in inspect.cleandoc(info.doc).splitlines():
            console.print(f"  {line}", markup=False)
    console.print()
    if not info.arguments:
        console.print("  no arguments")
        return 0
    table = Table(box=box.SIMPLE_HEAD, header_style="bold", pad_edge=False, show_edge=False)
    for column in ("ARGUMENT", "TYPE", "DEFAULT"):
        table.add_column(column, overflow="fold")
    for arg in info.arguments:
        table.add_row(arg.name, arg.type, "(required)" if arg.required else repr(arg.default))
    console.print(table)
    return 0
