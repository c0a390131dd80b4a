"""Job types as data: describing, building and re-describing jobs."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any, Literal

import attrs
import pytest

from jobsched import (
    AsyncJob,
    CpuBoundJob,
    FunctionJob,
    Job,
    JobPriority,
    JobScheduler,
    JobSpec,
    JobSpecError,
    JobStatus,
    PluginManager,
    RetryPolicy,
    build_job,
    describe_job_type,
    hookimpl,
    job_spec,
    job_type_info,
    job_types,
)
from jobsched_contrib import CsvExportJob, EmailJob, SleepJob


@attrs.define
class ResizeJob(AsyncJob):
    """Resize an image.

    The long description.
    """

    path: str
    width: int = 100
    scale: float = 1.0
    tags: list[str] = attrs.Factory(list)
    mode: Literal["fit", "fill"] = "fit"
    priority_hint: JobPriority | None = None
    out: Path | None = None

    async def run(self) -> tuple[str, int]:
        return (self.path, self.width)


@attrs.define(kw_only=True)
class SquareJob(CpuBoundJob):
    """Squares a number in a worker process."""

    n: int

    def run_sync(self) -> int:
        return self.n * self.n + self.attempts * 0


@attrs.define
class NamedJob(AsyncJob):
    """A job type with an argument called `name`."""

    name: str
    loud: bool = False

    async def run(self) -> str:
        return self.name.upper() if self.loud else self.name


class Types:
    """A plugin registering the test job types."""

    @hookimpl
    def jobsched_register_job_types(self, register: Any) -> None:
        register("resize", ResizeJob)
        register("square", SquareJob)
        register("named", NamedJob)


@pytest.fixture
def plugins() -> PluginManager:
    return PluginManager([Types()], autoload=False)


# ── attrs job types are real jobs ──────────────────────────────────────
def test_an_attrs_job_type_takes_its_fields_and_the_job_options() -> None:
    retry = RetryPolicy(max_retries=1)
    job = ResizeJob(
        "a.png", 300, name="thumb", priority=JobPriority.HIGH, timeout=5, retry=retry, deadline=9
    )
    assert (job.path, job.width, job.tags) == ("a.png", 300, [])
    assert job.name == "thumb"
    assert job.priority is JobPriority.HIGH
    assert (job.timeout, job.retry, job.deadline) == (5, retry, 9)
    assert job.status is JobStatus.PENDING
    assert job.attempts == 0
    assert job.job_id.startswith("job-")
    assert ResizeJob("b.png").name == "ResizeJob"
    assert repr(job) == f"ResizeJob({job.job_id}, 'thumb', pending)"


def test_attrs_job_types_keep_identity_equality_and_are_hashable() -> None:
    a, b = ResizeJob("a.png"), ResizeJob("a.png")
    assert a != b
    assert a == a
    assert len({a, b}) == 2


def test_an_attrs_job_type_pickles_with_its_execution_state() -> None:
    job = SquareJob(n=7, priority=JobPriority.LOW)
    job.attempts = 2
    copy = pickle.loads(pickle.dumps(job))
    assert (copy.n, copy.job_id, copy.attempts, copy.priority) == (
        7,
        job.job_id,
        2,
        JobPriority.LOW,
    )
    assert copy.status is JobStatus.PENDING


def test_a_field_named_name_is_the_job_name() -> None:
    job = NamedJob("hello")
    assert job.name == "hello"
    assert NamedJob("x", loud=True, priority=JobPriority.LOW).priority is JobPriority.LOW


async def test_attrs_jobs_run_on_every_model(plugins: PluginManager) -> None:
    scheduler = JobScheduler(num_workers=2, plugins=plugins)
    resize = scheduler.submit(ResizeJob("a.png", 20))
    square = scheduler.submit(SquareJob(n=12))
    async with scheduler:
        await scheduler.join()
    assert scheduler.get(resize).result == ("a.png", 20)
    assert scheduler.get(square).result == 144


def test_frozen_and_shadowing_attrs_job_types_are_refused() -> None:
    with pytest.raises(TypeError, match="cannot be frozen"):

        @attrs.frozen
        class Frozen(AsyncJob):
            x: int

            async def run(self) -> None:
                pass

    with pytest.raises(TypeError, match=r"fields \['attempts', 'status'\] shadow Job attributes"):

        @attrs.define
        class Shadow(AsyncJob):
            status: int
            attempts: int

            async def run(self) -> None:
                pass


def test_a_non_slotted_attrs_job_type_is_adapted_when_built(plugins: PluginManager) -> None:
    @attrs.define(slots=False)
    class Loose(AsyncJob):
        """Not slotted: attrs patches the class after it is created."""

        x: int

        async def run(self) -> int:
            return self.x

    job = build_job(JobSpec(type="loose", args={"x": 3}), plugins=_with(plugins, "loose", Loose))
    assert (job.x, job.status, job.name) == (3, JobStatus.PENDING, "Loose")  # type: ignore[attr-defined]


def _with(plugins: PluginManager, name: str, factory: Any) -> PluginManager:
    class Extra:
        @hookimpl
        def jobsched_register_job_types(self, register: Any) -> None:
            register(name, factory)

    plugins.register(Extra(), name=f"extra-{name}")
    return plugins


# ── describing ─────────────────────────────────────────────────────────
def test_describe_an_attrs_job_type() -> None:
    info = describe_job_type(ResizeJob, "resize", "mine")
    assert (info.name, info.plugin, info.model) == ("resize", "mine", "async")
    assert info.summary == "Resize an image."
    assert info.qualname == "tests.test_jobtypes.ResizeJob" or info.qualname.endswith(
        "test_jobtypes.ResizeJob"
    )
    assert [(a.name, a.type, a.required) for a in info.arguments] == [
        ("path", "str", True),
        ("width", "int", False),
        ("scale", "float", False),
        ("tags", "list of str", False),
        ("mode", '"fit" or "fill"', False),
        ("priority_hint", '"low" or "medium" or "high" or "critical" or None', False),
        ("out", "path (str) or None", False),
    ]
    assert info.to_json()["arguments"][3] == {
        "name": "tags",
        "type": "list of str",
        "required": False,
        "default": "list()",
    }


def test_describe_a_reference_style_job_type() -> None:
    info = describe_job_type(EmailJob, "email")
    assert [(a.name, a.type, a.default) for a in info.arguments[2:]] == [("latency", "float", 0.05)]
    assert [a.name for a in info.arguments] == ["to", "subject", "latency"]
    assert info.accepts_options


def test_job_types_lists_the_registered_ones(plugins: PluginManager) -> None:
    names = [t.name for t in job_types(plugins)]
    assert names == sorted(names)
    assert {"named", "resize", "square", "email"} <= set(names)
    assert job_type_info("resize", plugins).plugin is not None
    with pytest.raises(JobSpecError, match="unknown job type 'resise'; did you mean 'resize'"):
        job_type_info("resise", plugins)
    every = {t.name for t in job_types()}
    assert {"email", "flaky-upload", "sleep", "csv-export", "prime-count"} <= every


# ── building from data, with validation ───────────────────────────────
def test_build_converts_json_values(plugins: PluginManager) -> None:
    job = build_job(
        "resize",
        {
            "path": "a.png",
            "scale": 2,
            "tags": ["x"],
            "mode": "fill",
            "priority_hint": "high",
            "out": "/tmp/o.png",
        },
        plugins=plugins,
        priority="critical",
        timeout=None,
        retry={"policy": "fixed", "seconds": 0.5},
        name="thumbs",
    )
    assert isinstance(job, ResizeJob)
    assert job.scale == 2.0 and isinstance(job.scale, float)
    assert job.priority_hint is JobPriority.HIGH
    assert job.out == Path("/tmp/o.png")
    assert job.priority is JobPriority.CRITICAL
    assert job.timeout is None
    assert job.retry.max_retries == 3 and job.retry.delay(1, None) == 0.5  # type: ignore[arg-type]
    assert job.name == "thumbs"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, "job 'x' (resize): missing required argument 'path' (str)"),
        ({"path": 1}, "job 'x' (resize): argument 'path' must be str, got integer 1"),
        ({"path": "p", "width": 2.5}, "argument 'width' must be int, got float 2.5"),
        ({"path": "p", "width": True}, "argument 'width' must be int, got boolean true"),
        ({"path": "p", "tags": "a"}, "argument 'tags' must be list of str, got string 'a'"),
        ({"path": "p", "tags": [1]}, "argument 'tags' must be list of str, got array [1]"),
        ({"path": "p", "mode": "crop"}, 'argument \'mode\' must be "fit" or "fill"'),
        ({"path": "p", "widht": 3}, "unknown argument 'widht'; did you mean 'width'?"),
        ({"path": "p", "retry": 3}, "'retry' is an option: set it beside 'args'"),
    ],
)
def test_build_names_the_job_the_argument_and_what_was_expected(
    plugins: PluginManager, args: dict[str, Any], message: str
) -> None:
    with pytest.raises(JobSpecError) as info:
        build_job("resize", args, plugins=plugins, label="job 'x'")
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"priority": "urgent"}, "job 'x': priority must be one of low, medium, high, critical"),
        ({"timeout": -1}, "job 'x': timeout must be a positive number of seconds"),
        ({"timeout": "5"}, "timeout must be a positive number of seconds, got string '5'"),
        ({"retry": {"policy": "linear"}}, "retry: unknown retry policy 'linear'"),
        ({"retry": {"max_retrys": 1}}, "has no option 'max_retrys'; did you mean 'max_retries'"),
        ({"retry": {"max_retries": -1}}, "retry policy 'exponential': max_retries must be >= 0"),
        ({"retry": 3}, "retry must be a table like"),
        ({"deadline": "soon"}, "deadline must be a number"),
        ({"name": ""}, "name must be a non-empty string"),
        ({"delay": 1}, "unknown option 'delay'"),
    ],
)
def test_build_checks_the_options(
    plugins: PluginManager, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(JobSpecError) as info:
        build_job("resize", {"path": "p"}, plugins=plugins, label="job 'x'", **options)
    assert message in str(info.value)


def test_build_reports_what_the_constructor_raises() -> None:
    @attrs.define
    class Positive(AsyncJob):
        n: int = attrs.field(validator=attrs.validators.gt(0))

        async def run(self) -> None:
            pass

    plugins = _with(PluginManager([], autoload=False), "positive", Positive)
    with pytest.raises(JobSpecError, match=r"job 'p' \(positive\): ValueError: 'n' must be > 0"):
        build_job("positive", {"n": 0}, plugins=plugins, label="job 'p'")


def test_build_reference_style_jobs() -> None:
    job = build_job("email", {"to": "a@corp", "subject": "s"}, priority="high", timeout=2)
    assert isinstance(job, EmailJob)
    assert (job.to, job.latency, job.name) == ("a@corp", 0.05, "email a@corp: s")
    assert (job.priority, job.timeout) == (JobPriority.HIGH, 2.0)
    sleep = build_job("sleep", {"name": "nap", "seconds": 1})
    assert isinstance(sleep, SleepJob) and sleep.name == "nap" and sleep.seconds == 1.0


def test_a_type_without_kw_cannot_take_options() -> None:
    class Strict(AsyncJob):
        """Its __init__ has no **kw: options cannot reach Job."""

        def __init__(self, n: int) -> None:
            super().__init__(f"strict {n}")
            self.n = n

        async def run(self) -> int:
            return self.n

    plugins = _with(PluginManager([], autoload=False), "strict", Strict)
    assert build_job("strict", {"n": 1}, plugins=plugins).name == "strict 1"
    with pytest.raises(JobSpecError, match=r"does not take the options \['priority'\]"):
        build_job("strict", {"n": 1}, plugins=plugins, priority="high")


# ── and back to data ───────────────────────────────────────────────────
def test_job_spec_round_trips_through_json(plugins: PluginManager) -> None:
    job = build_job(
        "resize",
        {"path": "a.png", "scale": 2, "out": "/tmp/x"},
        plugins=plugins,
        priority=3,
        retry="none",
    )
    spec = job_spec(job, plugins)
    assert spec == JobSpec(
        type="resize",
        args={"path": "a.png", "scale": 2, "out": "/tmp/x"},
        options={"priority": "critical", "retry": {"policy": "none"}},
    )
    again = build_job(JobSpec.from_json(spec.to_json()), plugins=plugins)
    assert isinstance(again, ResizeJob)
    assert (again.path, again.scale, again.out, again.priority) == (
        "a.png",
        2.0,
        Path("/tmp/x"),
        JobPriority.CRITICAL,
    )
    assert again.job_id != job.job_id
    assert job_spec(again, plugins) == spec


def test_job_spec_of_a_reference_style_job_built_from_data() -> None:
    job = build_job("csv-export", {"table": "t"}, retry={"max_retries": 1})
    assert job_spec(job) == JobSpec(
        type="csv-export",
        args={"table": "t"},
        options={"retry": {"policy": "exponential", "max_retries": 1}},
    )


def test_job_spec_of_an_attrs_job_built_by_hand(plugins: PluginManager) -> None:
    job = ResizeJob("a.png", 5, priority=JobPriority.LOW, timeout=3)
    spec = job_spec(job, plugins)
    assert spec is not None
    assert spec.type == "resize"
    assert spec.args["path"] == "a.png" and spec.args["width"] == 5
    assert spec.options["priority"] == "low"
    assert spec.options["timeout"] == 3
    assert spec.options["retry"] == {
        "policy": "exponential",
        "max_retries": 3,
        "base_delay": 1.0,
        "max_delay": 60.0,
        "jitter": True,
    }
    rebuilt = build_job(spec, plugins=plugins)
    assert isinstance(rebuilt, ResizeJob) and rebuilt.width == 5


def test_job_spec_is_none_when_the_arguments_are_unknown(plugins: PluginManager) -> None:
    assert job_spec(CsvExportJob("t")) is None  # built by hand: args not recorded
    assert job_spec(FunctionJob(len, "x")) is None
    assert job_spec(ResizeJob("a", retry=_Odd()), plugins) is None  # retry not a registered policy


class _Odd:
    max_retries = 0

    def delay(self, attempt: int, rng: object) -> float:
        return 0.0


def test_job_spec_from_json_rejects_malformed_data() -> None:
    with pytest.raises(JobSpecError, match="needs a string 'type'"):
        JobSpec.from_json({"args": {}})
    with pytest.raises(JobSpecError, match="unknown keys"):
        JobSpec.from_json({"type": "x", "extra": 1})
    with pytest.raises(JobSpecError, match="must be objects"):
        JobSpec.from_json({"type": "x", "args": []})


def test_function_jobs_still_work() -> None:
    job = FunctionJob(max, 1, 2, name="m")
    assert isinstance(job, Job) and job.run_sync() == 2
