"""``jobsched plugins list``: every plugin found, loaded or not."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .. import PluginManager, PluginRecord
from ._common import make_console, print_json


def add_parser(subparsers: Any) -> None:
    group = subparsers.add_parser(
        "plugins",
        help="list the installed plugins",
        description="Inspect the plugins jobsched finds through its entry points.",
    )
    commands = group.add_subparsers(title="commands", metavar="COMMAND", required=True)
    listing = commands.add_parser(
        "list",
        help="list every plugin: built-in or third-party, loaded, blocked or failed",
        description="List every plugin found in the 'jobsched' entry-point group: its "
        "distribution and version, whether it is built in (essential built-ins provide "
        "the kernel's defaults and cannot be disabled), whether it loaded (or was "
        "blocked, or failed, with the error), how long its import took, the hooks it "
        "implements and the names it provides (with a warning for a name another plugin "
        "registers too). A broken plugin is listed, never fatal. Honours "
        "JOBSCHED_DISABLE_PLUGINS and JOBSCHED_DISABLE_PLUGIN_AUTOLOAD.",
    )
    listing.add_argument("--json", action="store_true", help="print a JSON array (docs/cli.md)")
    listing.set_defaults(handler=list_plugins)


def list_plugins(args: argparse.Namespace, manager: PluginManager) -> int:
    records = manager.records()
    if args.json:
        print_json([record.to_json() for record in records])
    else:
        _print_table(records)
    for conflict in manager.conflicts:
        print(f"jobsched: warning: {conflict}", file=sys.stderr)
    return 0


def _print_table(records: list[PluginRecord]) -> None:
    from rich import box
    from rich.table import Table
    from rich.text import Text

    console = make_console()
    table = Table(box=box.SIMPLE_HEAD, header_style="bold", pad_edge=False, show_edge=False)
    for column in ("PLUGIN", "DISTRIBUTION", "ORIGIN", "STATUS", "IMPORT", "HOOKS"):
        table.add_column(column, overflow="fold", justify="right" if column == "IMPORT" else "left")
    table.add_column("PROVIDES / ERROR", overflow="fold")
    styles = {"loaded": "green", "blocked": "yellow", "failed": "bold red"}
    for record in records:
        dist = record.distribution or "-"
        if record.version:
            dist += f" {record.version}"
        hooks = ", ".join(h.removeprefix("jobsched_") for h in record.hooks) or "-"
        if record.status == "loaded":
            detail = "; ".join(
                f"{kind.replace('_', ' ')}: {', '.join(names)}"
                for kind, names in sorted(record.provides.items())
            )
        else:
            detail = record.error or ""
        cell = Text(detail or "-")
        for warning in record.warnings:
            cell.append(f"\nwarning: {warning}", style="yellow")
        table.add_row(
            record.name,
            dist,
            _origin(record),
            Text(record.status, style=styles.get(record.status, "")),
            "-" if record.import_time is None else f"{record.import_time * 1000:.0f}ms",
            hooks,
            cell,
        )
    console.print(table)
    counts = {s: sum(r.status == s for r in records) for s in ("loaded", "blocked", "failed")}
    essential = sum(record.essential for record in records)
    console.print(
        f"{len(records)} plugins ({essential} essential, cannot be disabled): "
        f"{counts['loaded']} loaded, {counts['blocked']} blocked, "
        f"{counts['failed']} failed"
    )


def _origin(record: PluginRecord) -> str:
    if record.essential:
        return "essential"  # built in, and cannot be disabled
    return "built-in" if record.builtin else "third-party"
