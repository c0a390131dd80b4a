"""A `LocalClient`'s records: the scheduler's jobs and schedules as a store keeps them.

`LocalRecords` turns a job the scheduler holds into the `JobInfo` a `Client`
returns (type, JSON arguments and options as the codec describes them, wall
times, progress, attempts, dependencies), and a recurring schedule into its
`ScheduleInfo`; `ScheduledJob` is the factory of a schedule
`LocalClient.add_schedule` made, which those records read back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from ._codec import JobCodec
from ._errors import SchedulerError, UnknownJobError
from ._job import FunctionJob, Job, callable_name, job_group
from ._limits import job_type_of
from ._options import DEFAULT_QUEUE, check_job_id
from ._records import Attempt, JobInfo, Progress, ScheduleInfo
from ._recurring import IntervalTrigger, RecurringSchedule
from ._status import JobStatus
from .store import result_as_json

if TYPE_CHECKING:
    from ._scheduler import JobScheduler


class LocalRecords:
    """The records of one `LocalClient`'s scheduler. `codec` describes its
    jobs as data; `offset` turns the kernel's monotonic times into wall
    time, one offset for every read, so a job reads the same every time."""

    def __init__(self, scheduler: JobScheduler, codec: JobCodec, offset: float) -> None:
        self.scheduler = scheduler
        self.codec = codec
        self._offset = offset

    def job(self, job_id: str) -> Job:
        """The job with this id the scheduler holds; `UnknownJobError` if none."""
        job = self.scheduler.kernel.table.find(check_job_id(job_id))
        if job is None:
            raise UnknownJobError(f"unknown job {job_id!r}")
        return job

    def info(self, job: Job, *, full: bool = False) -> JobInfo:
        """`job` as the record a `Client` returns; `full` adds its history."""
        scheduler = self.scheduler
        offset = self._offset
        job_id = job.job_id
        type_name, args, options = self.describe(job, offset)
        progress = scheduler.job_progress(job_id)
        history: tuple[Attempt, ...] = ()
        if full:
            history = tuple(
                Attempt(
                    number=a.number,
                    status=a.status.value,
                    error=a.error,
                    started_at=_wall(a.started_at, offset),
                    finished_at=_wall(a.finished_at, offset),
                    worker=None,
                    traceback=a.traceback,
                )
                for a in scheduler.attempt_history(job_id)
            )
        status = job.status
        return JobInfo(
            job_id=job_id,
            type=type_name,
            args=args,
            status=status,
            name=job.name,
            priority=job.priority,
            attempts=job.attempts,
            # A completed job's record has no error: an earlier attempt's is in
            # its history (the Job keeps its last failure, as the reference's).
            last_error=None if status is JobStatus.COMPLETED else job.last_error,
            result=result_as_json(job.result) if status is JobStatus.COMPLETED else None,
            lease_owner=None,
            lease_expires=None,
            key=scheduler.kernel.table.key_of(job_id),
            unique_key=scheduler.unique_key_of(job_id),
            schedule_id=None,
            submitted_by=None,
            submitted_at=job.submitted_at + offset,
            run_at=job.run_at + offset,
            started_at=_wall(job.started_at, offset),
            finished_at=_wall(job.finished_at, offset),
            progress=None
            if progress is None
            else Progress(
                done=progress.done,
                total=progress.total,
                message=progress.message,
                updated_at=progress.updated_at,
            ),
            history=history,
            depends_on=scheduler.kernel.graph.depends_on(job_id),
            trigger_rule=scheduler.kernel.graph.trigger_rule(job_id),
            options=options,
            queue=job.queue,
            result_expires=self._result_expires(job, offset),
            traceback=None if status is JobStatus.COMPLETED else job.last_traceback,
            group=job_group(job),
        )

    def _result_expires(self, job: Job, offset: float) -> float | None:
        if job.status is not JobStatus.COMPLETED or job.finished_at is None:
            return None
        ttl = self.scheduler.kernel.operations.result_ttl_of(job)
        return None if ttl is None else job.finished_at + ttl + offset

    def describe(self, job: Job, offset: float) -> tuple[str, dict[str, Any], dict[str, Any]]:
        """The job's type, arguments and options as a store would keep them;
        a job that is not data (a plain function) by name and reprs."""
        if not isinstance(job, FunctionJob):
            try:
                return self.codec.describe_data(job, offset)
            except SchedulerError:  # JobSpecError: not a registered, describable type
                pass
        if isinstance(job, FunctionJob):
            type_name = callable_name(job.fn)
            args: dict[str, Any] = {
                "args": [repr(a) for a in job.args],
                "kwargs": {k: repr(v) for k, v in job.kwargs.items()},
            }
        else:
            type_name = job_type_of(job)
            args = {}
        options: dict[str, Any] = {
            "name": job.name,
            "executor": str(job.model),
            "priority": job.priority.name.lower(),
            "timeout": job.timeout,
        }
        return type_name, args, options

    def schedule_info(self, sched: RecurringSchedule) -> ScheduleInfo:
        trigger = sched.trigger
        made = sched.factory if isinstance(sched.factory, ScheduledJob) else None
        spec: dict[str, Any]
        if made is not None:
            spec = dict(made.rule)
        elif isinstance(trigger, IntervalTrigger):
            spec = {"interval": trigger.seconds}
        else:
            spec = {"trigger": repr(trigger)}
        next_run: float | None = None
        fire = sched.next_fire
        if sched.active and fire is not None:
            next_run = fire if sched.wall_clock else fire + self._offset
        last = self.scheduler.kernel.table.find(sched.last_job_id) if sched.last_job_id else None
        if made is not None:
            type_name = made.type
        elif last is not None:
            type_name = self.describe(last, 0.0)[0]
        else:
            type_name = callable_name(sched.factory)
        return ScheduleInfo(
            schedule_id=sched.schedule_id,
            name=sched.name,
            type=type_name,
            trigger=spec,
            next_run=next_run,
            paused=sched.paused,
            active=sched.active,
            fired=sched.fired,
            skipped=sched.skipped,
            last_job_id=sched.last_job_id,
            args={} if made is None else made.args,
            queue=DEFAULT_QUEUE if made is None else made.options.get("queue", DEFAULT_QUEUE),
        )


@attrs.frozen(kw_only=True)
class ScheduledJob:
    """The factory of a schedule `LocalClient.add_schedule` made: each call
    builds a new job from the description (a registered type, JSON
    arguments, options), which `update_schedule` and the schedules' records
    read back. `rule` is the trigger as given (``{"interval": 60}``,
    ``{"cron": ..., "tz": ...}``)."""

    codec: JobCodec
    type: str
    args: dict[str, Any]
    options: dict[str, Any]
    rule: dict[str, Any]
    offset: float

    def __call__(self) -> Job:
        return self.codec.build(self.type, self.args, self.options, self.offset, self.type)

    def __repr__(self) -> str:
        return f"ScheduledJob({self.type})"


def _wall(monotonic: float | None, offset: float) -> float | None:
    return None if monotonic is None else monotonic + offset
