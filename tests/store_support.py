"""Helpers for the store tests: job types as a plugin, a manual clock, an
in-memory durable store whose commits the test controls, and a crash."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from jobsched import AsyncJob, JobScheduler, NonRetryableError, StoreError, hookimpl
from jobsched.store import JobRow, ScheduleRow, Snapshot, StoreContext

# Events of Gate jobs, by tag: (started, release). Set up per test.
GATES: dict[str, tuple[asyncio.Event, asyncio.Event]] = {}


def gate(tag: str) -> tuple[asyncio.Event, asyncio.Event]:
    GATES[tag] = (asyncio.Event(), asyncio.Event())
    return GATES[tag]


@attrs.define(slots=True, eq=False, repr=False)
class Noop(AsyncJob):
    """Does nothing."""

    label: str = ""

    async def run(self) -> None:
        return None


@attrs.define(slots=True, eq=False, repr=False)
class Record(AsyncJob):
    """Appends its tag to a log file on every execution; fails the first
    `fail_times` executions; returns `value`."""

    log: str
    tag: str
    fail_times: int = 0
    value: Any = None

    def __attrs_post_init__(self) -> None:
        self.name = self.tag

    async def run(self) -> Any:
        path = Path(self.log)
        with path.open("a") as f:
            f.write(self.tag + "\n")
        runs = path.read_text().split().count(self.tag)
        if runs <= self.fail_times:
            raise RuntimeError(f"{self.tag} fails on purpose (run {runs})")
        return self.value


@attrs.define(slots=True, eq=False, repr=False)
class Gate(AsyncJob):
    """Signals it started, then waits until the test releases it."""

    tag: str

    def __attrs_post_init__(self) -> None:
        self.name = self.tag

    async def run(self) -> str:
        started, release = GATES[self.tag]
        started.set()
        await release.wait()
        return self.tag


@attrs.define(slots=True, eq=False, repr=False)
class Fail(AsyncJob):
    """Fails at once, without retries."""

    message: str = "boom"

    async def run(self) -> None:
        raise NonRetryableError(self.message)


@attrs.define(slots=True, eq=False, repr=False)
class Odd(AsyncJob):
    """Returns something JSON cannot encode."""

    async def run(self) -> object:
        return {1, 2}


@attrs.define(slots=True, eq=False, repr=False)
class Gone(AsyncJob):
    """Registered only by `gone_plugin`: restarting without it leaves orphan rows."""

    async def run(self) -> None:
        return None


class jobs_plugin:
    @staticmethod
    @hookimpl
    def jobsched_register_job_types(register: Callable[[str, Any], None]) -> None:
        for name, cls in [
            ("noop", Noop),
            ("record", Record),
            ("gate", Gate),
            ("fail", Fail),
            ("odd", Odd),
        ]:
            register(name, cls)


class gone_plugin:
    @staticmethod
    @hookimpl
    def jobsched_register_job_types(register: Callable[[str, Any], None]) -> None:
        register("gone", Gone)


class ManualClock:
    """Time that moves only when the test says so.

    `mono` and `wall` set the starting readings; a "restarted process" gets a
    clock with another monotonic origin and a later wall time.
    """

    def __init__(self, mono: float = 1000.0, wall: float = 1_800_000_000.0) -> None:
        self._now = mono
        self._offset = wall - mono
        self._timers: list[tuple[float, int, _Timer]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self._now

    def time(self) -> float:
        return self._now + self._offset

    def call_at(self, when: float, callback: Callable[[], None]) -> _Timer:
        timer = _Timer(callback)
        heapq.heappush(self._timers, (when, next(self._seq), timer))
        if when <= self._now:
            asyncio.get_running_loop().call_soon(self._fire_due)
        return timer

    def _fire_due(self) -> None:
        while self._timers and self._timers[0][0] <= self._now:
            timer = heapq.heappop(self._timers)[2]
            if not timer.cancelled:
                timer.callback()

    async def advance(self, seconds: float) -> None:
        self._now += seconds
        self._fire_due()
        for _ in range(5):  # let woken workers take the jobs
            await asyncio.sleep(0)


class _Timer:
    def __init__(self, callback: Callable[[], None]) -> None:
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class RecordingStore:
    """A durable store in memory: survives scheduler "restarts" in one test.

    `gate` (an Event) holds every write until set; `fail` makes writes raise.
    """

    durable = True
    shared = False

    def __init__(self, url: str = "recording://") -> None:
        self.url = url
        self.jobs: dict[str, JobRow] = {}
        self.schedules: dict[str, ScheduleRow] = {}
        self.batches: list[list[JobRow | ScheduleRow]] = []
        self.gate: asyncio.Event | None = None
        self.fail: str | None = None
        self.opened = self.closed = 0

    async def open(self, context: StoreContext) -> Snapshot:
        self.opened += 1
        return Snapshot(
            jobs=[attrs.evolve(r) for r in self.jobs.values()],
            schedules=[attrs.evolve(r) for r in self.schedules.values()],
        )

    async def write(self, batch: Sequence[JobRow | ScheduleRow]) -> None:
        if self.gate is not None:
            await self.gate.wait()
        if self.fail is not None:
            raise StoreError(f"{self.url}: {self.fail}")
        self.batches.append(list(batch))
        for row in batch:
            if isinstance(row, JobRow):
                self.jobs[row.job_id] = attrs.evolve(row)
            else:
                self.schedules[row.schedule_id] = attrs.evolve(row)

    async def close(self) -> None:
        self.closed += 1

    def status(self, job_id: str) -> str:
        return self.jobs[job_id].status


async def crash(scheduler: JobScheduler) -> None:
    """Stop `scheduler` the way ``kill -9`` would: nothing more reaches its store.

    The store stops taking writes (each is dropped, as by a process that is
    gone), so whatever the scheduler does while it is torn down (the attempts
    it interrupts, its final flush) never lands; then it stops.
    """
    store = scheduler.store
    assert store is not None

    async def dropped(batch: Sequence[JobRow | ScheduleRow]) -> None:
        pass

    store.write = dropped  # type: ignore[method-assign]
    await scheduler.stop(cancel_running=True)


def scheduler(store: Any, clock: ManualClock | None = None, **kwargs: Any) -> JobScheduler:
    """A scheduler with the test job types, FIFO order and two workers."""
    kwargs.setdefault("num_workers", 2)
    return JobScheduler(
        "fifo", plugins=[jobs_plugin, *kwargs.pop("extra", ())], store=store, clock=clock, **kwargs
    )


async def until(condition: Callable[[], bool], *, steps: int = 10_000) -> None:
    """Let the loop run until `condition()` holds; fail after `steps` loop turns.

    Counts loop iterations, not seconds: deterministic, and never a sleep that
    races.
    """
    for _ in range(steps):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"condition not reached after {steps} loop iterations")


def runs(log: Path) -> list[str]:
    """The tags in a Record log, one per execution."""
    return log.read_text().split() if log.exists() else []


@attrs.define
class FakeClaim:
    """A claimed row, as a shared store hands it to the process that claimed it."""

    job_id: str
    type: str
    args: dict[str, Any]
    options: dict[str, Any] = attrs.field(factory=dict)
    attempts: int = 1
    submitted_at: float = 0.0
    cancel_requested: bool = False
    queue: str = "default"


class FakeSharedStore:
    """A shared store in memory, enough for one process's shared backend.

    `queue` holds the rows the next `claim` hands out (in that order);
    `outcomes` records every `finish`, and `finished` is set on each.
    """

    url = "fake-shared://"
    durable = True
    shared = True
    lease_seconds = 3600.0

    def __init__(self) -> None:
        self.queue: list[FakeClaim] = []
        self.inserted: list[Any] = []
        self.outcomes: list[Any] = []
        self.finished = asyncio.Event()
        self.limits: Any = None
        self.on_cancel: Any = None
        self.on_work: Any = None
        self.on_resync: Any = None
        self.on_worker_request: Any = None
        #: Every registry row the backend wrote (`heartbeat`), in order.
        self.heartbeats: list[Any] = []
        #: Every batch of history rows the backend flushed (`add_history`).
        self.history_rows: list[Any] = []

    async def open(self, context: Any) -> None:
        return None

    async def close(self) -> None:
        return None

    async def sync_limits(self, data: Any) -> Any:
        self.limits = data
        return data

    async def insert(self, jobs: list[Any]) -> list[str]:
        self.inserted.extend(jobs)
        return [job.job_id for job in jobs]

    async def claim(
        self,
        n: int,
        owner: str,
        queues: Any = None,
        *,
        types: Any = None,
        refuser: Any = None,
    ) -> tuple[list[FakeClaim], float | None]:
        taken, self.queue = self.queue[:n], self.queue[n:]
        return taken, None

    async def renew(self, job_ids: Any, owner: str) -> set[str]:
        return set()

    async def cancel_requests(self, owner: str) -> list[str]:
        return []

    async def reap_expired(self, max_expiries: int = 3) -> int:
        return 0

    async def release(self, job_ids: Any, owner: str) -> None:
        return None

    async def finish(self, outcomes: list[Any], owner: str) -> list[str]:
        self.outcomes.extend(outcomes)
        self.finished.set()
        return [o.job_id for o in outcomes]

    async def request_cancel(self, job_id: str) -> bool:
        return False

    async def request_cancel_many(self, job_ids: Any) -> list[str]:
        return []

    async def delete_finished(self, job_ids: Any) -> list[str]:
        return []

    async def expire_results(self) -> int:  # the reaper's calls: nothing to reap
        return 0

    async def purge(self, before: float, statuses: Any) -> int:
        return 0

    async def heartbeat(self, worker: Any, forget_after: float) -> str | None:
        self.heartbeats.append(worker)
        return None  # no operator asks anything of it

    async def request_worker(self, worker_id: str, command: str) -> bool:
        return False

    async def forget_worker(self, worker_id: str) -> bool:
        return any(w.worker_id == worker_id for w in self.heartbeats)

    async def add_history(self, rows: list[Any]) -> None:
        self.history_rows.append(list(rows))

    # The rest of the contract: not used by the tests that use this store.
    async def _unused(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("FakeSharedStore does not implement this call")

    refuse = _unused
    wait = wait_finished = set_limits = add_schedule = get_schedule = _unused
    fire_schedule = deactivate_schedule = schedule_jobs = get = jobs = dependents = _unused
    dependents_of = _unused
    counts = unfinished = page = stats = retry = requeue = set_progress = _unused
    wait_changed = set_queue_paused = queue_paused = queue_stats = schedules = _unused
    set_schedule_paused = trigger_schedule = workers = unserved_types = _unused
    history = backlog = _unused
