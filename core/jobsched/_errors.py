"""The exceptions jobsched raises, and the ones jobs raise to skip or ask for a retry."""

from __future__ import annotations

from typing import Any


class SchedulerError(Exception):
    """Base class of every error the scheduler raises."""


class InvalidTransitionError(SchedulerError):
    """A job was asked to move along a status edge that does not exist."""


class UnknownJobError(SchedulerError, KeyError):
    """A job id (or a dependency id) that the scheduler does not know."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class UnknownScheduleError(SchedulerError, KeyError):
    """A recurring schedule id that the store or scheduler does not know."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class UnknownWorkerError(SchedulerError, KeyError):
    """A worker id the store's registry holds no live worker of (never
    registered, stopped, or lost: nothing would read a request to it)."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class JobFailedError(SchedulerError):
    """A job whose result was asked for ended without one (`Client.result`).

    `status` is the job's terminal status (``"failed"``, ``"timed_out"`` or
    ``"cancelled"``); `error_type` the exception class named by its last
    error (``"ValueError"`` for ``"ValueError: bad input"``), or the status
    itself for a timed-out or cancelled job; `message` the rest of the last
    error; `attempts` how many attempts ran.
    """

    def __init__(
        self, job_id: str, status: str, error_type: str, message: str, attempts: int
    ) -> None:
        self.job_id = job_id
        self.status = status
        self.error_type = error_type
        self.message = message
        self.attempts = attempts
        plural = "" if attempts == 1 else "s"
        super().__init__(
            f"job {job_id} {status} after {attempts} attempt{plural}: {error_type}: {message}"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            type(self),
            (self.job_id, self.status, self.error_type, self.message, self.attempts),
        )

    @classmethod
    def from_job(
        cls, job_id: str, status: str, last_error: str | None, attempts: int
    ) -> JobFailedError:
        """The error for a job that ended in `status` with `last_error`.

        A failed job's error reads ``"Type: message"`` (how the scheduler
        records an exception); a timed-out or cancelled job's type is its status.
        """
        text = last_error or ""
        if status == "failed":
            head, sep, rest = text.partition(": ")
            if sep and head.replace(".", "").replace("_", "").isalnum() and " " not in head:
                return cls(job_id, status, head, rest, attempts)
            return cls(job_id, status, "Error", text or "failed", attempts)
        return cls(job_id, status, status, text or status, attempts)


class SchedulerStoppedError(SchedulerError):
    """The scheduler is stopping or stopped and accepts no more work."""


class PluginError(SchedulerError):
    """A plugin could not be loaded, conflicts with another, or a name is unknown."""


class StoreError(SchedulerError):
    """A store could not be opened, read or written.

    The message names the store (file or DSN) and the problem. A store that
    raises this has left its data as it was before the failed call.
    """


class BadRowError(StoreError):
    """A stored row holds what jobsched cannot read (changed by hand, or by a
    broken store): `what` (``"job"``, ``"schedule"``) `row_id`'s `column`,
    and the `problem` with its value. `url` names the store once the store
    has added it (`in_store`)."""

    def __init__(self, what: str, row_id: object, column: str, problem: str, url: str = "") -> None:
        self.what = what
        self.row_id = row_id
        self.column = column
        self.problem = problem
        self.url = url
        where = f"{url}: " if url else ""
        super().__init__(f"{where}{what} {row_id} cannot be read: its {column} {problem}")

    def in_store(self, url: str) -> BadRowError:
        """The same error, naming the store."""
        if self.url:
            return self
        return BadRowError(self.what, self.row_id, self.column, self.problem, url)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.what, self.row_id, self.column, self.problem, self.url))


class MissingRoleError(StoreError, TypeError):
    """A store lacks a role (`jobsched.store.ROLES`) that what uses it needs.

    `store` names it (its URL), `user` is what needs the roles (``"a Client"``,
    ``"jobsched web"``), `lacking` maps each missing role to the members it
    lacks. One line, naming all three.
    """

    def __init__(self, store: str, user: str, lacking: dict[str, list[str]]) -> None:
        self.store = store
        self.user = user
        self.lacking = lacking
        super().__init__(
            f"store {store} cannot serve {user}: it lacks {self.describe(lacking)} "
            "(docs/plugins.md#store-roles says which roles serve what)"
        )

    @staticmethod
    def describe(lacking: dict[str, list[str]]) -> str:
        """``the queue role (claim, finish) and the limits role (set_limits)``."""
        return " and ".join(f"the {role} role ({', '.join(m)})" for role, m in lacking.items())

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.store, self.user, self.lacking))


class SchemaTooNewError(StoreError):
    """The store was migrated by a newer jobsched than this one: its schema is
    version `found`, this code knows up to `known`. Running on would misread
    it, so a worker stops (the message names both versions)."""

    def __init__(self, message: str, found: int, known: int) -> None:
        self.found = found
        self.known = known
        super().__init__(message)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self), self.found, self.known))


class StoreOwnedError(StoreError):
    """An action refused because a running process owns the store file
    (SQLite's single-owner mode, while ``jobsched run`` runs on it): its
    ``host:pid`` is `owner`. Nothing was changed; once it stops, the same
    action goes through."""

    def __init__(self, message: str, owner: str) -> None:
        self.owner = owner
        super().__init__(message)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self), self.owner))


class NonRetryableError(Exception):
    """Raise from a job to fail it immediately, skipping any remaining retries."""


class BadArgumentsError(NonRetryableError, TypeError):
    """A function job's arguments do not fit its signature: no retry can fix that."""


class ResultUnavailableError(NonRetryableError):
    """A dependent's `result_of` argument cannot be resolved: the upstream's
    result is not JSON on a durable store, expired, or the upstream is gone.
    The dependent fails with it (not retried); the message names the upstream."""


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
