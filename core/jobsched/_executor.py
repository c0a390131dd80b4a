"""The executor interface: where a job attempt runs."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ._job import Job


class Executor(Protocol):
    """Runs job attempts. Built once per scheduler as ``factory(workers=N)``."""

    def invoke(self, job: Job) -> Awaitable[Any]:
        """Start one attempt of `job`; the awaitable yields its result.

        The scheduler cancels the awaitable on timeout or cancellation.
        """

    def shutdown(self) -> None:
        """Release resources without blocking the event loop."""


class AbandoningExecutor(Executor, Protocol):
    """An executor whose cancelled calls may go on running (a thread, a pool process).

    Optional: the scheduler looks for `still_running` once an attempt was
    cancelled, and holds back any new attempt of that job until the call it
    abandoned has ended, so two attempts of one job never run at once.
    """

    def still_running(self, job: Job) -> asyncio.Future[None] | None:
        """After an attempt of `job` was cancelled: a future done once the call
        it abandoned has ended (its outcome discarded), or None if nothing of
        it runs any more."""

    def abandoned(self) -> list[str]:
        """The ids of the jobs whose cancelled calls still run, oldest first."""
