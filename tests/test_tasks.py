"""``@jobsched.task``: a plain call, ``.job()`` checked against the signature and
kept as JSON, the task as a registered job type (CLI, job files, stores), in
this process and in ``jobsched worker --import`` processes on SQLite and
PostgreSQL; and mypy rejecting ``.job()`` arguments of the wrong type."""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import pathlib
import pickle
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import jobsched
from jobsched import (
    Client,
    JobPriority,
    JobScheduler,
    JobSpec,
    JobSpecError,
    JobStatus,
    SchedulerError,
    TaskJob,
    build_job,
    job_spec,
    job_type_info,
    task,
)
from jobsched.jobfile import load_jobfile, run_jobfile
from task_examples import Color, add, paint, pid_in_child, pid_of, send_email
from typing_support import mypy_errors
from worker_support import Worker, shared_store

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


# ── a plain call, a job ────────────────────────────────────────────────
def test_calling_a_task_calls_the_function() -> None:
    assert add(2, 0.5) == 2.5
    assert asyncio.run(send_email("a@b.c", subject="hi")) == "sent 'hi' to a@b.c"
    assert send_email.__doc__ == "Send an email (pretend)."
    assert send_email.__name__ == "send_email"


def test_a_task_is_named_by_module_and_qualname_unless_named() -> None:
    assert send_email.name == "task_examples.send_email"
    assert add.name == "examples.add"
    assert repr(add) == "<task examples.add>"


async def test_a_task_job_runs_in_a_scheduler() -> None:
    async with JobScheduler() as scheduler:
        email = scheduler.submit(send_email.job("a@b.c"))
        total = scheduler.submit(add.job(1, b=2))
        await scheduler.join()
    assert scheduler.get(email).result == "sent 'hello' to a@b.c"
    assert scheduler.get(total).result == 3.0  # b: float, so 2 became 2.0
    assert scheduler.get(total).status is JobStatus.COMPLETED


def test_a_job_keeps_its_arguments_as_json_and_the_task_options() -> None:
    job = add.job(1, 2)
    assert isinstance(job, TaskJob) and type(job).task is add
    assert job.arguments == {"a": 1, "b": 2.0}
    assert (job.name, job.priority, job.timeout, job.model) == (
        "examples.add",
        JobPriority.HIGH,
        5,
        "thread",
    )
    assert job_spec(job) == JobSpec(
        type="examples.add", args={"a": 1, "b": 2}, options={"priority": "high", "timeout": 5}
    )
    assert send_email.job("x").model == "async"


def test_enums_paths_and_tuples_are_kept_as_their_json_form() -> None:
    job = paint.job(Color.BLUE, pathlib.Path("/tmp/x"), (1, 2))
    spec = job_spec(job)
    assert spec is not None
    assert spec.args == {"color": "blue", "where": "/tmp/x", "sizes": [1, 2]}
    assert job.run_sync() == ["BLUE", "/tmp/x", [1, 2], "tuple"]
    # The same job, built back from its data as a store or a job file does.
    again = build_job(spec.type, spec.args)
    assert again.run_sync() == job.run_sync()  # type: ignore[attr-defined]


def test_options_give_one_job_other_options() -> None:
    job = add.options(priority="low", timeout=False, name="one-off", retry_on=["OSError"]).job(1)
    assert (job.name, job.priority, job.timeout, job.retry_on) == (
        "one-off",
        JobPriority.LOW,
        None,
        ("OSError",),
    )
    assert add.job(1).priority is JobPriority.HIGH  # the task's own are unchanged
    stacked = add.options(priority="low").options(timeout=7).job(1)
    assert (stacked.priority, stacked.timeout) == (JobPriority.LOW, 7)


def test_a_job_pickles_by_its_tasks_module_and_name() -> None:
    job = paint.job(Color.RED, pathlib.Path("p"), (3,))
    again = pickle.loads(pickle.dumps(job))
    assert type(again) is type(job)
    assert (again.job_id, again.arguments) == (job.job_id, job.arguments)
    assert pickle.loads(pickle.dumps(paint)) is paint


@pytest.mark.parametrize("runs_elsewhere", [pid_of, pid_in_child])
async def test_process_and_subprocess_tasks_run_in_another_process(runs_elsewhere: Any) -> None:
    async with JobScheduler() as scheduler:
        job_id = scheduler.submit(runs_elsewhere.job("p"))
        await scheduler.join()
    job = scheduler.get(job_id)
    assert job.status is JobStatus.COMPLETED, job.last_error
    tag, pid = job.result
    assert tag == "p" and pid != os.getpid()


async def test_task_jobs_count_against_limits_by_the_task_name() -> None:
    assert jobsched.job_type_of(add.job(1)) == "examples.add"
    async with JobScheduler(limits={"job_types": {"examples.add": 1}}) as scheduler:
        ids = [scheduler.submit(add.job(n)) for n in range(3)]
        await scheduler.join()
    assert [scheduler.get(i).result for i in ids] == [0.5, 1.5, 2.5]
    assert scheduler.peak_running == 1


# ── bad arguments at .job() ────────────────────────────────────────────
@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: send_email.job(1), "argument 'to' must be str, got integer 1"),
        (lambda: add.job("1"), "argument 'a' must be int, got string '1'"),
        (lambda: add.job(), "missing a required argument: 'a'"),
        (lambda: add.job(1, 2, 3), "too many positional arguments"),
        (lambda: add.job(1, c=3), "got an unexpected keyword argument 'c'"),
        (lambda: paint.job("green", "p", [1]), 'argument \'color\' must be "red" or "blue"'),
    ],
)
def test_arguments_that_do_not_fit_are_refused_at_job(call: Any, message: str) -> None:
    with pytest.raises(JobSpecError, match=r"\.job\(\): ") as caught:
        call()
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (datetime.date(2026, 1, 1), "argument 'to' is date datetime.date(2026, 1, 1), not a JSON"),
        (float("nan"), "argument 'to' is float nan, not a JSON"),
        ({1: "x"}, "argument 'to' is dict {1: 'x'}, not a JSON"),
    ],
)
def test_arguments_that_are_not_json_are_refused_at_job(value: Any, shown: str) -> None:
    # Refused even for an in-memory scheduler: a task's jobs run the same anywhere.
    with pytest.raises(JobSpecError) as caught:
        send_email.job(value)
    assert str(caught.value).startswith(f"task_examples.send_email.job(): {shown} value")


# ── bad tasks ──────────────────────────────────────────────────────────
def _define(source: str) -> None:
    exec(textwrap.dedent(source), {"task": task, "__name__": "bad_tasks"})


@pytest.mark.parametrize(
    ("source", "error", "message"),
    [
        (
            "@task\ndef f(*items: int) -> None: ...",
            TypeError,
            "@task on bad_tasks.f: parameter *items cannot be a job argument",
        ),
        (
            "@task\ndef f(**kw: int) -> None: ...",
            TypeError,
            "parameter **kw cannot be a job argument",
        ),
        ("@task\ndef f(a: int, /) -> None: ...", TypeError, "parameter a, / cannot be"),
        (
            "@task\ndef f(url: str, timeout: float) -> None: ...",
            TypeError,
            "parameter 'timeout' is named like a job option",
        ),
        (
            "@task(model='thread')\nasync def f() -> None: ...",
            ValueError,
            "a coroutine function runs on the event loop, not on the thread executor",
        ),
        (
            "@task(model='async')\ndef f() -> None: ...",
            ValueError,
            "not a coroutine function: use model='thread' or 'process'",
        ),
        (
            "def outer():\n    @task(model='process')\n    def f() -> None: ...\nouter()",
            ValueError,
            "model='process' needs a module-level function",
        ),
        ("@task(name='')\ndef f() -> None: ...", ValueError, "name must be a non-empty string"),
        ("@task(timeout=-1)\ndef f() -> None: ...", ValueError, "timeout must be a positive"),
        (
            "@task(retry_on=['TimeoutErorr'])\ndef f() -> None: ...",
            ValueError,
            "retry_on: unknown exception class 'TimeoutErorr'; did you mean 'TimeoutError'",
        ),
        ("task(42)", TypeError, "@task decorates a function, got 42"),
    ],
)
def test_a_task_that_cannot_be_a_job_type_is_refused_when_defined(
    source: str, error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as caught:
        _define(source)
    assert message in str(caught.value)


def test_bad_options_for_one_job_are_refused() -> None:
    with pytest.raises(ValueError, match=r"examples\.add\.options\(\): priority must be one of"):
        add.options(priority="urgent")
    with pytest.raises(TypeError, match=r"retry_on: 42 is neither an exception class nor"):
        add.options(retry_on=[42])


def test_two_functions_cannot_share_a_task_name() -> None:
    with pytest.raises(SchedulerError) as caught:
        _define("@task(name='examples.add')\ndef other() -> None: ...")
    assert str(caught.value) == (
        "@task on bad_tasks.other: the name 'examples.add' is taken by the task "
        "task_examples.add; give one of them another name="
    )
    assert job_type_info("examples.add").factory.task is add  # the first one stays


def test_defining_a_task_again_replaces_it() -> None:
    source = "@task(name='tests.again')\ndef again(n: int) -> int:\n    return n"
    _define(source)
    _define(source.replace("return n", "return -n"))
    job = build_job("tests.again", {"n": 2})
    assert job.run_sync() == -2  # type: ignore[attr-defined]


# ── a registered job type ──────────────────────────────────────────────
def test_a_task_is_a_registered_job_type_in_every_plugin_manager() -> None:
    info = job_type_info("task_examples.send_email")
    assert info.to_json() == {
        "name": "task_examples.send_email",
        "plugin": "task_examples",
        "class": "task_examples.send_email",
        "model": "async",
        "summary": "Send an email (pretend).",
        "doc": "Send an email (pretend).",
        "arguments": [
            {"name": "to", "type": "str", "required": True, "default": None},
            {"name": "subject", "type": "str", "required": False, "default": "hello"},
        ],
    }
    # A plugin manager made before or after the task was defined sees it.
    isolated = jobsched.load_plugins(autoload=False)
    assert "examples.add" in isolated.names("job_types")


def jobsched_cli(*args: str, cwd: Path = TESTS) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jobsched", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )


@pytest.mark.slow
def test_jobs_list_and_show_see_the_tasks_of_an_imported_module() -> None:
    listed = jobsched_cli("jobs", "list", "--json", "--import", "task_examples")
    assert listed.returncode == 0, listed.stderr
    names = {row["name"]: row for row in json.loads(listed.stdout)}
    assert names["examples.add"]["plugin"] == "task_examples"
    assert names["task_examples.pid_of"]["model"] == "process"
    shown = jobsched_cli("jobs", "show", "examples.add", "--import", "task_examples")
    assert shown.returncode == 0, shown.stderr
    assert "class   task_examples.add" in shown.stdout
    assert [line.split() for line in shown.stdout.splitlines()[-2:]] == [
        ["a", "int", "(required)"],
        ["b", "float", "0.5"],
    ]
    # Without --import the module is not there.
    missing = jobsched_cli("jobs", "show", "examples.add")
    assert missing.returncode == 2
    assert "unknown job type 'examples.add'" in missing.stderr


@pytest.mark.slow
def test_a_module_of_tasks_that_is_an_entry_point_needs_no_import(tmp_path: Path) -> None:
    # A real distribution on the path whose `jobsched` entry point names the module.
    site = tmp_path / "site"
    (site / "shop").mkdir(parents=True)
    (site / "shop" / "__init__.py").write_text("")
    (site / "shop" / "tasks.py").write_text(
        "from jobsched import task\n\n\n"
        "@task\ndef restock(sku: str, count: int = 1) -> str:\n"
        "    return f'{count} x {sku}'\n"
    )
    info = site / "shop-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: shop\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[jobsched]\nshop = shop.tasks\n")
    (info / "RECORD").write_text("")
    done = subprocess.run(
        [sys.executable, "-m", "jobsched", "jobs", "show", "shop.tasks.restock", "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(site)},
    )
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert (shown["plugin"], [a["name"] for a in shown["arguments"]]) == (
        "shop.tasks",
        ["sku", "count"],
    )


@pytest.mark.slow
def test_an_import_that_fails_is_bad_input_naming_the_module() -> None:
    done = jobsched_cli("jobs", "list", "--import", "no_such_tasks")
    assert done.returncode == 2
    assert done.stderr == (
        "jobsched: error: --import no_such_tasks: ModuleNotFoundError: "
        "No module named 'no_such_tasks'\n"
    )


JOBFILE = """\
[[job]]
id = "sum"
type = "examples.add"
args = { a = 2, b = 0.25 }

[[job]]
id = "mail"
type = "task_examples.send_email"
args = { to = "a@b.c" }
depends_on = ["sum"]
"""


async def test_a_job_file_names_a_task_by_its_name(tmp_path: Path) -> None:
    path = tmp_path / "jobs.toml"
    path.write_text(JOBFILE)
    result = await run_jobfile(load_jobfile(path, plugins=jobsched.default_plugin_manager()))
    assert {o.id: (o.status, o.result) for o in result.outcomes} == {
        "sum": (JobStatus.COMPLETED, 2.25),
        "mail": (JobStatus.COMPLETED, "sent 'hello' to a@b.c"),
    }


def test_a_job_file_with_bad_task_arguments_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "jobs.toml"
    path.write_text(JOBFILE.replace("a = 2,", 'a = "2",'))
    with pytest.raises(jobsched.jobfile.JobFileError) as caught:
        load_jobfile(path, plugins=jobsched.default_plugin_manager())
    assert "jobs.toml:4: job 'sum' (examples.add): argument 'a' must be int, got string '2'" in str(
        caught.value
    )


@pytest.mark.slow
def test_jobsched_run_imports_the_tasks_of_a_job_file(tmp_path: Path) -> None:
    path = tmp_path / "jobs.toml"
    path.write_text(JOBFILE)
    done = jobsched_cli("run", str(path), "--json", "--import", "task_examples")
    assert done.returncode == 0, done.stderr
    outcomes = {o["id"]: o["result"] for o in json.loads(done.stdout)["jobs"]}
    assert outcomes == {"sum": 2.25, "mail": "sent 'hello' to a@b.c"}


# ── across processes: a client submits, a worker that imported the tasks runs ─
@pytest.fixture(params=["postgresql", "sqlite"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return shared_store(request, tmp_path)


class TaskWorker(Worker):
    """``jobsched worker --store URL --import task_examples``."""

    def __init__(self, url: str) -> None:
        super().__init__(url, "--import", "task_examples")


@pytest.fixture
def task_worker(store_url: str) -> Iterator[str]:
    worker = TaskWorker(store_url)
    try:
        yield store_url
    finally:
        worker.stop()


@pytest.mark.slow
async def test_a_worker_process_runs_task_jobs_a_client_submitted(task_worker: str) -> None:
    async with Client(task_worker) as client:
        email = await client.submit(send_email.job("a@b.c", subject="hi"))
        total = await client.submit(add.job(2))
        painted = await client.submit(paint.job(Color.RED, pathlib.Path("/x"), (1, 2)))
        infos = [await client.wait(job_id, timeout=60) for job_id in (email, total, painted)]
    assert [(i.status, i.result) for i in infos] == [
        (JobStatus.COMPLETED, "sent 'hi' to a@b.c"),
        (JobStatus.COMPLETED, 2.5),
        (JobStatus.COMPLETED, ["RED", "/x", [1, 2], "tuple"]),
    ]
    assert (infos[1].type, dict(infos[1].args), infos[1].priority) == (
        "examples.add",
        {"a": 2},
        JobPriority.HIGH,
    )


@pytest.mark.slow
async def test_a_task_worker_runs_process_tasks(task_worker: str) -> None:
    async with Client(task_worker) as client:
        info = await client.wait(await client.submit(pid_of.job("w")), timeout=60)
    assert info.status is JobStatus.COMPLETED, info.last_error
    assert info.result[0] == "w" and info.result[1] != os.getpid()


@pytest.mark.slow
async def test_a_task_waits_for_a_worker_that_knows_it(store_url: str) -> None:
    # A worker without the task's module claims only the types it knows.
    worker = Worker(store_url)
    try:
        async with Client(store_url) as client:
            total = await client.submit(add.job(1))
            other = await client.submit(jobsched.build_job("sleep", {"name": "s", "seconds": 0}))
            ran = await client.wait(other, timeout=60)
            waiting = await client.get(total)
    finally:
        worker.stop()
    assert ran.status is JobStatus.COMPLETED
    # Never claimed: not failed, no attempt counted, nothing refused.
    assert (waiting.status, waiting.attempts, waiting.build_refusals) == (JobStatus.PENDING, 0, 0)
    # A worker that imports the task runs it as soon as it starts.
    knowing = TaskWorker(store_url)
    try:
        async with Client(store_url) as client:
            info = await client.wait(total, timeout=60)
    finally:
        knowing.stop()
    assert (info.status, info.result, info.attempts) == (JobStatus.COMPLETED, 1.5, 1)


async def test_a_durable_scheduler_keeps_task_jobs_as_data(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    async with JobScheduler(store=url) as scheduler:
        job_id = scheduler.submit(add.job(4), key="four")
        await scheduler.join()
    # Another scheduler on the same store knows the finished job by its key.
    async with JobScheduler(store=url) as again:
        assert again.lookup("four") == job_id
        assert again.get(job_id).result == 4.5


# ── typed: mypy checks .job() against the function's signature ─────────
MYPY_SNIPPET = """\
from jobsched import task


@task
async def send_email(to: str, subject: str) -> str:
    return to


@task(timeout=30, retry_on=[TimeoutError])
def add(a: int, b: float = 0.5) -> float:
    return a + b


send_email.job("a@b.c", "hi")
add.options(priority="high").job(1)
total: float = add(1, 2.0)
send_email.job(1, "hi")
add.options(priority="low").job("x")
add.job(1, c=2)
"""


@pytest.mark.slow
def test_mypy_rejects_job_arguments_of_the_wrong_type(tmp_path: Path) -> None:
    errors, output = mypy_errors(tmp_path, MYPY_SNIPPET)
    assert [line.split(":")[1] for line in errors] == ["17", "18", "19"], output
    assert 'Argument 1 to "job" of "Task" has incompatible type "int"; expected "str"' in errors[0]
    assert 'Argument 1 to "job" of "TaskCall" has incompatible type "str"' in errors[1]
    assert 'Unexpected keyword argument "c" for "job" of "Task"' in errors[2]
