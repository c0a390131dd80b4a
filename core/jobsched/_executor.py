"""The executor interface: where a job attempt runs."""

from __future__ import annotations

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
