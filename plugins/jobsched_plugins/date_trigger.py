"""The ``date`` trigger: one run at a given wall-clock time."""

from __future__ import annotations

from datetime import datetime, tzinfo
from typing import Literal

from jobsched import hookimpl
from jobsched.hookspecs import Register

from ._zones import resolve_zone


class DateTrigger:
    """Fires once, at `when`: an aware `datetime`, an ISO 8601 string or epoch seconds.

    A naive datetime or an ISO string without an offset is read in `tz`
    (default UTC); a wall time that a daylight-saving change skips or repeats
    is read as ``zoneinfo`` does (``fold=0``): a skipped 02:30 runs at 03:30,
    a repeated 01:30 runs at its first occurrence. A time already past when the
    schedule is created runs at once, unless the schedule's
    ``misfire_grace_time`` says it is too late.
    """

    timebase: Literal["wall"] = "wall"

    def __init__(self, when: datetime | str | float, *, tz: str | tzinfo | None = None) -> None:
        zone = resolve_zone(tz)
        if isinstance(when, str):
            try:
                when = datetime.fromisoformat(when)
            except ValueError:
                raise ValueError(
                    f"date trigger: {when!r} is not an ISO 8601 date-time "
                    "(such as '2026-12-01T09:00:00')"
                ) from None
        if isinstance(when, datetime):
            if when.tzinfo is None:
                when = when.replace(tzinfo=zone)
            timestamp = when.timestamp()
        elif isinstance(when, (int, float)) and not isinstance(when, bool):
            timestamp = float(when)
        else:
            raise ValueError(
                f"date trigger needs a datetime, an ISO 8601 string or epoch seconds, got {when!r}"
            )
        self.timestamp = timestamp
        self.at = datetime.fromtimestamp(timestamp, zone)

    def first_fire(self, now: float) -> float:
        return self.timestamp

    def next_fire(self, previous: float) -> None:
        return None

    def __repr__(self) -> str:
        return f"DateTrigger({self.at.isoformat()})"


@hookimpl
def jobsched_register_triggers(register: Register) -> None:
    register("date", DateTrigger)
