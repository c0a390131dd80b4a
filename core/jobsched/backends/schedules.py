"""Recurring schedules on a shared store, for every process that serves one.

A worker's ``JobScheduler.schedule_recurring`` (through `SharedBackend`) and
``Client.add_schedule`` both go through here, so the same job and trigger are
ONE schedule wherever they are registered:

* `schedule_row` checks the trigger, computes the first fire and the id, and
  returns the `SharedScheduleRow` to store; `replacement_row` is the row of
  an edited schedule (its new job arguments or rule);
* `schedule_id` derives the id from the job and the trigger (never from when
  or where the schedule was registered), spelled as stores already hold it;
* `next_fire` steps a schedule along its grid: interval fire k is at
  ``origin + k * interval`` (computed, never summed, so it does not drift), a
  wall-clock trigger (cron, date) steps by its own rule, and periods missed
  while nobody served the schedule coalesce into the one firing now;
* `serve` fires each period through the store's compare-and-set
  (`SharedStore.fire_schedule`): once per period however many processes
  serve the schedule;
* `ScheduleServer` is what one process serves: the schedules it registered
  and, in a worker, every schedule stored (so a schedule outlives the
  process that added it), each as one `serve` task; a schedule whose job
  this process cannot build (its type or trigger is not installed here, or
  its stored arguments do not fit this version) is left to the processes
  that can, so none of its periods is consumed here;
* `overdue` says whether a schedule's fire is late enough that no process
  can be serving it.

Times are wall-clock epoch seconds: a schedule's row is read on other hosts.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import structlog

from .._codec import sort_key
from .._job import Job
from .._jobtypes import JobSpecError, retry_policy_data
from .._options import DEFAULT_QUEUE, check_delay, check_key, check_queue, to_priority
from .._recurring import IntervalTrigger, Trigger, build_trigger
from ..store import NewJob, SharedScheduleRow, SharedStore

if TYPE_CHECKING:
    from .._codec import JobCodec
    from .._plugins import PluginManager
    from .._strategy import SortKey

logger = structlog.get_logger("jobsched.schedules")

#: ``resolve(name)``: the factory of the trigger plugin registered as `name`.
ResolveTrigger = Callable[[str], Any]

#: Seconds a schedule's fire may be late before it is called overdue: a process
#: serving it fires a period when it is due (a store error: `serve` tries again
#: after its pause), and a worker finds a newly stored schedule within its poll
#: interval (5 s); later than this, no process is firing it. It also absorbs a
#: few seconds of clock skew between the hosts that fire and read it.
OVERDUE_AFTER = 10.0

#: Keys of a stored trigger that belong to the schedule, not to the trigger's
#: rule: ``times`` ends it after N fires, ``key`` tells schedules apart, and
#: ``origin`` is an interval schedule's first fire (the start of its grid).
SCHEDULE_KEYS = ("times", "key", "origin")


def schedule_row(
    codec: JobCodec,
    job: Job,
    *,
    every: float | None = None,
    trigger: Mapping[str, Any] | Trigger | None = None,
    start_in: float = 0.0,
    times: int | None = None,
    key: str | None = None,
    allow_overlap: bool = False,
    now: float,
    offset: float,
) -> SharedScheduleRow:
    """The row of a schedule submitting `job` every `every` seconds (first
    after `start_in`) or whenever `trigger` fires (a mapping such as ``{"cron":
    "0 2 * * *", "tz": "Europe/Berlin"}``: other hosts rebuild it from data, so
    a trigger object is refused).

    `times` ends the schedule after that many fires; `key` makes it another
    schedule than the same job and trigger without it. `now` is the wall
    clock; `offset` turns the job's monotonic deadline into wall-clock time.
    Bad input is a `ValueError` or `TypeError` naming it; a job that cannot be
    stored is a `JobSpecError`.
    """
    if (every is None) == (trigger is None):
        raise TypeError("a schedule takes an interval (every=) or a trigger=: exactly one of them")
    if times is not None and (isinstance(times, bool) or not isinstance(times, int) or times < 1):
        raise ValueError(f"times must be an integer >= 1, got {times!r}")
    if key is not None:
        check_key(key)
    start_in = check_delay(start_in, "start_in")
    if trigger is None:
        rule: dict[str, Any] = {"interval": every}
    elif isinstance(trigger, Mapping):
        rule = dict(trigger)
    else:
        raise TypeError(
            "a shared store keeps triggers as data: pass the trigger as a mapping "
            '(e.g. {"cron": "0 2 * * *"}), not a trigger object'
        )
    first: float | None
    if "interval" in rule:
        IntervalTrigger(rule["interval"])  # the kernel's checks and bounds
        first = now + start_in
    else:
        if start_in:
            raise TypeError(
                "start_in is for interval schedules; a trigger says when it first fires"
            )
        wall = _wall_trigger(rule, _resolver(codec.plugins))
        first = _after(wall, wall.first_fire(now), now)
        if first is None:
            raise ValueError(f"trigger {rule!r} never fires")
    spec = dict(rule)
    if times is not None:
        spec["times"] = times
    if key is not None:
        spec["key"] = key
    if "interval" in rule:
        spec["origin"] = first
    type_name, args, options = codec.describe_data(job, offset)
    identity = identity_options(job, offset, codec.plugins)
    return SharedScheduleRow(
        schedule_id=schedule_id(type_name, args, identity, spec, allow_overlap),
        type=type_name,
        args=args,
        options=options,
        trigger=spec,
        next_run=first,
        allow_overlap=allow_overlap,
    )


def replacement_row(
    codec: JobCodec,
    old: SharedScheduleRow,
    *,
    args: Mapping[str, Any] | None = None,
    every: float | None = None,
    trigger: Mapping[str, Any] | None = None,
    now: float,
    offset: float,
) -> SharedScheduleRow:
    """The row of `old` edited: its job with `args` (None: the same) and a new
    rule, `every` seconds or `trigger` (neither: the same rule).

    The rest of `old` is kept: its job type and options (name, queue,
    priority, ...), ``times``, ``key`` and ``allow_overlap``. An interval's
    first fire is one period from `now` (an edit is not a "run now"); a
    trigger's is its next fire after `now`. The id is the one `schedule_row`
    gives the edited job and rule, so adding that schedule again in code
    finds it (a changed schedule has a new id). The job is built from the
    stored description: its type must be installed here, and `args` must
    fit its fields (a `JobSpecError` naming the culprit otherwise).
    """
    if every is not None and trigger is not None:
        raise TypeError("a schedule takes an interval (every=) or a trigger=, not both")
    if every is None and trigger is None:
        rule = {k: v for k, v in old.trigger.items() if k not in SCHEDULE_KEYS}
        if "interval" in rule:
            every = rule["interval"]
        else:
            trigger = rule
    if every is not None:
        IntervalTrigger(every)  # its own message before start_in's
    job = codec.build(
        old.type,
        old.args if args is None else args,
        old.options,
        offset,
        f"schedule {old.schedule_id}",
    )
    return schedule_row(
        codec,
        job,
        every=every,
        trigger=trigger,
        start_in=0.0 if every is None else float(every),
        times=old.trigger.get("times"),
        key=old.trigger.get("key"),
        allow_overlap=old.allow_overlap,
        now=now,
        offset=offset,
    )


def schedule_id(
    type_name: str,
    args: Mapping[str, Any],
    identity: Mapping[str, Any],
    trigger: Mapping[str, Any],
    allow_overlap: bool,
) -> str:
    """``sched-<hash>`` of the job (type, args, `identity_options`), the
    trigger (with ``times`` and ``key``, without ``origin``) and `allow_overlap`."""
    spec = {k: v for k, v in trigger.items() if k != "origin"}
    ident = json.dumps([type_name, args, identity, spec, allow_overlap], sort_keys=True)
    return "sched-" + hashlib.sha256(ident.encode()).hexdigest()[:16]


def identity_options(job: Job, offset: float, plugins: PluginManager) -> dict[str, Any]:
    """The job's options as a schedule id hashes them.

    Spelled as shared mode stored options before the codec (priority as a
    number, every option present, no executor): a schedule keeps the id it
    has in existing stores, so processes of either version serve the same one.
    """
    return {
        "name": job.name,
        "priority": int(job.priority),
        "timeout": job.timeout,
        "retry": retry_policy_data(job.retry, plugins),
        "deadline": None if job.deadline is None else job.deadline + offset,
    }


def next_fire(
    trigger: Mapping[str, Any], previous: float, now: float, resolve_trigger: ResolveTrigger
) -> float | None:
    """The fire after the period due at `previous` that is also after `now`,
    on the schedule's grid (the periods in between coalesce into the one
    firing now); None once the trigger is exhausted.

    `trigger` is the stored mapping; `resolve_trigger` finds the trigger
    plugins a wall-clock trigger names. An interval stored without an
    ``origin`` (by an earlier version) runs its grid from `previous`.
    """
    if "interval" in trigger:
        grid = IntervalTrigger(float(trigger["interval"]))
        origin = float(trigger.get("origin", previous))
        return grid.fire_time(origin, grid.last_index(origin, max(previous, now)) + 1)
    wall = _wall_trigger(
        {k: v for k, v in trigger.items() if k not in SCHEDULE_KEYS}, resolve_trigger
    )
    return _after(wall, wall.next_fire(previous), now)


def ended(schedule: SharedScheduleRow) -> bool:
    """Whether the schedule fires no more (cancelled, or its last period fired)."""
    return not schedule.active or not math.isfinite(schedule.next_run)


def overdue(schedule: SharedScheduleRow, now: float) -> bool:
    """Whether the schedule should have fired more than `OVERDUE_AFTER` seconds
    before `now` (wall clock) and has not: no process serves it (or none that
    can build its job). A paused or ended schedule is never overdue."""
    return not ended(schedule) and not schedule.paused and schedule.next_run < now - OVERDUE_AFTER


async def serve(
    store: SharedStore,
    schedule: SharedScheduleRow,
    *,
    codec: JobCodec,
    strategy_key: Callable[[Job], SortKey],
    submitted_by: str,
    job_id_suffix: str,
    retry_pause: float,
) -> None:
    """Fire the stored `schedule`'s periods until it ends, then mark it inactive.

    Each period is a compare-and-set in the store, so any number of
    processes may serve one schedule: the first to move its ``next_run`` on
    submits the period's job, the others see the schedule's new state. The
    jobs are submitted with `strategy_key`'s sort key as `submitted_by`, with
    ids ending in `job_id_suffix`. After a store error the period is tried
    again `retry_pause` seconds later. Cancel the task to stop serving.
    """
    log = logger.bind(schedule=schedule.schedule_id, process=submitted_by)
    resolve = _resolver(codec.plugins)
    while not ended(schedule):
        if schedule.paused:
            # An operator paused it (every process): look again now and then;
            # resuming sets the next period, which the loop then waits for.
            await asyncio.sleep(retry_pause)
            try:
                schedule = await store.get_schedule(schedule.schedule_id)
            except Exception as exc:
                log.error("cannot read a paused schedule", error=str(exc))
            continue
        wait = schedule.next_run - time.time()
        if wait > 0:
            await asyncio.sleep(wait)
        now = time.time()
        try:
            following = next_fire(schedule.trigger, schedule.next_run, now, resolve)
            job = fired_job(
                codec,
                schedule,
                now=now,
                strategy_key=strategy_key,
                submitted_by=submitted_by,
                job_id_suffix=job_id_suffix,
                scheduled_for=schedule.next_run,
            )
        except (JobSpecError, ValueError) as exc:
            # A job type or trigger this process lacks: processes that have it serve it.
            log.error("cannot serve schedule", error=str(exc))
            return
        try:
            # An exhausted trigger fires this last period, then stops for everyone.
            await store.fire_schedule(
                schedule.schedule_id,
                schedule.next_run,
                math.inf if following is None else following,
                job,
            )
            schedule = await store.get_schedule(schedule.schedule_id)
        except Exception as exc:
            # The store reconnects; the period is fired on the next try.
            log.error("schedule fire failed", error=str(exc))
            await asyncio.sleep(retry_pause)
    if schedule.active:
        try:
            await store.deactivate_schedule(schedule.schedule_id)
        except Exception as exc:
            log.error("cannot mark an ended schedule inactive", error=str(exc))


def fired_job(
    codec: JobCodec,
    schedule: SharedScheduleRow,
    *,
    now: float,
    strategy_key: Callable[[Job], SortKey],
    submitted_by: str,
    job_id_suffix: str,
    scheduled_for: float | None,
) -> NewJob:
    """The job one period of `schedule` submits (built from its stored data).

    `scheduled_for` is the period's time (None for a job an operator
    triggered outside the periods).
    A job type or option this process lacks is a `JobSpecError`.
    """
    label = f"job of schedule {schedule.schedule_id}"
    # The job's deadline goes from data to a job and back to data: any offset
    # cancels out, and 0 keeps it in wall-clock time for the sort key.
    job = codec.build(schedule.type, schedule.args, schedule.options, 0.0, label)
    return codec.new_job(
        job,
        job_id=f"{job.job_id}-{job_id_suffix}",
        strategy_key=strategy_key,
        now=now,
        offset=0.0,
        schedule_id=schedule.schedule_id,
        scheduled_for=scheduled_for,
        submitted_by=submitted_by,
    )


class ScheduleServer:
    """The schedules one process fires, each by one `serve` task.

    `add` stores a schedule this process registers and serves it; `watch`
    makes the process serve every stored schedule too (a worker's: a
    schedule does not stop when the process that added it exits), looking
    for new ones every `retry_pause` seconds. A stored schedule whose job
    this process cannot build is logged once and left to the processes that
    can (see `cannot_serve`): nothing of it is fired, and none of its periods
    consumed, here. `close` stops serving. The jobs fired are sorted by
    `strategy_key`, submitted by `submitted_by`, with ids ending in
    `job_id_suffix`.
    """

    def __init__(
        self,
        store: SharedStore,
        *,
        codec: JobCodec,
        strategy_key: Callable[[Job], SortKey],
        submitted_by: str,
        job_id_suffix: str,
        retry_pause: float,
    ) -> None:
        self._store = store
        self._codec = codec
        self._strategy_key = strategy_key
        self._submitted_by = submitted_by
        self._job_id_suffix = job_id_suffix
        self._retry_pause = retry_pause
        self._serving: dict[str, asyncio.Task[None]] = {}
        #: Stored schedules this process cannot build a job for -> why.
        self.unservable: dict[str, str] = {}
        self._watcher: asyncio.Task[None] | None = None
        self._log = logger.bind(process=submitted_by)

    @property
    def serving(self) -> frozenset[str]:
        """The ids of the schedules this process serves now."""
        return frozenset(self._serving)

    def add(self, schedule: SharedScheduleRow) -> None:
        """Store `schedule` (a schedule of its id already stored is made active
        again and keeps its state) and serve it."""
        self._start(schedule, stored=False)

    def watch(self) -> None:
        """Serve every stored schedule this process can, now and as they are added."""
        if self._watcher is None:
            self._watcher = asyncio.get_running_loop().create_task(
                self._watch(), name="jobsched-schedules"
            )

    def stop(self, schedule_id: str) -> bool:
        """Stop serving one schedule here (others may go on); False if not served."""
        task = self._serving.pop(schedule_id, None)
        if task is None:
            return False
        task.cancel()
        return True

    async def close(self) -> None:
        """Stop serving every schedule, and looking for new ones."""
        tasks = [*self._serving.values(), *([self._watcher] if self._watcher else [])]
        self._serving.clear()
        self._watcher = None
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def cannot_serve(self, schedule: SharedScheduleRow, now: float) -> str | None:
        """Why this process cannot fire `schedule`, or None if it can.

        Firing a period stores a job built from the schedule's data, so it
        needs the job type (and a wall-clock trigger's plugin) installed here
        and stored arguments that fit this version of the type. A process
        that lacks them leaves the schedule to those that have them.
        """
        try:
            next_fire(schedule.trigger, schedule.next_run, now, _resolver(self._codec.plugins))
            self._fired_job(schedule, now)
        except Exception as exc:
            return str(exc) or type(exc).__name__
        return None

    def _fired_job(self, schedule: SharedScheduleRow, now: float) -> NewJob:
        return fired_job(
            self._codec,
            schedule,
            now=now,
            strategy_key=self._strategy_key,
            submitted_by=self._submitted_by,
            job_id_suffix=self._job_id_suffix,
            scheduled_for=schedule.next_run,
        )

    def _start(self, schedule: SharedScheduleRow, *, stored: bool) -> None:
        schedule_id = schedule.schedule_id
        if schedule_id in self._serving:
            return
        task = asyncio.get_running_loop().create_task(
            self._serve(schedule, stored=stored), name=f"jobsched-schedule-{schedule_id}"
        )
        self._serving[schedule_id] = task
        task.add_done_callback(lambda done: self._served(schedule_id, done))

    def _served(self, schedule_id: str, task: asyncio.Task[None]) -> None:
        if self._serving.get(schedule_id) is task:
            del self._serving[schedule_id]
        if not task.cancelled() and task.exception() is not None:
            # A watching process serves it again at its next look.
            self._log.error(
                "serving a schedule failed", schedule=schedule_id, error=repr(task.exception())
            )

    async def _serve(self, schedule: SharedScheduleRow, *, stored: bool) -> None:
        while not stored:
            try:
                schedule = await self._store.add_schedule(schedule)
                stored = True
            except Exception as exc:
                # Registered here, so not to be lost: stored when the store is back.
                self._log.error(
                    "cannot store schedule", schedule=schedule.schedule_id, error=str(exc)
                )
                await asyncio.sleep(self._retry_pause)
        await serve(
            self._store,
            schedule,
            codec=self._codec,
            strategy_key=self._strategy_key,
            submitted_by=self._submitted_by,
            job_id_suffix=self._job_id_suffix,
            retry_pause=self._retry_pause,
        )

    async def _watch(self) -> None:
        while True:
            try:
                stored = await self._store.schedules()
            except Exception as exc:
                self._log.error("cannot read the stored schedules", error=str(exc))
                stored = []
            now = time.time()
            for schedule in stored:
                schedule_id = schedule.schedule_id
                if (
                    ended(schedule)
                    or schedule_id in self._serving
                    or schedule_id in self.unservable
                ):
                    continue
                reason = self.cannot_serve(schedule, now)
                if reason is not None:
                    self.unservable[schedule_id] = reason
                    self._log.warning(
                        "not serving schedule: its job cannot be built here",
                        schedule=schedule_id,
                        type=schedule.type,
                        reason=reason,
                    )
                    continue
                self._start(schedule, stored=True)
            await asyncio.sleep(self._retry_pause)


def triggered_job(
    schedule: SharedScheduleRow,
    *,
    now: float,
    strategy_key: Callable[[Job], SortKey],
    submitted_by: str,
    job_id_suffix: str,
) -> NewJob:
    """The job an operator's trigger of `schedule` submits: its stored
    description copied as it is, so the process needs neither the job type
    nor the task's code (a ``@task`` schedule triggered from ``jobsched web``).

    The sort key is the strategy's for a job with the stored priority and
    deadline. Options that are not what the codec stores are a `JobSpecError`.
    """
    label = f"job of schedule {schedule.schedule_id}"
    options = schedule.options
    if not isinstance(options, Mapping) or not isinstance(schedule.args, Mapping):
        raise JobSpecError(f"{label}: its stored arguments and options must be tables")
    stand_in = Job(str(options.get("name") or schedule.type))
    try:
        stand_in.priority = to_priority(options.get("priority", "medium"))
    except ValueError as exc:
        raise JobSpecError(f"{label}: {exc}") from None
    deadline = options.get("deadline")
    if deadline is not None:
        if isinstance(deadline, bool) or not isinstance(deadline, int | float):
            raise JobSpecError(f"{label}: its stored deadline {deadline!r} is not a time")
        stand_in.deadline = float(deadline)
    try:
        queue = check_queue(options.get("queue", DEFAULT_QUEUE))
    except ValueError as exc:
        raise JobSpecError(f"{label}: {exc}") from None
    return NewJob(
        job_id=f"{stand_in.job_id}-{job_id_suffix}",
        key=None,
        type=schedule.type,
        args=dict(schedule.args),
        options=dict(options),
        run_at=now,
        submitted_at=now,
        sort_key=sort_key(strategy_key, stand_in, submitted_at=now, offset=0.0),
        schedule_id=schedule.schedule_id,
        submitted_by=submitted_by,
        queue=queue,
    )


def _resolver(plugins: PluginManager) -> ResolveTrigger:
    return lambda name: plugins.resolve("triggers", name)


def _wall_trigger(rule: Mapping[str, Any], resolve: ResolveTrigger) -> Trigger:
    trigger = build_trigger(dict(rule), resolve)
    if trigger.timebase != "wall":
        raise ValueError(f"trigger {dict(rule)!r} is not a wall-clock trigger")
    return trigger


def _after(trigger: Trigger, fire: float | None, now: float) -> float | None:
    """`fire`, or the trigger's first fire after it that is after `now`."""
    while fire is not None and fire <= now:
        fire = trigger.next_fire(fire)
    return fire
