"""`LocalBackend`: jobs kept in memory, in the kernel's own queues.

Its per-job hooks are all None, so the kernel's per-job path does no backend
call at all: this is the speed of the kernel alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..store import StoreBase, StoreContext, new_worker_id

if TYPE_CHECKING:
    from .._job import Job
    from .._plugins import ProgressListener, TransitionListener
    from .._recurring import RecurringSchedule, Trigger
    from .._status import JobStatus
    from ..kernel.port import AdmitHook, FinishedHook, KernelPort, StartingHook


class LocalBackend:
    """The in-memory backend; the base the other backends build on.

    `store` is an optional store that is not durable (the ``memory`` store):
    opened in ``start()`` and closed in ``stop()``, and never written.
    """

    listener: TransitionListener | None = None
    admit: AdmitHook | None = None
    finished: FinishedHook | None = None
    progress: ProgressListener | None = None
    starting: StartingHook | None = None

    def __init__(self, store: StoreBase | None = None) -> None:
        self.store = store
        self._kernel: KernelPort | None = None
        self._opened = False

    @property
    def kernel(self) -> KernelPort:
        """The port of the kernel this backend serves (set by `bind`)."""
        assert self._kernel is not None, "the backend is not bound to a kernel yet"
        return self._kernel

    def bind(self, kernel: KernelPort) -> None:
        if self._kernel is not None:
            raise ValueError(f"{self!r} already serves a scheduler; build one per scheduler")
        self._kernel = kernel

    # ── jobs ──────────────────────────────────────────────────────────
    def refused(self, job: Job) -> None:
        pass

    def retry(self, job: Job) -> bool:
        return False  # the kernel's delayed heap keeps it

    def interrupted(self, job: Job) -> bool:
        return False  # nothing keeps it: a shutdown cancels it

    def cancel(self, job_id: str) -> bool:
        return False  # not the kernel's: unknown

    def retried(self, job: Job) -> None:
        pass

    def purged(
        self,
        job_ids: Sequence[str],
        before: float,
        statuses: Sequence[JobStatus],
        *,
        exact: bool = False,
    ) -> None:
        pass

    def results_expired(self, jobs: Sequence[Job]) -> None:
        pass

    def resolve(self, job_id: str) -> str:
        return job_id

    # ── schedules: the kernel's own timers ────────────────────────────
    def schedule_recurring(
        self,
        factory: Callable[[], Job],
        interval: float | None,
        trigger: Trigger | dict[str, Any] | None,
        options: dict[str, Any],
    ) -> str:
        return self.kernel.add_recurring(factory, interval, trigger=trigger, **options)

    def cancel_recurring(self, schedule_id: str) -> bool:
        return False

    def schedule_added(self, sched: RecurringSchedule, spec: Any, key: str | None) -> None:
        pass

    def schedule_changed(self, sched: RecurringSchedule) -> None:
        pass

    def schedule_fired(self, sched: RecurringSchedule, job_id: str) -> None:
        pass

    # ── lifecycle ─────────────────────────────────────────────────────
    async def open(self) -> None:
        if self.store is not None:
            await self.store.open(StoreContext(worker_id=new_worker_id()))
            self._opened = True

    async def stop_claiming(self) -> None:
        pass

    async def close(self) -> BaseException | None:
        if self.store is not None and self._opened:
            self._opened = False
            await self.store.close()
        return None

    async def flush(self) -> None:
        pass

    async def join(self) -> None:
        await self.kernel.wait_idle()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.store!r})" if self.store is not None else "LocalBackend()"
        )
