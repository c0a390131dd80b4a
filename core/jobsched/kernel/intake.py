"""What `submit` accepts: a `Job`, a workflow, or a plain function and its arguments."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, cast

from .._job import FunctionJob, Job, refuse_option_parameters, set_job_group
from .._jobtypes import build_retry_policy
from .._options import check_group, check_retry_policy, is_retry_spec
from .._retry import RetryPolicy
from .._submission import job_with_options
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
