"""The exceptions jobsched raises, and the ones jobs raise to skip or ask for a retry."""

from __future__ import annotations


class SchedulerError(Exception):
    """Base class of every error the scheduler raises."""


class InvalidTransitionError(SchedulerError):
    """A job was asked to move along a status edge that does not exist."""


class UnknownJobError(SchedulerError, KeyError):
    """A job id (or a dependency id) that the scheduler does not know."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class SchedulerStoppedError(SchedulerError):
    """The scheduler is stopping or stopped and accepts no more work."""


class PluginError(SchedulerError):
    """A plugin could not be loaded, conflicts with another, or a name is unknown."""


class StoreError(SchedulerError):
    """A store could not be opened, read or written.

    The message names the store (file or DSN) and the problem. A store that
    raises this has left its data as it was before the failed call.
    """


class NonRetryableError(Exception):
    """Raise from a job to fail it immediately, skipping any remaining retries."""


class BadArgumentsError(NonRetryableError, TypeError):
    """A function job's arguments do not fit its signature: no retry can fix that."""


class NotPicklableError(NonRetryableError):
    """A job, its arguments or its result cannot cross to or from a worker process."""


class Retry(Exception):
    """Raise from a job to ask for another attempt, `delay` seconds from now.

    The attempt that raised it counts as an attempt, and the job's retry
    policy still says how many there may be: past its ``max_retries`` the job
    fails with this error. Without `delay` the policy's own delay applies.
    ``retry_on``/``no_retry_on`` do not apply: the job asked. A `delay` that
    is not 0 to ``MAX_DELAY`` seconds fails the job at once, saying so.
    """

    def __init__(self, delay: float | None = None, reason: str = "") -> None:
        # Both in args, so the exception pickles back from a worker process.
        super().__init__(delay, reason)
        self.delay = delay
        self.reason = reason

    def __str__(self) -> str:
        delay = self.delay
        if delay is None:
            when = "after the retry policy's delay"
        else:
            when = f"in {delay:g}s" if isinstance(delay, int | float) else f"in {delay!r}s"
        return f"retry requested {when}" + (f": {self.reason}" if self.reason else "")
