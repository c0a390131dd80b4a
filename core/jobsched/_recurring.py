"""Recurring schedules, each driven by a trigger.

A trigger is a rule that says when something fires; a schedule binds a trigger
to a job factory and applies the policies every trigger shares: the misfire
grace time, the coalescing policy, jitter and the overlap guard. The scheduler
arms one timer per schedule; this module decides what happens when it rings.
"""

from __future__ import annotations

import collections
import itertools
import math
import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, Protocol

import structlog

from ._options import MAX_DELAY

if TYPE_CHECKING:
    from ._clock import Clock, TimerHandle
    from ._job import Job

logger = structlog.get_logger("jobsched.recurring")

_schedule_ids = itertools.count(1)

#: Fire times within this many seconds of "now" count as due: timers may ring a
#: hair early, and a virtual clock must never re-arm a timer for the same instant.
EPSILON = 1e-6
#: At most this many missed fires are collected in one wake-up (see ``coalesce``).
MAX_CATCH_UP = 1000

#: The ids of a schedule's last fired jobs it keeps (`RecurringSchedule.recent`,
#: the dashboard's "last runs" of an in-process schedule).
RECENT_RUNS = 20

#: The shortest interval: a finer one would only spin the loop.
MIN_INTERVAL = 0.001
#: The longest interval, one year (a cron or date trigger says "yearly" better).
MAX_INTERVAL = MAX_DELAY

Timebase = Literal["monotonic", "wall"]
CoalescePolicy = Literal["one", "all", "none"]
COALESCE_POLICIES: tuple[str, ...] = ("one", "all", "none")


class Trigger(Protocol):
    """When a recurring schedule fires. Registered through ``jobsched_register_triggers``.

    A trigger computes fire times in its own `timebase`: ``"monotonic"``
    (``clock.now()``, for intervals: immune to wall-clock changes) or ``"wall"``
    (``clock.time()``, seconds since the epoch, for cron and dates: a fire
    "at 02:00 in Berlin" is a wall-clock instant). The scheduler converts wall
    times to its monotonic timers, re-checking the wall clock when a timer rings.

    Triggers are pure rules: they keep no per-schedule state, so one trigger
    object may drive several schedules.
    """

    timebase: Timebase

    def first_fire(self, now: float) -> float | None:
        """The first fire time at or after `now` (in `timebase`); None: never fires."""

    def next_fire(self, previous: float) -> float | None:
        """The fire time after the fire at `previous`; None: the trigger is exhausted."""


class IntervalTrigger:
    """Every `seconds` seconds, at a fixed rate (the reference design's schedule).

    Fixed rate, not fixed delay: fire k of a schedule is ``origin + k *
    seconds``, where `origin` is its first fire, `start_in` seconds after the
    schedule is created. Computed, never summed: adding 0.3 s a million times
    to a large monotonic time drifts by most of a millisecond, and slow ticks
    never make the schedule drift either.
    """

    timebase: Timebase = "monotonic"

    def __init__(self, seconds: float, *, start_in: float = 0.0) -> None:
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0:
            raise ValueError(f"interval must be a positive number of seconds, got {seconds!r}")
        if not MIN_INTERVAL <= seconds <= MAX_INTERVAL:
            raise ValueError(
                f"interval must be from {MIN_INTERVAL} to {MAX_INTERVAL:.0f} seconds "
                f"(1ms to one year), got {seconds!r}"
            )
        if not start_in >= 0:
            raise ValueError(f"start_in must be >= 0, got {start_in!r}")
        self.seconds = float(seconds)
        self.start_in = float(start_in)

    def first_fire(self, now: float) -> float:
        return now + self.start_in

    def next_fire(self, previous: float) -> float:
        """The Trigger protocol's step; a schedule uses `fire_time`, which does not drift."""
        return previous + self.seconds

    def fire_time(self, origin: float, index: int) -> float:
        """Fire `index` (0 is the first) of a schedule whose first fire is at `origin`."""
        return origin + index * self.seconds

    def last_index(self, origin: float, now: float) -> int:
        """The index of the last fire at or before `now`; -1 before the first.

        O(1): a schedule paused for a day at a millisecond interval must not
        iterate 86 million missed fires.
        """
        index = math.floor((now - origin) / self.seconds)
        # The division can round across a fire time: settle on the exact one.
        while self.fire_time(origin, index + 1) <= now:
            index += 1
        while index >= 0 and self.fire_time(origin, index) > now:
            index -= 1
        return max(index, -1)

    def __repr__(self) -> str:
        return f"IntervalTrigger({self.seconds}s)"


def reserve_schedule_ids(floor: int) -> None:
    """Make every later id ``sched-N`` have N > `floor` (ids restored from a store)."""
    global _schedule_ids
    following = next(_schedule_ids)
    _schedule_ids = itertools.count(max(following, floor + 1))


class RecurringSchedule:
    """Fires ``factory()`` whenever its trigger says so.

    ``RecurringSchedule(factory, interval, first_run, allow_overlap)`` is the
    reference design's fixed-rate schedule; pass ``trigger=`` for any other rule.

    Policies shared by every trigger:

    * ``allow_overlap=False`` skips a fire while the previous job is unfinished.
    * ``misfire_grace_time``: a fire that comes more than this many seconds
      late (the loop was busy, the process paused) is skipped and reported
      (``misfired`` counter, a log event, the ``jobsched_schedule_misfired``
      hook). None: always run, however late.
    * ``coalesce``, for several fires that came due in one wake-up (the process
      was paused or suspended): ``"one"`` runs once for all of them (its
      lateness judged by the latest), ``"all"`` runs every missed fire (up to
      `MAX_CATCH_UP`), ``"none"`` runs none of them and reports them as
      misfires. A single due fire is never "missed".
    * ``jitter``: each run is submitted with a random delay in ``[0, jitter]``
      seconds, so many schedules on one minute don't start at one instant.
    """

    def __init__(
        self,
        factory: Callable[[], Job],
        interval: float | None = None,
        first_run: float | None = None,
        allow_overlap: bool = False,
        *,
        trigger: Trigger | None = None,
        misfire_grace_time: float | None = None,
        coalesce: CoalescePolicy = "one",
        jitter: float = 0.0,
        name: str | None = None,
    ) -> None:
        if trigger is None:
            if interval is None:
                raise TypeError("a recurring schedule needs an interval or a trigger")
            trigger = IntervalTrigger(interval)
        elif interval is not None:
            raise TypeError("give a recurring schedule an interval or a trigger, not both")
        for attr in ("first_fire", "next_fire"):
            if not callable(getattr(trigger, attr, None)):
                raise TypeError(f"trigger {trigger!r} has no {attr}() method")
        if getattr(trigger, "timebase", None) not in ("monotonic", "wall"):
            raise TypeError(
                f"trigger {trigger!r}: timebase must be 'monotonic' or 'wall', "
                f"got {getattr(trigger, 'timebase', None)!r}"
            )
        if misfire_grace_time is not None and not misfire_grace_time >= 0:
            raise ValueError(f"misfire_grace_time must be >= 0 or None, got {misfire_grace_time!r}")
        if coalesce not in COALESCE_POLICIES:
            raise ValueError(f"coalesce must be one of {COALESCE_POLICIES}, got {coalesce!r}")
        if not jitter >= 0 or not math.isfinite(jitter):
            raise ValueError(f"jitter must be a finite number >= 0, got {jitter!r}")
        self.schedule_id = f"sched-{next(_schedule_ids)}"
        self.name = name
        self.factory = factory
        self.trigger = trigger
        self.allow_overlap = allow_overlap
        self.misfire_grace_time = misfire_grace_time
        self.coalesce = coalesce
        self.jitter = jitter
        #: The next fire time in the trigger's timebase; None until bound, or when exhausted.
        self.next_fire: float | None = first_run
        # An interval schedule's grid: next_fire is fire `_index` after `_origin`.
        self._origin = first_run
        self._index = 0
        #: The monotonic time the timer is armed for (``math.inf`` when exhausted).
        self.next_run = math.inf if first_run is None else first_run
        self._bound = first_run is not None
        self.active = True
        #: Paused by an operator (`JobScheduler.pause_schedule`): armed for no fire.
        self.paused = False
        self.last_job_id: str | None = None
        #: The ids of its last `RECENT_RUNS` fired jobs, oldest first (`fired_job`).
        self.recent: collections.deque[str] = collections.deque(maxlen=RECENT_RUNS)
        self.fired = 0  # runs submitted
        self.skipped = 0  # fires skipped by the overlap guard
        self.coalesced = 0  # missed fires folded into another run
        self.misfired = 0  # fires skipped as too late (grace time, coalesce="none")
        self.timer: TimerHandle | None = None
        #: (fire time, lateness) of the latest misfire.
        self.last_misfire: tuple[float, float] | None = None
        #: Misfires not yet reported to plugins, (fire time, lateness, fires):
        #: the scheduler drains this.
        self.pending_misfires: list[tuple[float, float, int]] = []

    def fired_job(self, job_id: str) -> None:
        """Count a run of the schedule: `job_id` is its job."""
        self.fired += 1
        self.last_job_id = job_id
        self.recent.append(job_id)

    @property
    def interval(self) -> float | None:
        """The interval of an interval schedule; None for other triggers."""
        return self.trigger.seconds if isinstance(self.trigger, IntervalTrigger) else None

    @property
    def wall_clock(self) -> bool:
        return self.trigger.timebase == "wall"

    def bind(self, clock: Clock) -> None:
        """Compute the first fire time, once, when the schedule is created."""
        if self._bound:
            return
        self._bound = True
        now = clock.time() if self.wall_clock else clock.now()
        self.next_fire = self._origin = self.trigger.first_fire(now)

    def arm_time(self, clock: Clock) -> float | None:
        """The monotonic time to arm the timer for; None when the trigger is exhausted."""
        fire = self.next_fire
        if fire is None:
            self.next_run = math.inf
            return None
        if self.wall_clock:
            # Re-derived at every arming: a wall-clock step (NTP, suspend) is
            # corrected at the next fire at the latest.
            now = clock.now()
            self.next_run = now + max(0.0, fire - clock.time())
        else:
            self.next_run = fire
        return self.next_run

    def take_due(self, clock: Clock) -> list[float]:
        """Consume the fires due now; return the fire times to run, after every policy.

        Empty when the timer rang early (nothing due) or every due fire was
        skipped. Advances `next_fire` past now.
        """
        fire = self.next_fire
        if fire is None:
            return []
        now = clock.time() if self.wall_clock else clock.now()
        if fire > now + EPSILON:
            return []  # early (the wall clock was set back): re-arm
        (count, fires), nxt = self._collect(fire, now)
        self.next_fire = nxt
        grace = self.misfire_grace_time
        if count > 1 and self.coalesce == "none":
            self._misfire(fires[-1], now, count, "missed while paused (coalesce='none')")
            return []
        if self.coalesce != "all":  # "one", or a single due fire
            latest = fires[-1]
            if grace is not None and now - latest > grace + EPSILON:
                self._misfire(latest, now, count, f"later than misfire_grace_time={grace}s")
                return []
            self.coalesced += count - 1
            return [latest]
        if grace is None:
            return fires
        on_time = [f for f in fires if now - f <= grace + EPSILON]
        late = len(fires) - len(on_time)
        if late:
            self._misfire(fires[late - 1], now, late, f"later than misfire_grace_time={grace}s")
        return on_time

    def _collect(self, fire: float, now: float) -> tuple[tuple[int, list[float]], float | None]:
        """Due fires from `fire` up to `now`: ((count, fire times), next fire after now)."""
        trigger = self.trigger
        if isinstance(trigger, IntervalTrigger):
            return self._collect_on_grid(trigger, now)
        fast_forward = getattr(trigger, "fast_forward", None)
        if fast_forward is not None and self.coalesce != "all":
            count, latest, nxt = fast_forward(fire, now + EPSILON)
            return (count, [latest]), nxt
        fires = [fire]
        count = 1
        nxt = trigger.next_fire(fire)
        while nxt is not None and nxt <= now + EPSILON:
            count += 1
            if count > MAX_CATCH_UP:
                # A pause long enough to miss this many fires: jump ahead (on
                # the interval's grid; a cron rule's grid is absolute anyway).
                if fast_forward is not None:
                    nxt = fast_forward(fire, now + EPSILON)[2]
                else:
                    nxt = trigger.next_fire(now)
                    while nxt is not None and nxt <= now + EPSILON:
                        nxt = trigger.next_fire(nxt)
                count = MAX_CATCH_UP
                break
            fires.append(nxt)
            nxt = trigger.next_fire(nxt)
        return (count, fires), nxt

    def _collect_on_grid(
        self, trigger: IntervalTrigger, now: float
    ) -> tuple[tuple[int, list[float]], float]:
        """`_collect` for an interval: every time is ``origin + k * seconds``; moves the index."""
        origin, first = self._origin, self._index
        assert origin is not None  # bound: next_fire is set
        last = max(trigger.last_index(origin, now + EPSILON), first)
        if self.coalesce == "all":
            # At most MAX_CATCH_UP of them; then on from the grid after now.
            indexes = range(first, min(last, first + MAX_CATCH_UP - 1) + 1)
            count, fires = len(indexes), [trigger.fire_time(origin, i) for i in indexes]
        else:
            count, fires = last - first + 1, [trigger.fire_time(origin, last)]
        self._index = last + 1
        return (count, fires), trigger.fire_time(origin, last + 1)

    def _misfire(self, fire: float, now: float, count: int, why: str) -> None:
        self.misfired += count
        self.last_misfire = (fire, now - fire)
        logger.warning(
            "schedule misfired",
            schedule_id=self.schedule_id,
            schedule_name=self.name,
            fire_time=fire,
            lateness=round(now - fire, 6),
            fires=count,
            reason=why,
        )
        self.pending_misfires.append((fire, now - fire, count))

    def skip_past(self, clock: Clock) -> None:
        """Move the next fire past now, dropping the fires due meanwhile (a resume)."""
        fire = self.next_fire
        if fire is None:
            return
        now = clock.time() if self.wall_clock else clock.now()
        if fire > now + EPSILON:
            return
        self.next_fire = self._collect(fire, now)[1]

    def jitter_delay(self, rng: random.Random) -> float:
        """The random delay to submit one run with."""
        return rng.uniform(0.0, self.jitter) if self.jitter else 0.0

    def advance(self, now: float) -> int:
        """Move the schedule past `now` (monotonic); return how many fires were coalesced.

        The reference design's ``advance``, kept for interval schedules.
        """
        fire = self.next_fire
        if fire is None:
            return 0
        (count, _), nxt = self._collect(fire, now)
        self.next_fire = nxt
        self.next_run = math.inf if nxt is None else nxt
        return max(count - 1, 0)

    def __repr__(self) -> str:
        state = "active" if self.active else "cancelled"
        interval = self.interval
        rule = f"every {interval}s" if interval is not None else repr(self.trigger)
        return f"RecurringSchedule({self.schedule_id}, {rule}, {state})"

    def describe(self) -> dict[str, Any]:
        return {
            "schedule_id": self.schedule_id,
            "name": self.name,
            "trigger": repr(self.trigger),
            "interval": self.interval,
            "next_run": self.next_run,
            "next_fire": self.next_fire,
            "fired": self.fired,
            "skipped": self.skipped,
            "coalesced": self.coalesced,
            "misfired": self.misfired,
            "active": self.active,
            "paused": self.paused,
        }


def build_trigger(spec: Trigger | dict[str, Any], resolve: Callable[[str], Any]) -> Trigger:
    """A trigger from an object or a job-file style mapping.

    ``{"cron": "*/5 * * * *", "tz": "Europe/Berlin"}`` calls the factory
    registered as ``"cron"`` with the expression as its first argument and the
    other keys as keyword options. Exactly one key must name a registered
    trigger; `resolve(name)` returns its factory or raises `PluginError`.
    """
    if not isinstance(spec, dict):
        return spec
    names: list[str] = []
    unknown: list[str] = []
    for key in spec:
        try:
            resolve(key)
        except Exception as exc:
            unknown.append(str(exc))
        else:
            names.append(key)
    if len(names) != 1:
        hint = f": {unknown[0]}" if not names and unknown else ""
        raise ValueError(
            f"trigger {spec!r}: exactly one key must name a trigger "
            f"(such as 'cron', 'interval' or 'date'), found {names or 'none'}{hint}"
        )
    name = names[0]
    options = {k: v for k, v in spec.items() if k != name}
    factory = resolve(name)
    try:
        trigger = factory(spec[name], **options)
    except TypeError as exc:
        raise ValueError(f"trigger {spec!r}: {exc}") from exc
    return trigger  # type: ignore[no-any-return]
