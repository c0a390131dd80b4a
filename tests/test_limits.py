"""Concurrency limits per executor and per job type, and rate limits, on the virtual clock."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable
from typing import Any, ClassVar

import pytest

from jobsched import (
    AsyncJob,
    FunctionJob,
    Job,
    JobScheduler,
    JobStatus,
    Limits,
    PluginManager,
    Rate,
    RetryPolicy,
    hookimpl,
    job_type_of,
)
from jobsched.testing import VirtualClock


class Tracker:
    """Counts attempts in flight per job type and remembers the peaks and start times."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self.running: Counter[str] = Counter()
        self.peak: Counter[str] = Counter()
        self.starts: dict[str, list[float]] = {}
        self.ends: dict[str, list[float]] = {}

    async def work(self, kind: str, seconds: float) -> None:
        self.running[kind] += 1
        self.peak[kind] = max(self.peak[kind], self.running[kind])
        self.starts.setdefault(kind, []).append(self.clock.now())
        try:
            if seconds:
                await self.clock.sleep(seconds)
        finally:
            self.running[kind] -= 1
            self.ends.setdefault(kind, []).append(self.clock.now())


class Work(AsyncJob):
    """A job of a given type that takes `seconds` of virtual time."""

    __slots__ = ("kind", "seconds", "tracker")

    def __init__(self, tracker: Tracker, kind: str, seconds: float = 1.0, **kw: Any) -> None:
        super().__init__(kind, timeout=None, **kw)
        self.tracker = tracker
        self.kind = kind
        self.seconds = seconds

    async def run(self) -> None:
        await self.tracker.work(self.kind, self.seconds)


class CsvExport(Work):
    __slots__ = ()
    job_type: ClassVar[str] = "csv-export"


class CsvExportOnIo(CsvExport):
    __slots__ = ()
    model = "io"


class Email(Work):
    __slots__ = ()
    job_type: ClassVar[str] = "email"


class IoWork(Work):
    """Runs on a second async executor, named "io", so executor limits can be told apart."""

    __slots__ = ()
    model = "io"


class IoExecutor:
    def __init__(self, workers: int = 1) -> None:
        pass

    def invoke(self, job: Job) -> Awaitable[Any]:
        return job.run()  # type: ignore[attr-defined, no-any-return]

    def shutdown(self) -> None:
        pass


class IoPlugin:
    @hookimpl
    def jobsched_register_executors(self, register: Any) -> None:
        register("io", IoExecutor)


def scheduler_with(clock: VirtualClock, limits: Any, num_workers: int = 8) -> JobScheduler:
    plugins = PluginManager([IoPlugin()], autoload=False)
    return JobScheduler(
        clock=clock, num_workers=num_workers, limits=limits, plugins=plugins, strategy="fifo"
    )


async def test_job_type_limit_holds_under_a_burst_without_blocking_others(
    virtual_clock: VirtualClock,
) -> None:
    tracker = Tracker(virtual_clock)
    scheduler = scheduler_with(virtual_clock, {"job_types": {"csv-export": 2}})
    for _ in range(1000):
        scheduler.submit(CsvExport(tracker, "csv-export"))
    for _ in range(60):
        scheduler.submit(Work(tracker, "other"))  # behind 1,000 held-back exports
    async with scheduler:
        await virtual_clock.advance(501)
        await scheduler.join()
    assert tracker.peak["csv-export"] == 2
    assert len(tracker.starts["csv-export"]) == 1000
    assert max(tracker.ends["csv-export"]) == 500.0  # 1,000 one-second jobs, two at a time
    # The other jobs got the six free workers at once instead of queueing behind.
    assert tracker.peak["other"] == 6
    assert max(tracker.ends["other"]) == 10.0
    assert scheduler.limiter is not None
    assert scheduler.limiter.parked == 0
    assert scheduler.limiter.running(job_type="csv-export") == 0


async def test_executor_limit_holds_under_a_burst(virtual_clock: VirtualClock) -> None:
    tracker = Tracker(virtual_clock)
    scheduler = scheduler_with(virtual_clock, Limits(executors={"io": 3}))
    for _ in range(1000):
        scheduler.submit(IoWork(tracker, "io"))
    for _ in range(50):
        scheduler.submit(Work(tracker, "loop"))
    async with scheduler:
        await virtual_clock.advance(400)
        await scheduler.join()
    assert tracker.peak["io"] == 3
    assert max(tracker.ends["io"]) == 334.0  # ceil(1000 / 3) seconds
    assert tracker.peak["loop"] == 5
    assert scheduler.peak_running == 8


async def test_executor_limit_by_concurrency_model_name(virtual_clock: VirtualClock) -> None:
    tracker = Tracker(virtual_clock)
    scheduler = scheduler_with(virtual_clock, {"executors": {"async": 2}})
    for _ in range(10):
        scheduler.submit(Work(tracker, "a"))
    async with scheduler:
        await virtual_clock.advance(5)
    assert tracker.peak["a"] == 2
    assert len(tracker.ends["a"]) == 10


async def test_a_job_woken_for_a_slot_but_held_by_another_limit_passes_the_slot_on(
    virtual_clock: VirtualClock,
) -> None:
    tracker = Tracker(virtual_clock)
    limits = Limits(executors={"io": 1}, job_types={"csv-export": 1})
    scheduler = scheduler_with(virtual_clock, limits)
    scheduler.submit(CsvExport(tracker, "csv-export", 100.0))  # holds csv-export (async)
    scheduler.submit(IoWork(tracker, "io-short", 1.0))  # holds io
    # parked on io, and when io frees, held by csv-export
    scheduler.submit(CsvExportOnIo(tracker, "csv-export-io", 1.0))
    scheduler.submit(IoWork(tracker, "io-next", 1.0))  # parked on io behind it
    async with scheduler:
        await virtual_clock.advance(3)
        # io freed at 1: the export is woken but csv-export is busy, so io-next runs.
        assert tracker.starts["io-next"] == [1.0]
        await virtual_clock.advance(100)
        await scheduler.join()
    assert tracker.starts["csv-export-io"] == [100.0]


async def test_rate_limit_spaces_starts_exactly(virtual_clock: VirtualClock) -> None:
    tracker = Tracker(virtual_clock)
    scheduler = scheduler_with(virtual_clock, {"rates": {"email": "10/s"}})
    for _ in range(1000):
        scheduler.submit(Email(tracker, "email", 0.0))
    for _ in range(5):
        scheduler.submit(Work(tracker, "other", 0.0))
    async with scheduler:
        await virtual_clock.advance(100)
        await scheduler.join()
    starts = tracker.starts["email"]
    assert starts == pytest.approx([i / 10 for i in range(1000)])
    # at most 10 starts in any one-second window
    assert max(sum(1 for s in starts if t <= s < t + 1 - 1e-9) for t in starts) == 10
    assert tracker.starts["other"] == [0.0] * 5  # not held behind the emails


async def test_rate_limit_burst(virtual_clock: VirtualClock) -> None:
    tracker = Tracker(virtual_clock)
    rate = Rate.parse({"rate": "2/s", "burst": 4})
    scheduler = scheduler_with(virtual_clock, Limits(rates={"email": rate}))
    for _ in range(8):
        scheduler.submit(Email(tracker, "email", 0.0))
    async with scheduler:
        await virtual_clock.advance(10)
    assert tracker.starts["email"] == pytest.approx([0, 0, 0, 0, 0.5, 1.0, 1.5, 2.0])


async def test_rate_and_concurrency_together(virtual_clock: VirtualClock) -> None:
    tracker = Tracker(virtual_clock)
    limits = {"rates": {"email": "4/s"}, "job_types": {"email": 1}}
    scheduler = scheduler_with(virtual_clock, limits)
    for _ in range(6):
        scheduler.submit(Email(tracker, "email", 0.5))  # slower than the rate allows
    async with scheduler:
        await virtual_clock.advance(10)
    assert tracker.peak["email"] == 1
    assert tracker.starts["email"] == pytest.approx([0, 0.5, 1.0, 1.5, 2.0, 2.5])


async def test_cancelling_a_parked_job(virtual_clock: VirtualClock) -> None:
    tracker = Tracker(virtual_clock)
    scheduler = scheduler_with(virtual_clock, {"job_types": {"csv-export": 1}})
    first = scheduler.submit(CsvExport(tracker, "csv-export"))
    second = scheduler.submit(CsvExport(tracker, "csv-export"))
    third = scheduler.submit(CsvExport(tracker, "csv-export"))
    async with scheduler:
        await virtual_clock.advance(0)
        assert scheduler.limiter is not None and scheduler.limiter.parked == 2
        assert scheduler.cancel(second)
        await virtual_clock.advance(3)
    assert scheduler.get(first).status is JobStatus.COMPLETED
    assert scheduler.get(second).status is JobStatus.CANCELLED
    assert scheduler.get(third).status is JobStatus.COMPLETED
    assert tracker.starts["csv-export"] == [0.0, 1.0]


async def test_a_cancelled_rate_reservation_does_not_stall_the_others(
    virtual_clock: VirtualClock,
) -> None:
    tracker = Tracker(virtual_clock)
    scheduler = scheduler_with(virtual_clock, {"rates": {"email": "1/s"}})
    ids = [scheduler.submit(Email(tracker, "email", 0.0)) for _ in range(3)]
    async with scheduler:
        await virtual_clock.advance(0)
        scheduler.cancel(ids[1])  # it held the token at 1.0
        await virtual_clock.advance(5)
    assert tracker.starts["email"] == [0.0, 2.0]  # the rate is kept, never exceeded


async def test_retries_and_timeouts_give_their_slot_back(virtual_clock: VirtualClock) -> None:
    attempts = []

    async def flaky() -> None:
        attempts.append(virtual_clock.now())
        if len(attempts) < 3:
            raise RuntimeError("flaky")

    async def hangs() -> None:
        await virtual_clock.sleep(1e9)

    # A function job's type is its qualified name.
    flaky_type, hangs_type = job_type_of(FunctionJob(flaky)), job_type_of(FunctionJob(hangs))
    assert hangs_type == "test_retries_and_timeouts_give_their_slot_back.<locals>.hangs"
    scheduler = scheduler_with(virtual_clock, {"job_types": {flaky_type: 1, hangs_type: 1}})
    retry = RetryPolicy(max_retries=5, base_delay=1.0, jitter=False)
    a = scheduler.submit(flaky, retry=retry, timeout=None)
    b = scheduler.submit(hangs, timeout=5.0, retry=RetryPolicy(max_retries=0))
    c = scheduler.submit(hangs, timeout=5.0, retry=RetryPolicy(max_retries=0))
    async with scheduler:
        await virtual_clock.advance(20)
    assert scheduler.get(a).status is JobStatus.COMPLETED
    assert len(attempts) == 3
    assert scheduler.get(b).status is JobStatus.TIMED_OUT
    assert scheduler.get(c).status is JobStatus.TIMED_OUT
    assert scheduler.get(c).started_at == 5.0  # ran once b's timeout freed the slot
    assert scheduler.limiter is not None
    assert scheduler.limiter.running(job_type=hangs_type) == 0


def test_without_limits_the_plain_dispatch_path_is_used() -> None:
    # Workers pop the ready queue themselves while nothing can hold a job back.
    scheduler = JobScheduler()
    assert scheduler.limiter is None and scheduler.kernel.queues.plain
    unlimited = JobScheduler(limits={})
    assert unlimited.limiter is None and unlimited.kernel.queues.plain
    limited = JobScheduler(limits={"job_types": {"x": 1}})
    assert limited.limiter is not None and not limited.kernel.queues.plain


def test_job_type_names() -> None:
    async def send_email() -> None:
        pass

    class Plain(AsyncJob):
        async def run(self) -> None:
            pass

    assert job_type_of(FunctionJob(send_email)).endswith("send_email")
    assert job_type_of(Email(Tracker(VirtualClock()), "e")) == "email"
    assert job_type_of(Plain("p")) == "Plain"
    assert job_type_of(Plain("p"), {Plain: "registered"}) == "registered"


@pytest.mark.parametrize(
    ("spec", "per_second", "burst"),
    [
        ("10/s", 10.0, 1),
        ("600/min", 10.0, 1),
        ("5/2h", 5 / 7200, 1),
        ("1/second", 1.0, 1),
        ("30 / minutes", 0.5, 1),
        (2.5, 2.5, 1),
        ({"rate": "10/s", "burst": 3}, 10.0, 3),
    ],
)
def test_rate_parse(spec: Any, per_second: float, burst: int) -> None:
    rate = Rate.parse(spec)
    assert rate.per_second == pytest.approx(per_second)
    assert rate.burst == burst


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ({"job_type": {"x": 1}}, r"unknown keys \['job_type'\]"),
        ({"job_types": {"x": 0}}, r"limits.job_types\['x'\] must be an integer >= 1, got 0"),
        ({"executors": {"process": 1.5}}, r"limits.executors\['process'\] must be an integer"),
        ({"rates": {"email": "ten per second"}}, r"limits.rates\['email'\]: rate 'ten per second'"),
        ({"rates": {"email": "10/fortnight"}}, "expected COUNT/UNIT"),
        ({"rates": {"email": 0}}, "positive number"),
        ({"rates": {"email": {"rate": "1/s", "burst": 0}}}, "burst must be an integer >= 1"),
        ({"rates": {"email": {"burst": 2}}}, "expected keys 'rate'"),
        ({"rates": {"email": True}}, "rate must be"),
    ],
)
def test_bad_limits_name_the_culprit(limits: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        JobScheduler(limits=limits)


def test_limits_must_be_a_mapping() -> None:
    with pytest.raises(TypeError, match="limits must be a Limits or a mapping"):
        JobScheduler(limits=[("x", 1)])  # type: ignore[arg-type]


def test_limits_built_directly_are_checked_and_converted() -> None:
    limits = Limits(executors={"process": 2}, rates={"email": "10/s", "sms": 0.5})
    assert limits.rates == {"email": Rate(10.0), "sms": Rate(0.5)}
    assert not Limits() and Limits(job_types={"x": 1})
    with pytest.raises(ValueError, match=r"limits.executors\['process'\] must be an integer >= 1"):
        Limits(executors={"process": 0})
    with pytest.raises(ValueError, match=r"limits.rates\['email'\]: rate 'often'"):
        Limits(rates={"email": "often"})
    with pytest.raises(TypeError, match=r"limits\.job_types must be a mapping"):
        Limits(job_types=[("x", 1)])  # type: ignore[arg-type]
