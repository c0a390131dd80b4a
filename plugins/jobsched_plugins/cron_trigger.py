"""The ``cron`` trigger: cron expressions evaluated in a named time zone.

Expressions are parsed and matched by `cronsim` (standard 5 fields, or 6 with
a leading seconds field), always on *naive wall-clock times*, so the library
never sees a daylight-saving change. This module then maps each matching wall
time to real instants in the zone with two explicit, per-schedule rules:

``gap`` (the wall time does not exist: clocks jumped over it)
    ``"shift"`` (default) -- run at the same distance past the jump: 02:30 in a
    02:00->03:00 jump runs at 03:30 (RFC 5545's rule; what ``zoneinfo`` does
    with ``fold=0``). ``"transition"`` -- run at the instant of the jump, 03:00
    (Vixie/Debian cron's rule). ``"skip"`` -- don't run that day.

``overlap`` (the wall time happens twice: clocks went back over it)
    ``"first"`` (default) -- run once, at the first occurrence (summer time).
    ``"second"`` -- run once, at the second occurrence (standard time).
    ``"both"`` -- run at both.

Two wall times that map to one instant fire once.
"""

from __future__ import annotations

import heapq
import itertools
import math
import re
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone, tzinfo
from typing import Literal

import attrs
from cronsim import CronSim, CronSimError

from jobsched import hookimpl
from jobsched.hookspecs import Register

from ._zones import resolve_zone

GapRule = Literal["shift", "transition", "skip"]
OverlapRule = Literal["first", "second", "both"]
GAP_RULES: tuple[str, ...] = ("shift", "transition", "skip")
OVERLAP_RULES: tuple[str, ...] = ("first", "second", "both")

_PROBE = 2 * 86400.0  # look this far either side for a nearby offset change
#: The times a preview may start from: a probe either side stays in datetime's years 1-9999.
EARLIEST = datetime(1, 1, 3, tzinfo=timezone.utc)
LATEST = datetime(9999, 12, 29, tzinfo=timezone.utc)
#: How many fires of one run of consecutive skipped ones a preview lists; the
#: last listed says how many more followed (`Fire.more_skipped`).
SKIPPED_LISTED = 5


#: Vixie cron's shorthands, and what each stands for.
SHORTHANDS: dict[str, str] = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
# A day-of-week range that ends on Sunday, written as SUN or 0: "SAT-SUN", "1-0/2".
_TO_SUNDAY = re.compile(r"^(?P<start>[^-/,#]+)-(?:sun|0)(?P<step>/\d+)?$", re.IGNORECASE)


def to_cronsim(expr: str) -> str:
    """`expr` as cronsim reads it: shorthands expanded, a range that ends on Sunday ends on 7.

    Sunday is 0 (or SUN) and also 7; cronsim reads ``SAT-SUN`` as the empty
    range 6-0, where every cron user means Saturday and Sunday.
    """
    text = " ".join(expr.split())
    if text.startswith("@"):
        shorthand = SHORTHANDS.get(text.lower())
        if shorthand is None:
            raise ValueError(
                f"invalid cron expression {expr!r}: unknown shorthand; "
                f"known: {', '.join(SHORTHANDS)}"
            )
        return shorthand
    fields = text.split(" ")
    if len(fields) in (5, 6):  # day-of-week is the last field either way
        fields[-1] = ",".join(_sunday_as_seven(part) for part in fields[-1].split(","))
    return " ".join(fields)


def _sunday_as_seven(part: str) -> str:
    match = _TO_SUNDAY.match(part)
    if match is None or match["start"].lower() in ("sun", "0"):
        return part  # SUN-SUN stays Sunday alone
    return f"{match['start']}-7{match['step'] or ''}"


@attrs.frozen(kw_only=True)
class Fire:
    """One fire time as `CronTrigger.preview` reports it."""

    #: The wall time the expression matched (naive, in the trigger's zone).
    wall: datetime
    #: When it really fires (aware, in the trigger's zone); for a skipped fire,
    #: when it would have fired under ``gap="shift"``.
    at: datetime
    #: `at` as epoch seconds.
    timestamp: float
    #: Why a daylight-saving rule moved or skipped it; None for an ordinary fire.
    note: str | None = None
    skipped: bool = False
    #: On the last listed fire of a run of skipped ones: how many more skipped
    #: fires follow it unlisted (the run is listed up to `SKIPPED_LISTED`).
    more_skipped: int = 0


class CronTrigger:
    """Fires when a cron expression matches the wall clock in time zone `tz`.

    `expr` is a standard 5-field expression (``"0 2 * * *"``), 6 fields with
    seconds first (``"*/15 * * * * *"``), or a shorthand: ``@hourly``,
    ``@daily`` (``@midnight``), ``@weekly``, ``@monthly``, ``@yearly``
    (``@annually``). Sunday is 0, SUN or 7, so ``SAT-SUN`` and ``MON-SUN``
    are the ranges they read as. `tz` is an IANA zone name (default
    UTC). `gap` and `overlap` choose what happens on daylight-saving days (see
    the module docs). Bad input raises `ValueError` naming the culprit.

    Example -- ``0 2 * * *`` in ``America/New_York``:

    * spring forward (2026-03-08, 02:00 EST -> 03:00 EDT): 02:00 does not exist;
      ``gap="shift"`` and ``"transition"`` both run at 03:00 EDT (07:00 UTC),
      ``"skip"`` does not run that day;
    * fall back (2026-11-01, 02:00 EDT -> 01:00 EST): 01:00-01:59 happen twice
      but 02:00 happens once, so it runs once at 02:00 EST (07:00 UTC), 25
      hours after the day before's run, whatever the `overlap` rule.
    """

    timebase: Literal["wall"] = "wall"

    def __init__(
        self,
        expr: str,
        *,
        tz: str | tzinfo | None = None,
        gap: GapRule = "shift",
        overlap: OverlapRule = "first",
    ) -> None:
        if not isinstance(expr, str) or not expr.strip():
            raise ValueError(f"cron expression must be a non-empty string, got {expr!r}")
        self._fields = to_cronsim(expr)  # what cronsim is given
        try:
            CronSim(self._fields, datetime(2000, 1, 1))
        except CronSimError as exc:
            raise ValueError(f"invalid cron expression {expr!r}: {exc}") from None
        if gap not in GAP_RULES:
            raise ValueError(f"gap must be one of {GAP_RULES}, got {gap!r}")
        if overlap not in OVERLAP_RULES:
            raise ValueError(f"overlap must be one of {OVERLAP_RULES}, got {overlap!r}")
        self.expr = " ".join(expr.split())
        self.tz = resolve_zone(tz)
        self.gap = gap
        self.overlap = overlap

    def __repr__(self) -> str:
        return (
            f"CronTrigger({self.expr!r}, tz={str(self.tz)!r}, "
            f"gap={self.gap!r}, overlap={self.overlap!r})"
        )

    # ── the Trigger protocol ──────────────────────────────────────────
    def first_fire(self, now: float) -> float | None:
        return self.next_fire(now)

    def next_fire(self, previous: float) -> float | None:
        """The first fire strictly after `previous` (epoch seconds); None if none in 50 years."""
        event = self._next_event(previous, include_skipped=False)
        return None if event is None else event.timestamp

    # ── preview ───────────────────────────────────────────────────────
    def preview(self, after: float | datetime, count: int = 5) -> list[Fire]:
        """The next `count` fires after `after`, with the ones a DST rule moved or skipped.

        Skipped fires are listed (``skipped=True``) but don't count toward
        `count`; of a run of consecutive skipped fires (every second of a
        skipped hour) the first `SKIPPED_LISTED` are listed, the last of them
        saying how many more followed (`Fire.more_skipped`). `after` must lie
        between `EARLIEST` and `LATEST`; the fires end near the end of year 9999.
        """
        given = after
        if isinstance(after, datetime):
            if after.tzinfo is None:
                after = after.replace(tzinfo=self.tz)
            after = after.timestamp()
        if count < 1:
            raise ValueError(f"count must be >= 1, got {count!r}")
        if not EARLIEST.timestamp() <= after <= LATEST.timestamp():
            raise ValueError(
                f"a preview starts between {EARLIEST.date()} and {LATEST.date()} (UTC), "
                f"not at {given}"
            )
        out: list[Fire] = []
        fired = 0
        run = 0  # skipped fires in a row
        for event in self._events(after, include_skipped=True):
            if event.skipped:
                run += 1
                if run > SKIPPED_LISTED:
                    out[-1] = attrs.evolve(out[-1], more_skipped=run - SKIPPED_LISTED)
                else:
                    out.append(event)
                continue
            run = 0
            out.append(event)
            fired += 1
            if fired == count:
                break
        return out

    # ── internals ─────────────────────────────────────────────────────
    def _offset(self, ts: float) -> float:
        offset = datetime.fromtimestamp(ts, self.tz).utcoffset()
        return 0.0 if offset is None else offset.total_seconds()

    def _swing(self, ts: float) -> float:
        """How far the UTC offset changes within two days of `ts` (0 almost always)."""
        here = self._offset(ts)
        return max(abs(self._offset(ts - _PROBE) - here), abs(self._offset(ts + _PROBE) - here))

    def _wall(self, ts: float) -> datetime:
        """The naive wall time at epoch seconds `ts`."""
        return datetime.fromtimestamp(ts, self.tz).replace(tzinfo=None)

    def _events(self, after: float, *, include_skipped: bool) -> Iterator[Fire]:
        """Every fire after `after` in time order, from one walk over the wall times.

        A fire found is held until the walk passes its wall time plus the
        nearby offset change (`_next_event`'s window): no later wall time can
        fire before it then. Two wall times at one instant give the ordinary
        fire. The walk ends with cronsim's 50 years or with year 9999.
        """
        held: list[tuple[float, bool, int, Fire, datetime]] = []  # a heap, earliest first
        order = itertools.count()
        last = after
        try:
            start = self._wall(after) - timedelta(seconds=self._swing(after) + 1)
            for wall in CronSim(self._fields, start):
                while held and held[0][4] < wall:
                    fire = heapq.heappop(held)[3]
                    if fire.timestamp > last:
                        last = fire.timestamp
                        yield fire
                for fire in self._resolve(wall):
                    if fire.timestamp <= after or (fire.skipped and not include_skipped):
                        continue
                    release = wall + timedelta(seconds=self._swing(fire.timestamp))
                    entry = (fire.timestamp, fire.note is not None, next(order), fire, release)
                    heapq.heappush(held, entry)
        except (CronSimError, OverflowError, ValueError):
            pass  # no match in 50 years, or past year 9999 ("year 10000 is out of range")
        while held:
            fire = heapq.heappop(held)[3]
            if fire.timestamp > last:
                last = fire.timestamp
                yield fire

    def _next_event(self, after: float, *, include_skipped: bool) -> Fire | None:
        # Wall times are monotonic in real time except around a DST change,
        # where a matching wall time slightly *before* wall(after) can fire
        # after `after` (a shifted gap time, a second occurrence). Start that
        # far back and keep the earliest instant found within the same window.
        swing = self._swing(after)
        start = self._wall(after) - timedelta(seconds=swing + 1)
        best: Fire | None = None
        horizon: datetime | None = None
        try:
            candidates = CronSim(self._fields, start)
            for wall in candidates:
                if horizon is not None and wall > horizon:
                    break
                for fire in self._resolve(wall):
                    if fire.skipped and not include_skipped:
                        continue
                    if fire.timestamp <= after:
                        continue
                    if (
                        best is None
                        or fire.timestamp < best.timestamp
                        # Two wall times, one instant: report the ordinary one.
                        or (fire.timestamp == best.timestamp and best.note and not fire.note)
                    ):
                        best = fire
                if best is not None and horizon is None:
                    horizon = wall + timedelta(seconds=self._swing(best.timestamp))
        except CronSimError:  # cronsim gives up after 50 years without a match
            pass
        return best

    def _resolve(self, wall: datetime) -> list[Fire]:
        """The instants a matching wall time fires at, under the gap and overlap rules."""
        tz = self.tz
        early = wall.replace(tzinfo=tz, fold=0)
        late = wall.replace(tzinfo=tz, fold=1)
        t0, t1 = early.timestamp(), late.timestamp()
        if t0 == t1:
            return [Fire(wall=wall, at=early, timestamp=t0)]
        if t0 < t1:  # overlap: fold=0 is the first occurrence
            first = Fire(
                wall=wall,
                at=datetime.fromtimestamp(t0, tz),
                timestamp=t0,
                note=f"{wall:%H:%M:%S} happens twice; first ({early.tzname()})",
            )
            second = Fire(
                wall=wall,
                at=datetime.fromtimestamp(t1, tz),
                timestamp=t1,
                note=f"{wall:%H:%M:%S} happens twice; second ({late.tzname()})",
            )
            if self.overlap == "first":
                return [first]
            if self.overlap == "second":
                return [second]
            return [first, second]
        # Gap: fold=0 reads the wall time with the offset from before the jump,
        # which lands the same distance past the jump ("shift").
        shifted = datetime.fromtimestamp(t0, tz)
        jump = timedelta(seconds=t0 - t1)
        if self.gap == "shift":
            return [
                Fire(
                    wall=wall,
                    at=shifted,
                    timestamp=t0,
                    note=f"{wall:%H:%M:%S} does not exist; shifted +{_hm(jump)} "
                    f"to {shifted:%H:%M:%S %Z}",
                )
            ]
        if self.gap == "skip":
            return [
                Fire(
                    wall=wall,
                    at=shifted,
                    timestamp=t0,
                    note=f"{wall:%H:%M:%S} does not exist; skipped (gap='skip')",
                    skipped=True,
                )
            ]
        moment = self._transition_between(t1, t0)
        at = datetime.fromtimestamp(moment, tz)
        return [
            Fire(
                wall=wall,
                at=at,
                timestamp=moment,
                note=f"{wall:%H:%M:%S} does not exist; moved to the jump at {at:%H:%M:%S %Z}",
            )
        ]

    def _transition_between(self, lo: float, hi: float) -> float:
        """The instant in ``[lo, hi]`` where the UTC offset changes (to the second)."""
        after = self._offset(hi)
        lo_s, hi_s = math.floor(lo), math.ceil(hi)
        while hi_s - lo_s > 1:
            mid = (lo_s + hi_s) // 2
            if self._offset(mid) == after:
                hi_s = mid
            else:
                lo_s = mid
        return float(hi_s)


def _hm(delta: timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    return f"{minutes // 60}:{minutes % 60:02d}"


def preview(
    expr: str,
    *,
    tz: str | tzinfo | None = None,
    count: int = 5,
    after: float | datetime | None = None,
    gap: GapRule = "shift",
    overlap: OverlapRule = "first",
) -> list[Fire]:
    """``jobsched schedule preview``'s logic: the next `count` fires of `expr` in `tz`.

    `after` defaults to now. Fires that a DST rule moved carry a `note`;
    fires it skipped are included with ``skipped=True``.
    """
    trigger = CronTrigger(expr, tz=tz, gap=gap, overlap=overlap)
    if after is None:
        after = datetime.now(timezone.utc)
    return trigger.preview(after, count)


def format_preview(fires: list[Fire]) -> Iterator[str]:
    """One line per fire: local time, UTC time, and the DST note if any."""
    for fire in fires:
        utc = fire.at.astimezone(timezone.utc)
        mark = "SKIPPED " if fire.skipped else ""
        line = f"{fire.at:%Y-%m-%d %H:%M:%S %Z (%z)}  {utc:%Y-%m-%d %H:%M:%S}Z"
        if fire.note:
            line += f"  {mark}[DST: {fire.note}]"
        yield line


@hookimpl
def jobsched_register_triggers(register: Register) -> None:
    register("cron", CronTrigger)
