"""What `submit` accepts: a `Job`, a workflow, or a plain function and its arguments."""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping
from typing import TYPE_CHECKING, Any, cast

from .._errors import SchedulerError
from .._job import FunctionJob, Job, refuse_option_parameters, set_job_group
from .._jobtypes import build_retry_policy
from .._options import NOT_GIVEN, check_group, check_retry_policy, is_retry_spec
from .._retry import RetryPolicy
from .._status import JobStatus
from .._submission import check_workflow_options, job_with_options
from .._trigger_rules import ALL_SUCCESS
from .._workflow import Workflow

if TYPE_CHECKING:
    from .._plugins import PluginManager

#: The keywords `submit` takes beside a `FunctionJob`'s options.
SUBMIT_OPTIONS = (
    "delay",
    "depends_on",
    "unique_key",
    "key",
    "result_ttl",
    "keep_result",
    "trigger_rule",
    "group",
)


def as_job(
    job: Job | Workflow | Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any] | None,
    options: dict[str, Any],
    scheduling: tuple[Any, ...],
    plugins: PluginManager,
    caller: str = "submit",
) -> Job:
    """`job`, or a `FunctionJob` of a plain function, with its retry policy resolved.

    `scheduling` is the values of `SUBMIT_OPTIONS` the caller gave; a
    workflow is returned as it is (`submit` takes it apart).
    """
    if not isinstance(job, Job):
        if isinstance(job, Workflow):
            return cast(Job, job)
        if kwargs is None:
            # FunctionJob refuses a parameter named like one of its options
            # outright. Submit's own are common parameter names (asyncio.sleep
            # has `delay`): refused only when given, as then it is ambiguous.
            given = [
                name
                for name, value in zip(SUBMIT_OPTIONS, scheduling, strict=True)
                if value or (name == "keep_result" and value is not None)
            ]
            refuse_option_parameters(job, given)
        job = FunctionJob(job, *args, kwargs=kwargs, **options)
        group = scheduling[SUBMIT_OPTIONS.index("group")]
        if group is not None:
            set_job_group(job, check_group(group))
    elif args or kwargs is not None:
        raise TypeError(
            f"{caller}() got arguments for {job!r}, which is already a job: "
            "arguments are only for plain functions"
        )
    else:
        named = dict(zip(SUBMIT_OPTIONS, scheduling, strict=True))
        result_ttl, keep_result = named["result_ttl"], named["keep_result"]
        group = named["group"]
        if options or result_ttl is not None or keep_result is not None or group is not None:
            # Client's options, on a copy: the caller's job stays as it was.
            job = job_with_options(
                job,
                options,
                plugins,
                result_ttl=result_ttl,
                keep_result=keep_result,
                group=group,
            )
    retry = job.retry
    if retry.__class__ is not RetryPolicy and is_retry_spec(retry):
        # A policy name or table, as a job file writes it: this
        # scheduler's plugins say what the names mean.
        job.retry = check_retry_policy(build_retry_policy(retry, plugins))
    return job


def submit_workflow(
    workflow: Any,
    args: tuple[Any, ...],
    options: Mapping[str, Any],
    delay: float,
    depends_on: Iterable[str],
    refused: tuple[Any, ...],
    *,
    submit: Callable[..., str],
    submitted: Container[str],
) -> list[str]:
    """Submit a workflow's jobs through `submit`, upstreams first; their ids
    in that order. `refused` is the submit options a workflow takes none of
    (refused when given), `submitted` the ids already known."""
    unique_key, key, result_ttl, keep_result, trigger_rule, kwargs, group = refused
    check_workflow_options(
        workflow,
        delay=delay,
        given=(
            args or None,
            unique_key,
            key,
            result_ttl,
            keep_result,
            kwargs,
            group,
            *(value for name, value in options.items() if name != "timeout"),
        ),
        timeout=options.get("timeout", NOT_GIVEN),
        trigger_rule=ALL_SUCCESS if trigger_rule is None else trigger_rule,
    )
    plan = workflow.plan(())
    for job, _ in plan:
        if job.status is not JobStatus.PENDING or job.attempts or job.job_id in submitted:
            raise SchedulerError(f"{job.job_id} was already submitted")
    first = tuple(depends_on)
    ids = []
    for job, after in plan:
        deps = [d.job_id for d in after] if after else first
        ids.append(submit(job, depends_on=deps))
    return ids
