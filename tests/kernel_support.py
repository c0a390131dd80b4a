"""Test helpers for the kernel tests: recording listeners, scripted jobs, bounded waits.

Time is `jobsched.testing.VirtualClock`, the clock users test with too.

Nothing here waits on wall-clock time to decide an outcome. Async work is
settled by yielding to the event loop a fixed number of times (asyncio is
deterministic when only callbacks are involved); thread and process work is
awaited with `until`, whose time limit only guards against a hang.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import structlog
from structlog.testing import capture_logs

from jobsched import AsyncJob, BlockingJob, Job, JobScheduler, JobStatus, PluginManager, RetryPolicy
from jobsched.contracts import Clock

NO_RETRY = RetryPolicy(max_retries=0)


@contextmanager
def captured_logs() -> Iterator[list[dict[str, Any]]]:
    """`structlog.testing.capture_logs`, leaving structlog as unconfigured as it found it.

    capture_logs() marks structlog as configured for good, which would switch
    on the ``structlog`` listener plugin in every later scheduler.
    """
    was_configured = structlog.is_configured()
    try:
        with capture_logs() as logs:
            yield logs
    finally:
        if not was_configured:
            structlog.reset_defaults()


async def settle(rounds: int = 50) -> None:
    """Let the loop run every callback and task step that is ready, `rounds` times over."""
    for _ in range(rounds):
        await asyncio.sleep(0)


async def until(predicate: Callable[[], bool], what: str, limit: float = 10.0) -> None:
    """Yield to the loop until `predicate()`; `limit` seconds only guard against a hang."""
    for _ in range(100):
        if predicate():
            return
        await asyncio.sleep(0)
    give_up = time.monotonic() + limit
    while not predicate():
        if time.monotonic() > give_up:
            raise AssertionError(f"gave up waiting for {what}")
        await asyncio.sleep(0.002)


async def join(scheduler: JobScheduler, limit: float = 10.0) -> None:
    """`scheduler.join()` with a hang guard."""
    await asyncio.wait_for(scheduler.join(), limit)


class Transitions:
    """A listener that records every transition and checks each one is legal and consistent."""

    def __init__(self) -> None:
        self.events: list[tuple[str, JobStatus, JobStatus]] = []
        self.last: dict[str, JobStatus] = {}
        self.problems: list[str] = []

    def __call__(self, job: Job, old: JobStatus, new: JobStatus) -> None:
        self.events.append((job.job_id, old, new))
        if new not in old.allowed_next:
            self.problems.append(f"{job.job_id}: illegal {old.name} -> {new.name}")
        before = self.last.get(job.job_id, JobStatus.PENDING)
        if old is not before:
            self.problems.append(f"{job.job_id}: reported {old.name}, was {before.name}")
        if job.status is not new:
            self.problems.append(f"{job.job_id}: status is {job.status.name} inside {new.name}")
        self.last[job.job_id] = new

    def path(self, job_id: str) -> list[JobStatus]:
        """Every status the job went through, starting with PENDING."""
        return [JobStatus.PENDING] + [new for jid, _, new in self.events if jid == job_id]

    def started(self) -> list[str]:
        """Job ids in the order they started an attempt (RUNNING), repeats included."""
        return [jid for jid, _, new in self.events if new is JobStatus.RUNNING]


class Gate(AsyncJob):
    """An async job whose every attempt waits until the test opens or breaks it.

    ``open(value)`` completes the current attempt, ``fail(exc)`` fails it; the
    job notes whether it saw ``CancelledError`` (the cooperative cancel point).
    """

    def __init__(self, name: str = "gate", **options: Any) -> None:
        options.setdefault("timeout", None)
        options.setdefault("retry", NO_RETRY)
        super().__init__(name, **options)
        self.waiter: asyncio.Future[Any] | None = None
        self.saw_cancel = 0
        self.finished_normally = 0

    @property
    def waiting(self) -> bool:
        return self.waiter is not None and not self.waiter.done()

    def open(self, value: Any = None) -> None:
        assert self.waiter is not None and not self.waiter.done(), f"{self} is not waiting"
        self.waiter.set_result(value)

    def fail(self, exc: BaseException) -> None:
        assert self.waiter is not None and not self.waiter.done(), f"{self} is not waiting"
        self.waiter.set_exception(exc)

    async def run(self) -> Any:
        self.waiter = asyncio.get_running_loop().create_future()
        try:
            value = await self.waiter
        except asyncio.CancelledError:
            self.saw_cancel += 1
            raise
        self.finished_normally += 1
        return value


class Scripted(AsyncJob):
    """An async job that plays one outcome per attempt from a script.

    Outcomes: ``"ok"`` returns the attempt number, ``"hang"`` waits forever (for
    the timeout), an exception instance is raised.
    """

    def __init__(self, script: Iterable[Any], name: str = "scripted", **options: Any) -> None:
        options.setdefault("timeout", None)
        super().__init__(name, **options)
        self.script = list(script)

    async def run(self) -> Any:
        outcome = self.script[min(self.attempts, len(self.script)) - 1]
        await asyncio.sleep(0)
        if outcome == "ok":
            return self.attempts
        if outcome == "hang":
            await asyncio.get_running_loop().create_future()
        if isinstance(outcome, BaseException):
            raise outcome
        raise AssertionError(f"bad script entry {outcome!r}")


class Noop(AsyncJob):
    """Returns its value after one yield to the loop."""

    def __init__(self, name: str = "noop", value: Any = None, **options: Any) -> None:
        super().__init__(name, **options)
        self.value = value

    async def run(self) -> Any:
        await asyncio.sleep(0)
        return self.value


_builtins_only: PluginManager | None = None


class BlockedThreadJob(BlockingJob):
    """Blocks its thread until the test sets `release`; says when it entered and returned."""

    def __init__(self, name: str, release: threading.Event, **options: Any) -> None:
        super().__init__(name, **options)
        self.release = release
        self.entered = threading.Event()
        self.returned = threading.Event()

    def run_sync(self) -> str:
        self.entered.set()
        self.release.wait(30)
        self.returned.set()
        return "finished late"


def builtin_plugins() -> PluginManager:
    """jobsched's own plugins only (no third-party autoload), built once per test session."""
    global _builtins_only
    if _builtins_only is None:
        _builtins_only = PluginManager(autoload=False)
    return _builtins_only


def make_scheduler(
    strategy: Any = None, *, clock: Clock | None = None, **options: Any
) -> tuple[JobScheduler, Transitions]:
    """A scheduler on the built-in plugins with a `Transitions` recorder attached."""
    options.setdefault("plugins", builtin_plugins())
    scheduler = JobScheduler(strategy, clock=clock, **options)
    recorder = Transitions()
    scheduler.add_listener(recorder)
    return scheduler, recorder
