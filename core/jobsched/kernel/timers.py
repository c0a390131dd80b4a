"""Recurring schedules on the kernel's own timers: one timer per schedule, no polling."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from .._errors import SchedulerStoppedError, UnknownScheduleError
from .._recurring import (
    CoalescePolicy,
    IntervalTrigger,
    RecurringSchedule,
    Trigger,
    build_trigger,
)

if TYPE_CHECKING:
    from .._clock import Clock
    from .._job import Job
    from .._plugins import PluginManager
    from ..hookspecs import SchedulerView

logger = structlog.get_logger("jobsched")


class ScheduleHooks(Protocol):
    """What the timers tell the backend (the schedule part of `Backend`)."""

    def schedule_added(self, sched: RecurringSchedule, spec: Any, key: str | None) -> None: ...

    def schedule_changed(self, sched: RecurringSchedule) -> None: ...

    def schedule_fired(self, sched: RecurringSchedule, job_id: str) -> None: ...


#: ``submit(job, delay=..., key=...) -> job id``: the kernel's submit.
Submit = Callable[..., str]


class Timers:
    """The recurring schedules the kernel runs, by id and by key.

    Each fire submits ``factory()`` through `submit`; what a fire, a pause
    or an end changes is told to the backend (`ScheduleHooks`).
    """

    def __init__(
        self,
        *,
        clock: Clock,
        rng: random.Random,
        plugins: PluginManager,
        hooks: ScheduleHooks,
        submit: Submit,
        find: Callable[[str], Job | None],
    ) -> None:
        self._clock = clock
        self._rng = rng
        self._plugins = plugins
        self._hooks = hooks
        self._submit = submit
        self._find = find
        self._schedules: dict[str, RecurringSchedule] = {}
        self._keys: dict[str, str] = {}
        self._key_of: dict[str, str] = {}
        self._subject: SchedulerView | None = None  # what a misfire hook receives
        self._running = False
        self._closed = False

    def __contains__(self, schedule_id: object) -> bool:
        return schedule_id in self._schedules

    # ── lifecycle ─────────────────────────────────────────────────────
    def start(self, subject: SchedulerView) -> None:
        """Arm every unpaused schedule; misfire hooks receive `subject`."""
        self._subject = subject
        self._running = True
        for sched in list(self._schedules.values()):
            if not sched.paused:
                self._arm(sched)

    def stop(self) -> None:
        """Fire no more (a stop began)."""
        self._running = False
        self._closed = True
        for sched in list(self._schedules.values()):
            if sched.timer is not None:
                sched.timer.cancel()
                sched.timer = None

    # ── schedules ─────────────────────────────────────────────────────
    def schedules(self) -> list[RecurringSchedule]:
        """The active recurring schedules."""
        return list(self._schedules.values())

    def add(
        self,
        factory: Callable[[], Job],
        interval: float | None = None,
        *,
        start_in: float = 0.0,
        allow_overlap: bool = False,
        trigger: Trigger | dict[str, Any] | None = None,
        misfire_grace_time: float | None = None,
        coalesce: CoalescePolicy = "one",
        jitter: float = 0.0,
        name: str | None = None,
        key: str | None = None,
    ) -> str:
        """A schedule the kernel runs on its own timers (what `schedule_recurring`
        does unless the backend keeps schedules); its id."""
        if key is not None:
            known = self._keys.get(key)
            if known is not None:
                existing = self._schedules.get(known)
                if existing is not None:
                    existing.factory = factory
                return known
        spec = trigger if trigger is not None else {"interval": interval}
        if trigger is not None:
            if start_in:
                raise TypeError("start_in is for interval schedules; a trigger sets its own start")
            trigger = build_trigger(trigger, lambda n: self._plugins.resolve("triggers", n))
        elif interval is None:
            raise TypeError("schedule_recurring() needs an interval or a trigger")
        else:
            trigger = IntervalTrigger(interval, start_in=start_in)
        sched = RecurringSchedule(
            factory,
            allow_overlap=allow_overlap,
            trigger=trigger,
            misfire_grace_time=misfire_grace_time,
            coalesce=coalesce,
            jitter=jitter,
            name=name,
        )
        sched.bind(self._clock)
        self._hooks.schedule_added(sched, spec, key)
        if key is not None:
            self._keys[key] = sched.schedule_id
            self._key_of[sched.schedule_id] = key
        self._schedules[sched.schedule_id] = sched
        if self._running and not sched.paused:
            self._arm(sched)
        return sched.schedule_id

    def restore(self, sched: RecurringSchedule | None, schedule_id: str, key: str | None) -> None:
        """Install a schedule read back from a store (None: an ended one, whose key stays known)."""
        if sched is not None:
            self._schedules[schedule_id] = sched
            if key is not None:
                self._key_of[schedule_id] = key
        if key is not None:
            self._keys[key] = schedule_id

    def cancel(self, schedule_id: str) -> bool:
        """Stop a schedule; False if these timers run no such schedule."""
        sched = self._schedules.pop(schedule_id, None)
        if sched is None:
            return False
        sched.active = False
        if sched.timer is not None:
            sched.timer.cancel()
            sched.timer = None
        self._hooks.schedule_changed(sched)
        return True

    def pause(self, schedule_id: str) -> bool:
        """Stop a schedule from firing until `resume`.

        False if it is already paused; `UnknownScheduleError` naming it if
        the scheduler runs no such schedule.
        """
        sched = self._get(schedule_id)
        if sched.paused:
            return False
        sched.paused = True
        if sched.timer is not None:
            sched.timer.cancel()
            sched.timer = None
        self._hooks.schedule_changed(sched)
        return True

    def resume(self, schedule_id: str) -> bool:
        """Let a paused schedule fire again: its next fire is the first one after now
        (the fires it missed while paused are skipped). False if not paused."""
        sched = self._get(schedule_id)
        if not sched.paused:
            return False
        sched.paused = False
        sched.skip_past(self._clock)
        self._hooks.schedule_changed(sched)
        if self._running:
            self._arm(sched)
        return True

    def trigger(self, schedule_id: str) -> str:
        """Submit the schedule's job once, now; its next fire time does not move.

        Returns the job's id. Fires even while the schedule is paused, and
        regardless of `allow_overlap`.
        """
        if self._closed:
            raise SchedulerStoppedError("scheduler is stopping")
        sched = self._get(schedule_id)
        key = self._key_of.get(sched.schedule_id)
        job_id = self._submit(
            sched.factory(), key=None if key is None else f"{key}#{sched.fired + 1}"
        )
        sched.fired_job(job_id)
        self._hooks.schedule_fired(sched, job_id)
        self._hooks.schedule_changed(sched)
        return job_id

    def _get(self, schedule_id: str) -> RecurringSchedule:
        sched = self._schedules.get(schedule_id)
        if sched is None:
            raise UnknownScheduleError(f"unknown recurring schedule {schedule_id!r}")
        return sched

    # ── firing ────────────────────────────────────────────────────────
    def _arm(self, sched: RecurringSchedule) -> None:
        when = sched.arm_time(self._clock)
        if when is None:  # the trigger is exhausted (a date that has fired)
            sched.active = False
            self._schedules.pop(sched.schedule_id, None)
            self._hooks.schedule_changed(sched)
            return
        sched.timer = self._clock.call_at(when, lambda: self._on_timer(sched))

    def _on_timer(self, sched: RecurringSchedule) -> None:
        sched.timer = None
        if not sched.active or sched.paused or not self._running:
            return
        fires = sched.take_due(self._clock)
        self._hooks.schedule_changed(sched)  # its next fire time moved on
        if sched.pending_misfires:
            assert self._subject is not None
            for fire, lateness, count in sched.pending_misfires:
                self._plugins.schedule_misfired(self._subject, sched, fire, lateness, count)
            sched.pending_misfires.clear()
        if fires:
            self._fire(sched, fires)
        self._arm(sched)

    def _fire(self, sched: RecurringSchedule, fires: list[float]) -> None:
        previous = self._find(sched.last_job_id) if sched.last_job_id else None
        if previous is not None and not previous.status.is_terminal and not sched.allow_overlap:
            sched.skipped += len(fires)
            return
        key = self._key_of.get(sched.schedule_id) if self._key_of else None
        for _ in fires:
            try:
                delay = sched.jitter_delay(self._rng)
                job_id = self._submit(
                    sched.factory(),
                    delay=delay,
                    key=None if key is None else f"{key}#{sched.fired + 1}",
                )
            except Exception:  # a broken factory must not stop the schedule
                logger.exception("recurring schedule failed to fire", schedule_id=sched.schedule_id)
                continue
            sched.fired_job(job_id)
            self._hooks.schedule_fired(sched, job_id)
