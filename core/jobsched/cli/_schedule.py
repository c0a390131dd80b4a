"""``jobsched schedule preview EXPR``: the next fire times of a cron expression."""

from __future__ import annotations

import argparse
from datetime import datetime, timezone
from typing import Any

from .. import PluginManager
from ._common import BadInput, make_console, print_json

GAP_RULES = ("shift", "transition", "skip")
OVERLAP_RULES = ("first", "second", "both")
#: The most fire times `--next` may ask for: each is a row in memory (and on
#: screen), and a preview of a hundred million would exhaust the machine.
MAX_FIRES = 10_000


def add_parser(subparsers: Any) -> None:
    group = subparsers.add_parser(
        "schedule",
        help="preview when a schedule fires",
        description="Inspect schedules before putting them in a job file.",
    )
    commands = group.add_subparsers(title="commands", metavar="COMMAND", required=True)
    preview = commands.add_parser(
        "preview",
        help="print the next fire times of a cron expression",
        description="Print the next N fire times of a cron expression in a time zone, "
        "marking those that a daylight-saving rule moved or skipped (docs/triggers.md). "
        "Exit code 2 for a bad expression or time zone.",
    )
    preview.add_argument(
        "expr",
        metavar="EXPR",
        help='a cron expression, 5 fields or 6 with seconds first; quote it: "0 2 * * *"',
    )
    preview.add_argument(
        "--tz", default="UTC", metavar="ZONE", help="an IANA time zone (default: UTC)"
    )
    preview.add_argument(
        "--next",
        type=_fire_count,
        default=5,
        metavar="N",
        help=f"how many fire times to print, at most {MAX_FIRES} (default: 5; skipped ones "
        "are listed extra)",
    )
    preview.add_argument(
        "--gap",
        choices=GAP_RULES,
        default="shift",
        help="a wall time that the clock skips: shift (default), transition or skip",
    )
    preview.add_argument(
        "--overlap",
        choices=OVERLAP_RULES,
        default="first",
        help="a wall time that happens twice: first (default), second or both",
    )
    preview.add_argument(
        "--after",
        metavar="DATETIME",
        help="start after this ISO 8601 time (read in --tz without an offset; default: now)",
    )
    preview.add_argument("--json", action="store_true", help="print a JSON array (docs/cli.md)")
    preview.set_defaults(handler=preview_schedule)


def _fire_count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    if value > MAX_FIRES:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_FIRES}, got {value}")
    return value


def preview_schedule(args: argparse.Namespace, plugins: PluginManager) -> int:
    cron = plugins.resolve("triggers", "cron")
    try:
        trigger = cron(args.expr, tz=args.tz, gap=args.gap, overlap=args.overlap)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    if not callable(getattr(trigger, "preview", None)):
        raise BadInput(f"the 'cron' trigger {cron!r} cannot preview its fire times")
    after: datetime
    if args.after is None:
        after = datetime.now(timezone.utc)
    else:
        try:
            after = datetime.fromisoformat(args.after)
        except ValueError:
            raise BadInput(
                f"--after {args.after!r} is not an ISO 8601 time such as 2026-03-07T12:00"
            ) from None
    try:
        fires = trigger.preview(after, args.next)
    except ValueError as exc:  # a start the calendar cannot hold
        raise BadInput(f"--after {args.after!r}: {exc}") from None
    rows = [
        {
            "local": fire.at.isoformat(),
            "utc": fire.at.astimezone(timezone.utc).isoformat(),
            "timestamp": fire.timestamp,
            "wall": fire.wall.isoformat(),
            "skipped": fire.skipped,
            "dst": fire.note,
            "more_skipped": getattr(fire, "more_skipped", 0),
        }
        for fire in fires
    ]
    if args.json:
        print_json(rows)
        return 0
    from rich import box
    from rich.table import Table
    from rich.text import Text

    console = make_console()
    table = Table(box=box.SIMPLE_HEAD, header_style="bold", pad_edge=False, show_edge=False)
    for column in ("#", "LOCAL TIME", "UTC", "DST"):
        table.add_column(column, overflow="fold")
    number = 0
    for fire in fires:
        if fire.skipped:
            index = "-"
        else:
            number += 1
            index = str(number)
        note = f"SKIPPED: {fire.note}" if fire.skipped else (fire.note or "")
        local = f"{fire.at:%Y-%m-%d %H:%M:%S %Z (%z)}" if not fire.skipped else f"{fire.wall}"
        utc = f"{fire.at.astimezone(timezone.utc):%Y-%m-%d %H:%M:%SZ}" if not fire.skipped else "-"
        table.add_row(Text(index), Text(local), Text(utc), Text(note))
        more = getattr(fire, "more_skipped", 0)
        if more:
            table.add_row(Text("-"), Text(f"... and {more} more skipped"), Text("-"), Text(""))
    console.print(table)
    marked = sum(1 for f in fires if f.note and not f.skipped)
    skipped = sum(1 + getattr(f, "more_skipped", 0) for f in fires if f.skipped)
    console.print(
        f"{args.expr!r} in {args.tz}: {number} fire times, {marked} on a daylight-saving "
        f"change, {skipped} skipped (gap={args.gap}, overlap={args.overlap})",
        markup=False,
    )
    return 0
