"""What the operator commands share (``jobs retry``, ``schedules pause``, ``queue pause``...).

Each acts on a store through a `jobsched.Client`: PostgreSQL, or any SQLite
file (one that ``jobsched worker`` serves, or one that ``jobsched run
--store`` or ``JobScheduler(store=...)`` owns: the store applies an action
there while no owner runs and names the owner while one does). The memory
store is refused: its jobs live in one process, which a command cannot reach.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import datetime, timezone, tzinfo
from typing import Any, TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .. import Client, OperatorAPI, PluginManager, SchedulerError, StoreError
from ..store import (
    StoreContext,
    new_worker_id,
    offers_a_role,
    require_roles,
    resolve_store,
)
from ._common import BadInput, configure_logging

T = TypeVar("T")

#: The statuses `Client.retry`/`requeue` take a job from, and every terminal one.
RETRYABLE = ("failed", "timed_out", "cancelled")
TERMINAL = ("completed", *RETRYABLE)

_UNITS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0, "": 1.0}
_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*([dhms]?)\Z")


def parse_duration(text: str) -> float:
    """Seconds in ``7d``, ``12h``, ``30m``, ``45s``, ``1.5h`` or plain ``90``.

    An `argparse.ArgumentTypeError` (the usage error's one line) for anything else.
    """
    found = _DURATION.match(text.strip().lower())
    seconds = float(found.group(1)) * _UNITS[found.group(2)] if found else math.nan
    if not math.isfinite(seconds):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration such as 7d, 12h, 30m, 45s, 1.5h or 90 (seconds)"
        )
    return seconds


def format_duration(seconds: float) -> str:
    """`seconds` in the largest unit that shows it exactly: 604800 -> ``7d``."""
    for unit in ("d", "h", "m"):
        count = seconds / _UNITS[unit]
        if count >= 1 and count == round(count, 3):
            return f"{count:g}{unit}"
    return f"{seconds:g}s"


def status_list(allowed: tuple[str, ...], what: str) -> Callable[[str], list[str]]:
    """An argparse type: ``failed,timed_out`` -> the statuses, each one of `allowed`."""

    def parse(text: str) -> list[str]:
        statuses = [part.strip().lower() for part in text.split(",") if part.strip()]
        if not statuses:
            raise argparse.ArgumentTypeError(f"{text!r} names no status")
        for status in statuses:
            if status not in allowed:
                raise argparse.ArgumentTypeError(
                    f"{status!r} is not a status {what}: only {', '.join(allowed)}"
                )
        return statuses

    return parse


def flatten(groups: Iterable[list[str]] | None) -> list[str] | None:
    """Repeated ``--status`` options, each a list, as one list without repeats."""
    if groups is None:
        return None
    return list(dict.fromkeys(status for group in groups for status in group))


def unique(ids: Iterable[str]) -> list[str]:
    """`ids` in the order given, each once."""
    return list(dict.fromkeys(ids))


def add_store_options(
    parser: argparse.ArgumentParser, json_help: str, *, required: bool = True
) -> None:
    """``--store URL`` (required, unless a subcommand of `parser` takes it) and ``--json``."""
    parser.add_argument(
        "--store",
        metavar="URL",
        required=required,
        help="the store: postgresql://host/db, or an SQLite file (sqlite:////abs/path/jobs.db) "
        "that workers serve or that `jobsched run --store` wrote",
    )
    parser.add_argument("--json", action="store_true", help=f"{json_help} (docs/cli.md)")


def operate(
    args: argparse.Namespace,
    plugins: PluginManager,
    action: Callable[[OperatorAPI], Awaitable[T]],
    *,
    needs: Sequence[str],
) -> T:
    """``action(client)`` with a `Client` open on ``--store``; its errors as bad input.

    `needs` are the store roles `action` uses (``"operate"``, ``"schedules"``...;
    `jobsched.store.ROLES`). A store that is not shared, lacks one of them,
    cannot be opened, or does not exist yet is bad input (one line, exit 2);
    so is an unknown id or a job in the wrong status that `action` meets (its
    message names them).
    """
    configure_logging("console", "warning")
    return asyncio.run(_operate(args.store, plugins, action, needs))


async def _operate(
    url: str,
    plugins: PluginManager,
    action: Callable[[OperatorAPI], Awaitable[T]],
    needs: Sequence[str],
) -> T:
    client = await open_client(url, plugins, needs)
    try:
        return await action(client)
    except (SchedulerError, ValueError) as exc:
        # UnknownJobError, UnknownScheduleError, InvalidTransitionError, a
        # status refused: the store changed between our check and the action.
        # (A KeyError's str() is its repr: say its message.)
        raise BadInput(str(exc.args[0]) if exc.args else str(exc)) from None
    finally:
        await client.close()


def _not_shared(url: str, why: str) -> BadInput:
    return BadInput(
        "operator actions need a store kept outside one process (postgresql://host/db, "
        f"or an SQLite file: sqlite:////abs/path/jobs.db); --store {url!r} {why}"
    )


async def open_client(url: str, plugins: PluginManager, needs: Sequence[str]) -> Client:
    """An open `Client` on the shared store at `url`, which must exist already
    and offer the roles `needs` (and ``lookup``, which a `Client` needs).

    The store is first opened read-only: that creates nothing, so a typo in
    the URL is reported instead of becoming a new, empty store.
    """
    try:
        store = resolve_store(url, plugins)
    except SchedulerError as exc:
        raise BadInput(str(exc)) from None
    if store is None or not offers_a_role(store):
        raise _not_shared(url, "is not a store several processes can share")
    require_roles(store, ("lookup", *needs), "this command")  # exit 2 naming a missing role
    await store.open(StoreContext(worker_id=new_worker_id(), readonly=True))
    await store.close()
    try:
        client = Client(url, plugins=plugins)
    except SchedulerError as exc:
        raise _not_shared(url, str(exc)) from None
    try:
        await client.open()
    except StoreError as exc:
        raise _not_shared(url, f"is not one: {exc}") from None
    return client


def wall_time(epoch: float | None, zone: tzinfo | None = None) -> str:
    """``2026-12-01 10:00:00 CET (+0100)``: local time (or `zone`'s) with its UTC offset."""
    if epoch is None:
        return "-"
    moment = datetime.fromtimestamp(epoch, timezone.utc).astimezone(zone)
    return f"{moment:%Y-%m-%d %H:%M:%S %Z (%z)}"


def iso_time(epoch: float | None, zone: tzinfo | None = None) -> str | None:
    """ISO 8601 with the UTC offset, in local time (or `zone`'s); None for None."""
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, timezone.utc).astimezone(zone).isoformat()


def trigger_zone(trigger: Any) -> tzinfo | None:
    """The time zone a cron trigger fires in (its ``tz``), else None (local time)."""
    spec = trigger.get("trigger", trigger) if isinstance(trigger, dict) else None
    name = spec.get("tz") if isinstance(spec, dict) else None
    if not isinstance(name, str):
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


def describe_trigger(trigger: Any) -> str:
    """A schedule's trigger in a few words: ``every 30s``, ``cron "0 2 * * *" Europe/Berlin``."""
    spec = trigger.get("trigger", trigger) if isinstance(trigger, dict) else trigger
    if isinstance(spec, dict):
        every = spec.get("interval", spec.get("every"))
        if isinstance(every, int | float) and not isinstance(every, bool):
            return f"every {format_duration(float(every))}"
        cron = spec.get("cron")
        if isinstance(cron, str):
            tz = spec.get("tz")
            return f'cron "{cron}"' + (f" {tz}" if isinstance(tz, str) else "")
    import json

    return json.dumps(spec, sort_keys=True, default=str)
