"""Tasks for tests/test_result_of.py and tests/test_workflows.py; worker
processes import this module (``jobsched worker --import flow_tasks``)."""

from __future__ import annotations

from typing import Any

from jobsched import task


@task(name="flow.extract")
def extract(n: int) -> list[int]:
    """Rows 0..n-1."""
    return list(range(n))


@task(name="flow.total")
def total(rows: list[int], title: str = "total") -> str:
    """A report line of the rows' sum."""
    return f"{title}: {sum(rows)}"


@task(name="flow.count")
async def count(n: int) -> int:
    """Just n."""
    return n


@task(name="flow.add_all")
def add_all(parts: list[int]) -> int:
    """The sum of a group's results."""
    return sum(parts)


@task(name="flow.odd", retry="none")
def odd() -> Any:
    """A result JSON cannot hold."""
    return {1, 2}


@task(name="flow.fail", retry="none")
def fail(message: str) -> None:
    """Always fails."""
    raise ValueError(message)


@task(name="flow.echo")
def echo(value: Any = None) -> Any:
    """What it was given."""
    return value
