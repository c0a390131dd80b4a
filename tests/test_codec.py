"""The codec: one mapping between a job and its stored data, for every store."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import attrs
import pytest

from jobsched import (
    AsyncJob,
    FunctionJob,
    JobPriority,
    JobSpecError,
    JobStatus,
    PluginManager,
    RetryPolicy,
    hookimpl,
)
from jobsched._codec import OPTIONS, JobCodec, sort_key
from jobsched._job import DEFAULT_RETRY, set_job_group
from jobsched.jobfile import JobOutcome
from jobsched.store import JobRow, decode_result, encode_result, result_as_json
from jobsched_plugins.edf import EarliestDeadlineFirstStrategy
from jobsched_plugins.fixed_retry import FixedRetryPolicy
from jobsched_plugins.no_retry import NoRetryPolicy
from store_support import ManualClock, Noop, Record, RecordingStore, jobs_plugin, scheduler

OFFSET = 1_000_000.0  # wall clock minus monotonic clock, in the describing process


@attrs.define(slots=True, eq=False, repr=False)
class Eager(AsyncJob):
    """A job type whose constructor has other defaults (high priority, 5 s)."""

    label: str = ""

    def __attrs_post_init__(self) -> None:
        self.priority = JobPriority.HIGH
        self.timeout = 5.0

    async def run(self) -> None:
        return None


class eager_plugin:
    @staticmethod
    @hookimpl
    def jobsched_register_job_types(register: Callable[[str, Any], None]) -> None:
        register("eager", Eager)


@pytest.fixture
def codec() -> JobCodec:
    return JobCodec(PluginManager([jobs_plugin, eager_plugin], autoload=False))


def described(codec: JobCodec, job: Any, offset: float = OFFSET) -> tuple[str, Any, Any]:
    type_name, args, options = codec.describe(job, offset)
    return type_name, json.loads(args), json.loads(options)


# ── options: one spelling ──────────────────────────────────────────────
def test_every_option_round_trips(codec: JobCodec) -> None:
    job = Noop(
        "x",
        name="nightly",
        priority="critical",
        timeout=5,
        retry=FixedRetryPolicy(max_retries=4, seconds=2.0),
        deadline=50.0,
        retry_on=[TimeoutError, "myapp.errors.Transient"],
        no_retry_on=[PermissionError],
        queue="emails",
    )
    job.traceparent = "00-" + "1" * 32 + "-" + "2" * 16 + "-01"
    job.result_ttl, job.keep_result = 60.0, False
    set_job_group(job, "tenant-1")
    type_name, args, options = described(codec, job)
    assert (type_name, args) == ("noop", {"label": "x"})
    assert options == {
        "name": "nightly",
        "executor": "async",
        "priority": "critical",
        "timeout": 5,
        "retry": {"policy": "fixed", "max_retries": 4, "seconds": 2.0},
        "deadline": 50.0 + OFFSET,
        "traceparent": job.traceparent,
        "result_ttl": 60.0,
        "keep_result": False,
        "retry_on": ["TimeoutError", "myapp.errors.Transient"],
        "no_retry_on": ["PermissionError"],
        "queue": "emails",
        "group": "tenant-1",
    }
    assert list(options) == list(OPTIONS)  # written in one order
    # Another process, whose monotonic clock started elsewhere.
    again = codec.build(type_name, args, options, 2_000_000.0, "job x")
    assert isinstance(again, Noop) and again.label == "x"
    assert (again.name, again.priority, again.timeout) == ("nightly", JobPriority.CRITICAL, 5.0)
    assert again.retry == FixedRetryPolicy(max_retries=4, seconds=2.0)
    assert again.deadline == pytest.approx(50.0 + OFFSET - 2_000_000.0)
    assert again.queue == "emails"
    assert again.traceparent == job.traceparent
    assert (again.result_ttl, again.keep_result) == (60.0, False)
    assert (again.retry_on, again.no_retry_on) == (job.retry_on, job.no_retry_on)
    assert described(codec, again, 2_000_000.0)[2] == options  # stable


def test_result_options_come_from_the_job_type_unless_the_job_sets_its_own(
    codec: JobCodec,
) -> None:
    class Kept(Noop):
        result_ttl = 3600
        keep_result = False

    job = Kept()
    assert (job.result_ttl, job.keep_result) == (3600.0, False)
    assert Kept.__dict__.get("result_ttl") is None, "the slot stays per job"
    job.result_ttl = 5.0
    assert (job.result_ttl, Kept().result_ttl) == (5.0, 3600.0)
    options = codec.options(job, OFFSET)
    assert (options["result_ttl"], options["keep_result"]) == (5.0, False)
    with pytest.raises(ValueError, match="result_ttl must be a number of seconds >= 0"):

        class Broken(Noop):
            result_ttl = -1

    with pytest.raises(JobSpecError, match="keep_result must be true or false"):
        codec.build("noop", {}, {"keep_result": "no"}, OFFSET, "job x")


def test_a_type_that_computes_an_option_is_described_job_by_job(codec: JobCodec) -> None:
    # Jobs of one type that set no option share their described options,
    # unless the type computes one of them itself.
    class Regional(Noop):
        def __init__(self, region: str) -> None:
            super().__init__()
            self.name = "regional"
            self.region = region

        @property
        def queue(self) -> str:
            return self.region

    class Mailing(Noop):
        queue = "mail"

    assert codec.options(Regional("eu"), OFFSET)["queue"] == "eu"
    assert codec.options(Regional("us"), OFFSET)["queue"] == "us"
    assert codec.options(Mailing(), OFFSET)["queue"] == "mail"
    assert "queue" not in codec.options(Noop(), OFFSET)


def test_options_at_their_defaults_are_left_out(codec: JobCodec) -> None:
    _, _, options = described(codec, Noop())
    assert options == {"name": "Noop", "executor": "async"}


def test_a_left_out_option_is_the_default_not_the_job_types_own(codec: JobCodec) -> None:
    job = Eager()
    job.priority, job.timeout = JobPriority.MEDIUM, 30.0
    type_name, args, options = described(codec, job)
    assert "priority" not in options and "timeout" not in options
    again = codec.build(type_name, args, options, OFFSET, "job x")
    assert (again.priority, again.timeout, again.retry) == (JobPriority.MEDIUM, 30.0, DEFAULT_RETRY)
    # And the type's own defaults, differing from the kernel's, are written.
    assert described(codec, Eager())[2] == {
        "name": "Eager",
        "executor": "async",
        "priority": "high",
        "timeout": 5.0,
    }


@pytest.mark.parametrize("priority", list(JobPriority))
def test_priority_is_written_as_its_lower_case_name(codec: JobCodec, priority: JobPriority) -> None:
    type_name, args, options = described(codec, Noop(priority=priority))
    if priority is JobPriority.MEDIUM:
        assert "priority" not in options
    else:
        assert options["priority"] == priority.name.lower()
    assert codec.build(type_name, args, options, OFFSET, "job x").priority is priority


def test_no_timeout_is_null(codec: JobCodec) -> None:
    type_name, args, options = described(codec, Noop(timeout=None))
    assert options["timeout"] is None
    assert codec.build(type_name, args, options, OFFSET, "job x").timeout is None


@pytest.mark.parametrize(
    ("table", "policy"),
    [
        ({"policy": "none"}, NoRetryPolicy()),
        ({"policy": "fixed", "seconds": 2}, FixedRetryPolicy(seconds=2.0)),
        ({"max_retries": 1}, RetryPolicy(max_retries=1)),  # the default policy's name
        (
            {"policy": "exponential", "max_retries": 2, "base_delay": 0.5, "jitter": False},
            RetryPolicy(max_retries=2, base_delay=0.5, jitter=False),
        ),
    ],
)
def test_retry_tables(codec: JobCodec, table: dict[str, Any], policy: Any) -> None:
    job = codec.build("noop", {}, {"retry": table}, OFFSET, "job x")
    assert job.retry == policy
    # Written back as the full table: the policy's name and every field.
    written = described(codec, job)[2]["retry"]
    assert written["policy"] == table.get("policy", "exponential")
    assert codec.build("noop", {}, {"retry": written}, OFFSET, "job x").retry == policy


def test_a_job_a_schedule_fired_keeps_its_period(codec: JobCodec) -> None:
    job = codec.build("noop", {}, {"scheduled_for": 12.0, "unique_key": "u"}, OFFSET, "job x")
    assert isinstance(job, Noop)


# ── old spellings still load ───────────────────────────────────────────
def test_options_stored_before_the_codec_still_load(codec: JobCodec) -> None:
    # Shared mode wrote every option, priority as a number.
    old_shared = {
        "name": "t",
        "priority": 2,
        "timeout": 30.0,
        "retry": {
            "policy": "exponential",
            "max_retries": 3,
            "base_delay": 1.0,
            "max_delay": 60.0,
            "jitter": True,
        },
        "executor": "async",
        "deadline": None,
    }
    job = codec.build("noop", {}, old_shared, OFFSET, "job x")
    assert (job.name, job.priority, job.timeout, job.deadline) == (
        "t",
        JobPriority.HIGH,
        30.0,
        None,
    )
    assert job.retry == RetryPolicy()
    # The journal wrote what differed, priority as a number, and no executor.
    job = codec.build("noop", {}, {"name": "t", "priority": 0, "timeout": 5.0}, OFFSET, "job x")
    assert (job.priority, job.timeout) == (JobPriority.LOW, 5.0)
    # Written again, in today's spelling.
    assert described(codec, job)[2] == {
        "name": "t",
        "executor": "async",
        "priority": "low",
        "timeout": 5.0,
    }


async def test_a_row_stored_before_the_codec_is_restored() -> None:
    store = RecordingStore()
    clock = ManualClock()
    old = JobRow(
        job_id="job-1",
        type="noop",
        status="pending",
        run_at=clock.time(),
        submitted_at=clock.time(),
        seq=0,
        options='{"name":"old","priority":3,"timeout":7.0,"unique_key":"u1"}',
    )
    store.jobs[old.job_id] = old
    s = scheduler(store, clock)
    await s.start()
    job = s.get("job-1")
    assert (job.name, job.priority, job.timeout) == ("old", JobPriority.CRITICAL, 7.0)
    # Its unique key still deduplicates after the restart.
    assert s.submit(Noop(), unique_key="u1") == "job-1"
    new_id = s.submit(Noop(name="new", priority="critical", timeout=7.0))
    await s.join()
    await s.stop()
    assert store.jobs["job-1"].status == "completed"
    assert json.loads(store.jobs[new_id].options) == {
        "name": "new",
        "executor": "async",
        "priority": "critical",
        "timeout": 7.0,
    }


# ── results ────────────────────────────────────────────────────────────
def test_a_result_json_cannot_hold_is_its_repr_and_a_note() -> None:
    assert encode_result(None) is None
    assert decode_result(None) is None
    assert decode_result(encode_result({"a": [1, 2.5]})) == {"a": [1, 2.5]}
    assert decode_result(encode_result((1, 2))) == [1, 2]
    for odd in ({1, 2}, float("nan"), object()):
        stored = decode_result(encode_result(odd))
        assert stored["$repr"] == repr(odd)
        assert stored["$note"].startswith("not JSON-encodable: ")
    assert result_as_json({1}) == decode_result(encode_result({1}))


def test_a_job_file_run_shows_a_result_the_way_stores_keep_it() -> None:
    outcome = JobOutcome(
        id="a",
        type="odd",
        job_id="job-1",
        status=JobStatus.COMPLETED,
        attempts=1,
        duration=0.0,
        result={1, 2},
        error=None,
    )
    assert outcome.to_json()["result"] == decode_result(encode_result({1, 2}))


# ── what cannot be stored: one error, one message, whatever the store ──
def _refusals(codec: JobCodec) -> list[tuple[Any, str]]:
    odd_retry = Noop()
    odd_retry.retry = object()  # type: ignore[assignment]

    class Unregistered(AsyncJob):
        async def run(self) -> None:
            return None

    return [
        (FunctionJob(len, "x"), "a plain function cannot be stored"),
        (Unregistered("u"), "Unregistered is not a registered job type"),
        (
            Record("log", "t", value=object()),
            "argument 'value' of job type 'record' is not a JSON value",
        ),
        (odd_retry, "is not a registered retry policy"),
    ]


def test_jobs_that_cannot_be_stored_are_refused_the_same_way_everywhere(
    codec: JobCodec,
) -> None:
    for job, message in _refusals(codec):
        with pytest.raises(JobSpecError, match=message) as by_describe:
            codec.describe(job, OFFSET)
        with pytest.raises(JobSpecError) as by_new_job:
            codec.new_job(job, strategy_key=lambda j: (0,), now=1.0, offset=OFFSET)
        assert str(by_describe.value) == str(by_new_job.value)


async def test_a_durable_scheduler_refuses_with_the_codecs_message(codec: JobCodec) -> None:
    s = scheduler(RecordingStore(), extra=[eager_plugin])
    await s.start()
    for job, message in _refusals(codec):
        with pytest.raises(JobSpecError, match=message):
            s.submit(job)
    await s.stop()


@pytest.mark.parametrize(
    ("type_name", "args", "options", "message"),
    [
        ("nope", {}, {}, "job 7: unknown job type 'nope'"),
        ("record", {"tag": "t"}, {}, "missing required argument 'log'"),
        ("noop", {}, {"priorty": "high"}, "job 7: unknown option 'priorty'"),
        ("noop", {}, {"priority": "urgent"}, "job 7: priority must be one of low, medium"),
        ("noop", {}, {"timeout": -1}, "job 7: timeout must be a positive number"),
        ("noop", {}, {"retry": {"policy": "gone"}}, "job 7: retry: unknown retry policy 'gone'"),
        ("noop", {}, {"retry": {"secs": 1}}, "retry policy 'exponential' has no option 'secs'"),
        ("noop", {}, {"deadline": "soon"}, "job 7: deadline must be a number"),
        ("noop", {}, {"name": ""}, "job 7: name must be a non-empty string"),
        ("noop", {}, {"executor": 3}, "job 7: executor must be a name"),
        ("noop", {}, [], "job 7: options must be a table"),
    ],
)
def test_bad_stored_data_names_the_job_and_the_problem(
    codec: JobCodec, type_name: str, args: Any, options: Any, message: str
) -> None:
    with pytest.raises(JobSpecError, match=message):
        codec.build(type_name, args, options, OFFSET, "job 7")


# ── rows for a shared store ────────────────────────────────────────────
def test_new_job_describes_the_job_and_the_submit(codec: JobCodec) -> None:
    job = Record("log", "t", priority="high", deadline=20.0)
    job.seq, job.submitted_at = 41, 3.0
    edf = EarliestDeadlineFirstStrategy()
    row = codec.new_job(
        job,
        job_id="j-1",
        strategy_key=edf.key,
        now=5000.0,
        offset=OFFSET,
        delay=2.5,
        depends_on=["a", "b"],
        key="file#t",
        unique_key="u",
        schedule_id="sched-1",
        scheduled_for=4999.0,
        submitted_by="host:1",
    )
    assert (row.job_id, row.type, row.key, row.unique_key) == ("j-1", "record", "file#t", "u")
    assert (row.run_at, row.submitted_at) == (5002.5, 5000.0)
    assert (row.depends_on, row.schedule_id, row.submitted_by) == (("a", "b"), "sched-1", "host:1")
    assert row.options == {
        "name": "t",
        "executor": "async",
        "priority": "high",
        "deadline": 20.0 + OFFSET,
        "scheduled_for": 4999.0,
    }
    # EDF on the wall-clock deadline, seq 0: the store breaks ties.
    assert row.sort_key == tuple(float(x) for x in edf.key(_at(job, 20.0 + OFFSET)))
    # The job itself is left as it was.
    assert (job.job_id != "j-1", job.seq, job.submitted_at, job.deadline) == (True, 41, 3.0, 20.0)


def _at(job: Any, deadline: float) -> Any:
    clone = Record("log", "t", priority="high", deadline=deadline)
    clone.seq, clone.submitted_at = 0, 5000.0
    return clone


def test_a_sort_key_must_be_numbers(codec: JobCodec) -> None:
    with pytest.raises(JobSpecError, match="a shared store needs a key of numbers only"):
        sort_key(lambda j: ("a",), Noop(), submitted_at=0.0, offset=0.0)


# ── result options on a scheduler's submit ─────────────────────────────
def with_result_ttl_parameter(result_ttl: float = 1.0) -> float:
    return result_ttl


async def test_submit_takes_the_result_options_and_the_scheduler_its_defaults() -> None:
    sched = scheduler(None, result_ttl=60, retention=3600)
    assert (sched.kernel.port.result_ttl, sched.kernel.port.retention) == (60.0, 3600.0)
    assert (scheduler(None).kernel.port.result_ttl, scheduler(None).kernel.port.retention) == (
        None,
        None,
    )
    async with sched:
        job_id = sched.submit(Noop(), result_ttl=5, keep_result=False)
        job = sched.get(job_id)
        assert (job.result_ttl, job.keep_result) == (5.0, False)
        kept = sched.get(sched.submit(Noop()))
        assert (kept.result_ttl, kept.keep_result) == (None, True), "the job's own"
        # A function whose parameter is named like one is refused only when it is given.
        with pytest.raises(TypeError, match="parameter named 'result_ttl'"):
            sched.submit(with_result_ttl_parameter, result_ttl=5)
        fn_job = sched.submit(with_result_ttl_parameter, kwargs={"result_ttl": 2.0}, result_ttl=9)
        assert sched.get(fn_job).result_ttl == 9.0
        with pytest.raises(ValueError, match="result_ttl"):
            sched.submit(Noop(), result_ttl=float("nan"))
        with pytest.raises(ValueError, match="keep_result"):
            sched.submit(Noop(), keep_result=0)
    for bad in ({"result_ttl": -1}, {"retention": 0}, {"retention": "7d"}):
        with pytest.raises(ValueError):
            scheduler(None, **bad)


def test_build_job_and_job_files_take_the_result_options(codec: JobCodec) -> None:
    from jobsched import build_job
    from jobsched.jobfile import parse_jobfile

    job = build_job("noop", {}, plugins=codec.plugins, result_ttl=5, keep_result=False)
    assert (job.result_ttl, job.keep_result) == (5.0, False)
    assert codec.options(job, OFFSET)["result_ttl"] == 5.0
    with pytest.raises(JobSpecError, match="result_ttl must be a number of seconds"):
        build_job("noop", {}, plugins=codec.plugins, result_ttl="soon")
    with pytest.raises(JobSpecError, match=r"options: name, .*result_ttl, keep_result"):
        build_job("noop", {}, plugins=codec.plugins, result_tll=5)
    parsed = parse_jobfile(
        '[[job]]\nid = "a"\ntype = "noop"\nresult_ttl = "1h"\nkeep_result = false\n',
        source="t.toml",
        plugins=codec.plugins,
    )
    options = parsed.jobs[0].job_options(0.0)
    assert (options["result_ttl"], options["keep_result"]) == (3600.0, False)
    built = build_job("noop", {}, plugins=codec.plugins, **options)
    assert (built.result_ttl, built.keep_result) == (3600.0, False)


# ── building the same stored description again (a shared store's claims) ──
@attrs.define(slots=True, eq=False, repr=False)
class Counted(AsyncJob):
    """Counts its constructions; `items` may be a list."""

    count: int = 0
    items: Any = None
    built = 0

    def __attrs_post_init__(self) -> None:
        type(self).built += 1

    async def run(self) -> None:
        return None


@attrs.define(slots=True, eq=False, repr=False)
class CountedToo(Counted):
    """The same arguments, another class (a job type registered anew)."""


def counted_plugin(cls: type) -> object:
    class plugin:
        @staticmethod
        @hookimpl
        def jobsched_register_job_types(register: Callable[[str, Any], None]) -> None:
            register("counted", cls)

    return plugin


def test_a_description_built_again_is_a_new_job_from_the_types_constructor() -> None:
    codec = JobCodec(PluginManager([counted_plugin(Counted)], autoload=False))
    before = Counted.built
    first = codec.build("counted", {"count": 2}, {"name": "a"}, OFFSET, "job 1")
    second = codec.build("counted", {"count": 2}, {"name": "b"}, OFFSET, "job 2")
    assert Counted.built - before == 2
    assert first is not second
    assert (first.count, first.name, second.count, second.name) == (2, "a", 2, "b")
    second.count = 5  # one job's state is its own
    assert first.count == 2
    assert described(codec, first)[:2] == ("counted", {"count": 2, "items": None})
    # Arguments that are lists or tables are never shared between two jobs.
    one = codec.build("counted", {"items": [1, 2]}, {}, OFFSET, "job 3")
    two = codec.build("counted", {"items": [1, 2]}, {}, OFFSET, "job 4")
    assert one.items == two.items == [1, 2] and one.items is not two.items


@pytest.mark.parametrize("first", [1, 1.0, True])
@pytest.mark.parametrize("then", [1, 1.0, True, "1"])
def test_equal_python_values_of_other_json_types_are_checked_on_their_own(
    first: Any, then: Any
) -> None:
    plugins = PluginManager([counted_plugin(Counted)], autoload=False)

    def build(codec: JobCodec, value: Any) -> tuple[str, Any]:
        try:
            job = codec.build("counted", {"count": value}, {}, OFFSET, "job 9")
        except JobSpecError as exc:
            return "refused", str(exc)
        return "built", (type(job.count), job.count)

    codec = JobCodec(plugins)
    build(codec, first)
    # The same codec answers as a codec that never saw `first` (1 == 1.0 == True).
    assert build(codec, then) == build(JobCodec(plugins), then)


def test_a_job_type_registered_anew_is_built_with_its_new_class() -> None:
    plugins = PluginManager([], autoload=False)
    plugins.register(counted_plugin(Counted), name="counted")
    codec = JobCodec(plugins)
    assert type(codec.build("counted", {"count": 1}, {}, OFFSET, "job 1")) is Counted
    plugins.unregister("counted")
    plugins.register(counted_plugin(CountedToo), name="counted-again")
    assert type(codec.build("counted", {"count": 1}, {}, OFFSET, "job 2")) is CountedToo
    plugins.unregister("counted-again")
    with pytest.raises(JobSpecError, match="job 3: unknown job type 'counted'"):
        codec.build("counted", {"count": 1}, {}, OFFSET, "job 3")
