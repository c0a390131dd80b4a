"""`JobScheduler` is the reference facade plus its documented extras, and has a kernel.

The public names are pinned here and listed in docs/architecture.md: adding
one is a decision, made in both places; nothing backend-facing (adopt,
restore, forget, release_committed, ...) is on the facade, only on the
kernel's port.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

import jobsched
from jobsched import JobScheduler
from jobsched.kernel import Kernel, KernelPort

ROOT = Path(__file__).resolve().parents[1]

#: DESIGN.md §3's reference facade.
REFERENCE = [
    "add_listener",
    "cancel",
    "cancel_recurring",
    "get",
    "jobs",
    "join",
    "peak_running",
    "schedule_recurring",
    "start",
    "stop",
    "submit",
    "submit_threadsafe",
]

#: Beyond the reference, each documented in docs/ (client.md, executors.md,
#: durability.md, limits.md, observability.md, plugins.md, architecture.md).
EXTRAS = [
    "abandoned_calls",
    "add_progress_listener",
    "attempt_history",
    "dependents",
    "expire_results",
    "flush",
    "job_counts",
    "job_progress",
    "kernel",
    "limiter",
    "lookup",
    "num_workers",
    "pause_queue",
    "pause_schedule",
    "plugins",
    "purge",
    "purge_jobs",
    "queue_paused",
    "queues",
    "paused_queues",
    "recurring",
    "remove_listener",
    "remove_progress_listener",
    "resolve",
    "resume_queue",
    "resume_schedule",
    "retry_job",
    "retry_jobs",
    "started",
    "store",
    "strategy",
    "submit_many",
    "trigger_schedule",
    "unique_key_of",
    "waiting_on",
]

BACKEND_FACING = [
    "add_recurring",
    "adopt",
    "cancel_restored",
    "executor",
    "fail",
    "find",
    "forget",
    "release_committed",
    "restore",
    "restore_schedule",
    "sort_key",
    "wait_idle",
]


def public_names(cls: type) -> list[str]:
    return sorted(name for name in dir(cls) if not name.startswith("_"))


def test_the_facade_is_the_reference_and_its_documented_extras() -> None:
    assert public_names(JobScheduler) == sorted(REFERENCE + EXTRAS)


def test_nothing_backend_facing_is_on_the_facade_only_on_the_port() -> None:
    assert not set(BACKEND_FACING) & set(public_names(JobScheduler))
    assert set(BACKEND_FACING) <= set(public_names(KernelPort))


def test_the_architecture_page_lists_the_same_names() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## JobScheduler's public names", 1)[1].split("\n## ", 1)[0]
    names = next(p for p in section.split("\n\n") if p.startswith("Public names:"))
    listed = re.findall(r"`([a-z_]+)`", names)
    assert sorted(listed) == public_names(JobScheduler)


def test_the_scheduler_has_a_kernel_and_its_methods_are_the_kernels() -> None:
    scheduler = JobScheduler()
    assert isinstance(scheduler.kernel, Kernel) and not isinstance(scheduler, Kernel)
    # Forwarded methods are the kernel's own, bound once: the facade adds no call.
    assert scheduler.submit == scheduler.kernel.submit
    assert scheduler.get == scheduler.kernel.table.get
    assert scheduler.retry_job == scheduler.kernel.operations.retry_job
    assert scheduler.submit is scheduler.submit
    assert JobScheduler.submit.__doc__ == Kernel.submit.__doc__
    assert set(REFERENCE) <= set(dir(jobsched.JobScheduler))


def test_submit_and_job_init_keep_their_public_signatures() -> None:
    # At run time both take their options as **options (read only when
    # given); inspect, help() and type checkers still see these.
    assert str(inspect.signature(JobScheduler().submit)) == (
        "(job: 'Job | Workflow | Callable[..., Any]', *args: 'Any', delay: 'float' = 0.0, "
        "depends_on: 'Iterable[str]' = (), unique_key: 'str | None' = None, "
        "key: 'str | None' = None, result_ttl: 'float | None' = None, "
        "keep_result: 'bool | None' = None, trigger_rule: 'str | None' = None, "
        "group: 'str | None' = None, kwargs: 'Mapping[str, Any] | None' = None, "
        "**options: 'Any') -> 'str'"
    )
    init = inspect.signature(jobsched.Job.__init__)
    assert [(p.name, p.kind.name, p.default) for p in init.parameters.values()] == [
        ("self", "POSITIONAL_OR_KEYWORD", inspect.Parameter.empty),
        ("name", "POSITIONAL_OR_KEYWORD", inspect.Parameter.empty),
        ("priority", "KEYWORD_ONLY", jobsched.JobPriority.MEDIUM),
        ("timeout", "KEYWORD_ONLY", 30.0),
        ("retry", "KEYWORD_ONLY", jobsched.RetryPolicy()),
        ("deadline", "KEYWORD_ONLY", None),
        ("retry_on", "KEYWORD_ONLY", ()),
        ("no_retry_on", "KEYWORD_ONLY", ()),
        ("queue", "KEYWORD_ONLY", "default"),
    ]


def test_job_init_refuses_what_it_always_refused() -> None:
    class Noop(jobsched.AsyncJob):
        async def run(self) -> None:
            return None

    for call, message in [
        (lambda: Noop("x", colour="red"), r"Job.__init__\(\) got an unexpected keyword argument"),
        (lambda: Noop("x", 1), r"Job.__init__\(\) takes 2 positional arguments but 3"),
        (lambda: Noop(), r"Job.__init__\(\) missing 1 required positional argument: 'name'"),
        (lambda: Noop("x", priority="urgent"), "priority"),
    ]:
        with pytest.raises((TypeError, ValueError), match=message):
            call()
    job = Noop("x", priority="low", timeout=False, deadline=5.0, queue="emails")
    assert (job.priority, job.timeout, job.deadline, job.queue) == (0, None, 5.0, "emails")
    assert Noop("y").deadline is None and not Noop("y").last_failure_timed_out
