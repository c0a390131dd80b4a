"""Workflows: `chain`, `group` and `chord` of jobs, and `result_of`.

A workflow is data about jobs not yet submitted: which waits for which.
``submit(workflow)`` (a scheduler, `Client`, `BlockingClient`, `LocalClient`)
submits its jobs in order, each with the ``depends_on`` the workflow gives
it, and returns the id of its last job; ``submit_many`` returns every id.

- ``chain(a, b, c)``: each step runs after the previous one completed.
- ``group(a, b, c)``: independent; a step after a group waits for all of it.
- ``chord(group, callback)``: the callback runs after every member completed
  and receives the list of their results, in member order.

Steps are jobs or workflows (a group inside a chain, a chain inside a group).
A failed step cancels what waits for it, as ``depends_on`` does.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from typing import Any, TypeAlias

from ._job import Job
from ._result_of import ResultOf
from ._task import Task, TaskCall

__all__ = [
    "Chain",
    "Chord",
    "Group",
    "Workflow",
    "chain",
    "chord",
    "expand",
    "group",
    "result_of",
]

#: A step of a workflow: a job or another workflow.
Step: TypeAlias = "Job | Workflow"


class Workflow:
    """Jobs and the order they run in (`chain`, `group`, `chord`)."""

    __slots__ = ()
    #: Read by ``submit`` with the same check as a job's (`Job.takes_results`).
    takes_results = True

    def jobs(self) -> list[Job]:
        """Every job of the workflow, in the order they are submitted."""
        return [job for job, _ in self.plan(())]

    def plan(self, after: tuple[Job, ...]) -> list[tuple[Job, tuple[Job, ...]]]:
        """``(job, the jobs it waits for)`` in submit order (upstreams first),
        its first steps waiting for `after`."""
        items: list[tuple[Job, tuple[Job, ...]]] = []
        self._plan(after, items)
        _check_distinct(items)
        return items

    def last(self) -> Job:
        """The job whose id ``submit(workflow)`` returns."""
        raise NotImplementedError

    def _plan(
        self, after: tuple[Job, ...], items: list[tuple[Job, tuple[Job, ...]]]
    ) -> tuple[Job, ...]:
        """Append the jobs to `items`; return the jobs a next step waits for."""
        raise NotImplementedError

    def _result_ref(self) -> Any:
        """What `result_of` of this workflow stands for."""
        raise NotImplementedError


class Chain(Workflow):
    """Steps that run one after the other (`chain`)."""

    __slots__ = ("steps",)

    def __init__(self, steps: tuple[Step, ...]) -> None:
        self.steps = steps

    def last(self) -> Job:
        return _last(self.steps[-1])

    def _plan(
        self, after: tuple[Job, ...], items: list[tuple[Job, tuple[Job, ...]]]
    ) -> tuple[Job, ...]:
        for step in self.steps:
            after = _plan_step(step, after, items)
        return after

    def _result_ref(self) -> Any:
        return _ref(self.steps[-1])

    def __repr__(self) -> str:
        return f"chain({', '.join(map(_shown, self.steps))})"


class Group(Workflow):
    """Steps that do not wait for each other (`group`)."""

    __slots__ = ("members",)

    def __init__(self, members: tuple[Step, ...]) -> None:
        self.members = members

    def last(self) -> Job:
        return _last(self.members[-1])

    def _plan(
        self, after: tuple[Job, ...], items: list[tuple[Job, tuple[Job, ...]]]
    ) -> tuple[Job, ...]:
        tails: list[Job] = []
        for member in self.members:
            tails.extend(_plan_step(member, after, items))
        return tuple(tails)

    def _result_ref(self) -> Any:
        return tuple(_ref(member) for member in self.members)

    def __repr__(self) -> str:
        return f"group({', '.join(map(_shown, self.members))})"


class Chord(Workflow):
    """A group and a callback that gets the list of its results (`chord`)."""

    __slots__ = ("callback", "header")

    def __init__(self, header: Group, callback: Job) -> None:
        self.header = header
        self.callback = callback

    def last(self) -> Job:
        return self.callback

    def _plan(
        self, after: tuple[Job, ...], items: list[tuple[Job, tuple[Job, ...]]]
    ) -> tuple[Job, ...]:
        tails = self.header._plan(after, items)
        items.append((self.callback, tails))
        return (self.callback,)

    def _result_ref(self) -> Any:
        return self.callback

    def __repr__(self) -> str:
        return f"chord({self.header!r}, {_shown(self.callback)})"


def chain(*steps: Job | Workflow) -> Chain:
    """``chain(a, b, c)``: `b` runs once `a` completed, `c` once `b` did.

    A step is a job or a workflow (a group in a chain: the next step waits
    for all of the group). A step that does not complete cancels the rest.
    """
    return Chain(_steps(steps, "chain"))


def group(*members: Job | Workflow) -> Group:
    """``group(a, b, c)``: jobs (or workflows) that run independently.

    ``result_of(the group)`` stands for the list of their results, in order.
    """
    return Group(_steps(members, "group"))


def chord(header: Group | Iterable[Job | Workflow], callback: Any) -> Chord:
    """``chord(group(a, b), callback)``: `callback` runs once every member
    completed, with the list of their results (in member order).

    `header` is a `group` or a list of steps. `callback` is:

    - a task (``summarize``) or a task with options
      (``summarize.options(priority="high")``): its job gets the results
      list as its first parameter;
    - ``functools.partial(summarize, title="daily")``: the same, with more
      arguments for the other parameters;
    - a job that already holds ``result_of(the group)`` where it wants the
      list (or that wants none: it just runs after the group).
    """
    if not isinstance(header, Group):
        if isinstance(header, Job | Workflow) or not isinstance(header, Iterable):
            raise TypeError(f"chord() takes a group or a list of jobs first, got {header!r}")
        header = group(*header)
    return Chord(header, _callback_job(callback, ResultOf(header._result_ref())))


def result_of(upstream: Any) -> Any:
    """A job argument that stands for `upstream`'s result.

    ``send_report.job(rows=result_of(extract))``: `upstream` is a submitted
    job's id, a `Job` (submitted before the dependent, or in the same
    ``submit_many``/workflow), or a `group` (its results as a list, in member
    order; a chain member gives its last step's result). The dependent then
    depends on it, and gets the result when it is released. Typed `Any` so
    that it fits any parameter; docs/tasks.md has the rules.
    """
    if isinstance(upstream, str):
        if not upstream:
            raise ValueError("result_of() takes a job id, a job or a group, got ''")
        return ResultOf(upstream)
    if isinstance(upstream, Job):
        return ResultOf(upstream)
    if isinstance(upstream, Workflow):
        return ResultOf(upstream._result_ref())
    raise TypeError(
        f"result_of() takes a job id, a job or a group, got {type(upstream).__name__} {upstream!r}"
    )


def expand(items: Iterable[Any]) -> Iterator[tuple[Any, tuple[Job, ...]]]:
    """Each item of a ``submit_many`` list as ``(item, the jobs it waits for)``:
    a workflow becomes its jobs, anything else passes as is, waiting for none."""
    for item in items:
        if isinstance(item, Workflow):
            yield from item.plan(())
        else:
            yield item, ()


# ── helpers ────────────────────────────────────────────────────────────
def _steps(steps: tuple[Any, ...], what: str) -> tuple[Step, ...]:
    if not steps:
        raise ValueError(f"{what}() needs at least one job")
    for i, step in enumerate(steps):
        if not isinstance(step, Job | Workflow):
            hint = " (call .job(...) on a task to make a job)" if isinstance(step, Task) else ""
            raise TypeError(
                f"{what}() step {i + 1} must be a job or a workflow, got {step!r}{hint}"
            )
    return steps


def _plan_step(
    step: Step, after: tuple[Job, ...], items: list[tuple[Job, tuple[Job, ...]]]
) -> tuple[Job, ...]:
    if isinstance(step, Workflow):
        return step._plan(after, items)
    items.append((step, after))
    return (step,)


def _last(step: Step) -> Job:
    return step.last() if isinstance(step, Workflow) else step


def _ref(step: Step) -> Any:
    return step._result_ref() if isinstance(step, Workflow) else step


def _shown(step: Step) -> str:
    return repr(step) if isinstance(step, Workflow) else f"{step.name}"


def _check_distinct(items: list[tuple[Job, tuple[Job, ...]]]) -> None:
    seen: set[int] = set()
    for job, _ in items:
        if id(job) in seen:
            raise ValueError(f"{job!r} appears twice in the workflow: a job runs once")
        seen.add(id(job))


def _callback_job(callback: Any, results: ResultOf) -> Job:
    if isinstance(callback, Job):
        return callback
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = {}
    if isinstance(callback, functools.partial):
        args, kwargs = callback.args, dict(callback.keywords)
        callback = callback.func
    if isinstance(callback, Task | TaskCall):
        return callback.job(results, *args, **kwargs)
    raise TypeError(
        "chord() callback must be a task, task.options(...), functools.partial(task, ...) "
        f"or a job, got {callback!r}"
    )
