"""Transition listeners: the plugins', the backend's and the user's, compiled for the hot path."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import structlog

from .._status import JobStatus, listener_statuses

if TYPE_CHECKING:
    from .._job import Job
    from .._plugins import TransitionListener

logger = structlog.get_logger("jobsched")

RUNNING = JobStatus.RUNNING

JobListener = Callable[["Job", JobStatus, JobStatus], None]
#: A transition listener and the target statuses it wants (None: every one).
Wanted = tuple["TransitionListener", "tuple[JobStatus, ...] | None"]


class Listeners:
    """Who hears transitions. Compiled whenever the set changes, so a transition
    reads plain tuples: `every` (all listeners: test it before calling
    `notify`), `running` (those that want RUNNING) and `pairs` (each with the
    statuses it wants, for a caller that inlines `notify`)."""

    __slots__ = ("_filters", "_fixed", "_user", "every", "pairs", "running")

    def __init__(self, fixed: tuple[Wanted, ...]) -> None:
        self._fixed = fixed  # the backend's, then the plugins'
        self._user: list[Wanted] = []
        self.every: tuple[TransitionListener, ...] = ()
        self.running: tuple[TransitionListener, ...] = ()
        self.pairs: tuple[Wanted, ...] = ()
        self._filters: tuple[Wanted, ...] | None = None
        self._compile()

    def add(self, listener: JobListener, *, statuses: Iterable[JobStatus] | None = None) -> None:
        """Observer hook: called as ``listener(job, old_status, new_status)``.

        `statuses`, the target statuses it wants (e.g. the terminal ones),
        limits it to the transitions into them; the others cost it nothing,
        not even a call. None (the default): every transition. A listener
        that raises is logged and skipped; the others still run.
        """
        wanted = listener_statuses(statuses, f"add_listener({listener!r})")
        self._user.append((listener, wanted))
        self._compile()

    def remove(self, listener: JobListener) -> None:
        """Stop calling a listener `add` added (`ValueError` if it was not)."""
        for i, (added, _) in enumerate(self._user):
            if added == listener:
                del self._user[i]
                self._compile()
                return
        raise ValueError(f"remove_listener: {listener!r} was not added")

    def notify(self, job: Job, old: JobStatus, new: JobStatus) -> None:
        """Call the listeners that want `new`."""
        filters = self._filters
        if filters is None:
            for listener in self.every:
                try:
                    listener(job, old, new)
                except Exception:  # a bad listener must not kill a worker
                    logger.exception("listener failed", job_id=job.job_id, listener=repr(listener))
            return
        for listener, wanted in filters:
            if wanted is None or new in wanted:
                try:
                    listener(job, old, new)
                except Exception:
                    logger.exception("listener failed", job_id=job.job_id, listener=repr(listener))

    def notify_running(self, job: Job, old: JobStatus) -> None:
        """Call the listeners that want RUNNING."""
        for listener in self.running:
            try:
                listener(job, old, RUNNING)
            except Exception:  # a bad listener must not kill a worker
                logger.exception("listener failed", job_id=job.job_id, listener=repr(listener))

    def _compile(self) -> None:
        pairs = self._fixed + tuple(self._user)
        self.every = tuple(listener for listener, _ in pairs)
        self.running = tuple(
            listener for listener, wanted in pairs if wanted is None or RUNNING in wanted
        )
        self._filters = pairs if any(wanted is not None for _, wanted in pairs) else None
        self.pairs = pairs
