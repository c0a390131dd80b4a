"""Tasks the task and retry-filter tests run, in the test process and in worker
processes (``jobsched worker --import task_examples``, from this folder).

The flaky ones count their attempts in a file (`path`), so every process that
runs an attempt sees the same count.
"""

from __future__ import annotations

import enum
import os
import pathlib

from jobsched import Retry, task


class Color(enum.Enum):
    RED = 1
    BLUE = 2


class Transient(Exception):
    """A failure worth retrying."""


@task
async def send_email(to: str, subject: str = "hello") -> str:
    """Send an email (pretend)."""
    return f"sent {subject!r} to {to}"


@task(name="examples.add", priority="high", timeout=5)
def add(a: int, b: float = 0.5) -> float:
    return a + b


@task
def paint(color: Color, where: pathlib.Path, sizes: tuple[int, ...]) -> list[object]:
    return [color.name, str(where), list(sizes), type(sizes).__name__]


@task(model="process")
def pid_of(tag: str) -> list[object]:
    return [tag, os.getpid()]


def _attempt(path: str) -> int:
    """This attempt's number (1, 2, ...), counted in the file `path`."""
    file = pathlib.Path(path)
    n = int(file.read_text()) + 1 if file.exists() else 1
    file.write_text(str(n))
    return n


ERRORS = {"transient": Transient, "value": ValueError, "timeout": TimeoutError}


@task(retry={"policy": "fixed", "seconds": 0, "max_retries": 3}, retry_on=[Transient])
def flaky(path: str, failures: int, error: str) -> int:
    """Fail the first `failures` attempts with the error named, then return the attempt."""
    n = _attempt(path)
    if n <= failures:
        raise ERRORS[error](f"attempt {n}")
    return n


@task(retry={"policy": "fixed", "seconds": 0, "max_retries": 3})
def asks_for_retry(path: str, failures: int, delay: float) -> int:
    """Ask for a retry `delay` seconds later on the first `failures` attempts."""
    n = _attempt(path)
    if n <= failures:
        raise Retry(delay=delay, reason=f"attempt {n}")
    return n
