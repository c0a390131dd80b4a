"""What one submit asks for besides the job: `Submission`, the checks and
overrides every submit path applies to it, and `plan`, the one batch planner
(`JobScheduler`, `LocalClient` and `Client` alike; the journal backend keeps
its deferred submits as `Submission`s), so the same options mean the same
thing, with the same errors, whichever API takes them."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from ._errors import SchedulerError, UnknownJobError
from ._job import FunctionJob, Job, set_job_group
from ._jobtypes import build_retry_policy
from ._options import (
    NOT_GIVEN,
    NotGiven,
    check_delay,
    check_group,
    check_key,
    check_queue,
    id_list,
    to_keep_result,
    to_name,
    to_priority,
    to_result_ttl,
    to_timeout,
)
from ._status import JobPriority, JobStatus
from ._trigger_rules import ALL_SUCCESS, check_trigger_rule
from ._workflow import expand

if TYPE_CHECKING:
    from ._plugins import PluginManager
    from ._workflow import Workflow

#: The options of `submit` that override a job's own, besides `result_ttl`
#: and `keep_result`.
JOB_OVERRIDES = frozenset({"priority", "timeout", "retry", "name", "queue"})


@attrs.frozen
class Submission:
    """One job of `Client.submit_many`, with `submit`'s options.

    `depends_on` names jobs by the id `submit` returned or, for a job of the
    same batch, by the `Job` object itself.
    """

    job: Job
    delay: float = 0.0
    depends_on: Sequence[str | Job] = ()
    key: str | None = None
    unique_key: str | None = None
    priority: JobPriority | str | int | None = None
    #: Seconds per attempt; None or False: no timeout; `NOT_GIVEN` (the
    #: default) keeps the job's own.
    timeout: float | bool | NotGiven | None = NOT_GIVEN
    retry: Any = None
    name: str | None = None
    #: None keeps the job's own (see `Client.submit`).
    result_ttl: float | None = None
    keep_result: bool | None = None
    #: When it runs given how `depends_on` end (see `Client.submit`).
    trigger_rule: str = "all_success"
    #: The queue it waits in; None keeps the job's own (docs/queues.md).
    queue: str | None = None
    #: The job's group (a tenant); None keeps the job's own (see `Client.submit`).
    group: str | None = None


def overrides(item: Submission) -> bool:
    """Whether `item` sets one of the job's own options (`Client` and
    `LocalClient` then submit a copy of the job: see `with_options`)."""
    return (
        item.priority is not None
        or item.timeout is not NOT_GIVEN
        or item.retry is not None
        or item.name is not None
        or item.result_ttl is not None
        or item.keep_result is not None
        or item.queue is not None
        or item.group is not None
    )


def check_submission(item: Submission) -> None:
    """`submit`'s scheduling options of `item` (delay, keys, trigger rule),
    checked as `Client` and `LocalClient` both check them."""
    if item.delay != 0.0:
        check_delay(item.delay)
    id_list(item.depends_on, "depends_on")
    if item.key is not None:
        check_key(item.key, "key")
    if item.unique_key is not None:
        check_key(item.unique_key, "unique_key")
    check_trigger_rule(item.trigger_rule)


def with_options(
    job: Job,
    item: Submission,
    plugins: PluginManager,
    hooks: Iterable[Callable[[Any], None]] = (),
) -> Job:
    """A copy of `job` (`item`'s) with the submission's options set (each
    checked, spelled as in `JobScheduler.submit`) and the submit `hooks`
    applied: the caller's job is never changed."""
    job = copy.copy(job)
    if item.priority is not None:
        job.priority = to_priority(item.priority)
    if item.timeout is not NOT_GIVEN:
        job.timeout = to_timeout(item.timeout)
    if item.retry is not None:
        job.retry = build_retry_policy(item.retry, plugins)
    if item.name is not None:
        job.name = to_name(item.name)
    if item.result_ttl is not None:
        job.result_ttl = to_result_ttl(item.result_ttl)
    if item.keep_result is not None:
        job.keep_result = to_keep_result(item.keep_result)
    if item.queue is not None:
        job.queue = check_queue(item.queue)
    if item.group is not None:
        set_job_group(job, check_group(item.group))
    for hook in hooks:
        hook(job)
    return job


def check_workflow_options(
    workflow: Workflow,
    *,
    delay: float,
    given: Iterable[Any],
    timeout: Any,
    trigger_rule: str,
) -> None:
    """Refuse `submit`'s options (but `depends_on`) for a workflow: each of its
    jobs carries its own. `given` are the options whose unset value is None."""
    # Each against its own default: priority=0 or keep_result=False would
    # pass for an unset 0.0.
    if (
        delay != 0.0
        or any(v is not None for v in given)
        or timeout is not NOT_GIVEN
        or trigger_rule != ALL_SUCCESS
    ):
        raise TypeError(
            f"submit({workflow!r}) takes depends_on only: set each job's options "
            "on the job itself (task.options(...))"
        )


def check_job_options(job: Job, options: Iterable[str]) -> None:
    """Refuse a keyword of `submit` that is no option of a `Job`."""
    unexpected = sorted(set(options) - JOB_OVERRIDES)
    if unexpected:
        raise TypeError(
            f"submit() got unexpected keyword arguments {unexpected} for {job!r}; "
            f"a job takes {', '.join(sorted(JOB_OVERRIDES))} and the scheduling options"
        )


def job_with_options(
    job: Job,
    options: Mapping[str, Any],
    plugins: PluginManager,
    *,
    result_ttl: float | None = None,
    keep_result: bool | None = None,
    group: str | None = None,
) -> Job:
    """A copy of `job` with `submit`'s keyword `options` (`JOB_OVERRIDES`),
    its result options and its group set (see `with_options`); any other
    keyword is a `TypeError`."""
    check_job_options(job, options)
    item = Submission(job, result_ttl=result_ttl, keep_result=keep_result, group=group, **options)
    return with_options(job, item, plugins)


@attrs.frozen
class Planned:
    """One job of a batch, checked and ready to queue (`plan`)."""

    item: Submission
    #: What to queue: the item's job, or a copy with the item's options set.
    job: Job
    #: Its id: the job's own, or the one `plan`'s `new_id` gave it.
    job_id: str
    #: The ids it waits for, an earlier job of the batch named by its id.
    depends_on: tuple[str, ...]


@attrs.frozen
class Plan:
    """A checked batch: its jobs in submit order, and the ids they wait for
    that are no job of the batch (which the caller's store must know)."""

    jobs: list[Planned]
    outside: frozenset[str]


def function_job(job: object) -> Job:
    """`job` as a `Job`: a plain function becomes a `FunctionJob`."""
    if isinstance(job, Job):
        return job
    if not callable(job):
        raise TypeError(f"submit() takes a Job or a function, got {job!r}")
    return FunctionJob(job)


def plan(
    jobs: Iterable[Any],
    plugins: PluginManager,
    *,
    as_job: Callable[[Any], Job] = function_job,
    new_id: Callable[[Job], str] | None = None,
    hooks: Sequence[Callable[[Any], None]] = (),
    find: Callable[[str], Job | None] | None = None,
    in_memory: bool = False,
    look_up: bool = True,
) -> Plan:
    """The one batch planner of every submit path (`JobScheduler`,
    `LocalClient`, `Client`): each item of a ``submit_many`` list (a `Job`, a
    `Submission`, a workflow, or what `as_job` takes) checked the same way,
    with the same errors, before anything is queued.

    `as_job` turns an item's job into the `Job` to queue (or refuses it);
    `new_id` names each job (default: its own id); `hooks` are the submit
    hooks applied to a copy of the job. `find` is the scheduler's job lookup:
    a job it knows by id (with `in_memory`: by the same id; else the same
    object) was already submitted, and with `look_up` (it knows its jobs
    already: a durable store's are restored at start) an unknown dependency
    is refused here. Without `find` the ids outside the batch are returned
    for the caller to check (`Plan.outside`).
    """
    items = [
        item if isinstance(item, Submission) else Submission(item, depends_on=after)
        for item, after in expand(jobs)
    ]
    planned: list[Planned] = []
    ids_of: dict[int, str] = {}  # the batch's Job objects so far, by identity
    batch_ids: set[str] = set()
    outside: set[str] = set()
    for item in items:
        job = as_job(item.job)  # a job it cannot queue is refused first
        check_submission(item)
        job_id = job.job_id
        if find is not None:
            queued = find(job_id)
            if (
                job.status is not JobStatus.PENDING
                or job.attempts
                or job_id in batch_ids
                or (queued is not None and (queued is job or in_memory))
            ):
                raise SchedulerError(f"{job_id} was already submitted")
        if hooks or overrides(item):
            job = with_options(job, item, plugins, hooks)
        if new_id is not None:
            job_id = new_id(job)
        depends_on: list[str] = []
        unknown: list[str] = []
        for dep in item.depends_on:
            if isinstance(dep, Job):
                if id(dep) not in ids_of:
                    raise ValueError(
                        f"depends_on: {dep!r} is not an earlier job of this batch; "
                        "name a submitted job by the id submit returned"
                    )
                depends_on.append(ids_of[id(dep)])
            elif isinstance(dep, str):
                depends_on.append(dep)
                if dep not in batch_ids:
                    if find is None:
                        outside.add(dep)
                    elif look_up and find(dep) is None:
                        unknown.append(dep)
            else:
                raise TypeError(f"depends_on takes job ids, got {dep!r}")
        if unknown:
            raise UnknownJobError(f"{job_id}: unknown dependencies: {sorted(unknown)}")
        if item.trigger_rule != ALL_SUCCESS and not depends_on and not job.takes_results:
            # result_of's upstreams count: they are checked once the job is encoded.
            raise ValueError(f"trigger_rule={item.trigger_rule!r} needs depends_on")
        ids_of[id(item.job)] = job_id
        batch_ids.add(job_id)
        planned.append(Planned(item, job, job_id, tuple(depends_on)))
    return Plan(planned, frozenset(outside))


def plan_batch(
    jobs: Iterable[Any],
    find: Callable[[str], Job | None],
    plugins: PluginManager,
    *,
    in_memory: bool,
    look_up: bool,
) -> list[tuple[Submission, Job]]:
    """`plan` for a scheduler: each item with the job to queue.

    `find` is the scheduler's job lookup; `in_memory`: every job is in it
    (no durable store), so a job known by id is a sure refusal; `look_up`:
    it knows its jobs already (a durable store's are restored at start), so
    an unknown dependency is refused here.
    """
    planned = plan(jobs, plugins, find=find, in_memory=in_memory, look_up=look_up)
    return [(p.item, p.job) for p in planned.jobs]
