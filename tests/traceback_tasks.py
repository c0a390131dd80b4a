"""Tasks that fail from nested functions, for the traceback tests: in the
test process, in the process executor's pool and in a subprocess child."""

from __future__ import annotations

from jobsched import task


def innermost_frame(message: str) -> None:
    raise ValueError(message)


def middle_frame(message: str) -> None:
    innermost_frame(message)


@task(retry="none")
def fails_nested(message: str) -> None:
    middle_frame(message)


def pool_child_frame(message: str) -> None:
    raise ValueError(message)


@task(model="process", retry="none")
def fails_in_pool(message: str) -> None:
    pool_child_frame(message)


def subprocess_child_frame(message: str) -> None:
    raise ValueError(message)


@task(model="subprocess", retry="none")
def fails_in_subprocess(message: str) -> None:
    subprocess_child_frame(message)


@task(retry={"policy": "fixed", "max_retries": 1, "seconds": 0})
def fails_twice(message: str) -> None:
    middle_frame(message)
