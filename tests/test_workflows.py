"""``jobsched.chain``, ``group`` and ``chord``: the edges they build, one
call to submit them (a scheduler, ``LocalClient``, ``Client``,
``BlockingClient``), the chord's list of results in member order, in one
process and across processes (SQLite, PostgreSQL); and their bad input."""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from flow_support import FlowWorker
from flow_tasks import add_all, count, echo, extract, fail, total
from jobsched import (
    BlockingClient,
    Chain,
    Chord,
    Client,
    Group,
    Job,
    JobScheduler,
    JobStatus,
    LocalClient,
    PluginManager,
    SchedulerError,
    chain,
    chord,
    group,
    result_of,
)
from jobsched.jobfile import JobFileError, parse_jobfile, run_jobfile


def started_in_order(scheduler: JobScheduler) -> list[str]:
    """The ids of the jobs as their attempts start (a listener)."""
    order: list[str] = []

    def on_transition(job: Job, old: JobStatus, new: JobStatus) -> None:
        if new is JobStatus.RUNNING:
            order.append(job.job_id)

    scheduler.add_listener(on_transition)
    return order


# ── the edges ──────────────────────────────────────────────────────────
async def test_a_chain_runs_each_step_after_the_previous_completed() -> None:
    async with JobScheduler(num_workers=4) as scheduler:
        order = started_in_order(scheduler)
        a, b, c = count.job(1), count.job(2), count.job(3)
        last = scheduler.submit(chain(a, b, c))
        await scheduler.join()
    assert last == c.job_id
    assert order == [a.job_id, b.job_id, c.job_id]
    assert scheduler.kernel.graph.depends_on(b.job_id) == (a.job_id,)
    assert scheduler.kernel.graph.depends_on(c.job_id) == (b.job_id,)


async def test_a_failed_step_cancels_the_rest_of_the_chain() -> None:
    async with JobScheduler() as scheduler:
        a, b, c = fail.job("boom"), count.job(2), count.job(3)
        scheduler.submit(chain(a, b, c))
        await scheduler.join()
    assert [scheduler.get(j.job_id).status for j in (a, b, c)] == [
        JobStatus.FAILED,
        JobStatus.CANCELLED,
        JobStatus.CANCELLED,
    ]
    assert scheduler.get(c.job_id).last_error == f"upstream {b.job_id} cancelled"


async def test_a_group_in_a_chain_is_waited_for_as_a_whole() -> None:
    async with JobScheduler() as scheduler:
        first, x, y1, y2, after = (count.job(n) for n in range(5))
        ids = scheduler.submit_many([chain(first, group(x, chain(y1, y2)), after)])
        await scheduler.join()
    assert ids == [j.job_id for j in (first, x, y1, y2, after)]
    assert scheduler.kernel.graph.depends_on(x.job_id) == (first.job_id,)
    assert scheduler.kernel.graph.depends_on(y1.job_id) == (first.job_id,)
    assert scheduler.kernel.graph.depends_on(y2.job_id) == (y1.job_id,)
    # The step after the group waits for each of its branches' last jobs.
    assert set(scheduler.kernel.graph.depends_on(after.job_id)) == {x.job_id, y2.job_id}
    assert all(scheduler.get(i).status is JobStatus.COMPLETED for i in ids)


async def test_a_group_is_independent_and_returns_its_last_members_id() -> None:
    async with JobScheduler() as scheduler:
        a, b = count.job(1), fail.job("only me")
        assert scheduler.submit(group(a, b)) == b.job_id
        await scheduler.join()
    assert (
        scheduler.kernel.graph.depends_on(a.job_id)
        == scheduler.kernel.graph.depends_on(b.job_id)
        == ()
    )
    assert scheduler.get(a.job_id).status is JobStatus.COMPLETED


# ── chords: the callback gets the list of results ──────────────────────
async def test_a_chord_callback_receives_the_results_in_member_order() -> None:
    async with JobScheduler(num_workers=4) as scheduler:
        members = group(count.job(1), count.job(2), chain(count.job(3), count.job(4)))
        callback = scheduler.submit(chord(members, add_all))
        listed = scheduler.submit(chord([count.job(10), count.job(20)], echo))
        await scheduler.join()
    assert scheduler.get(callback).result == 1 + 2 + 4
    # A chain member gives its last step's result.
    assert scheduler.get(listed).result == [10, 20]


async def test_a_chord_callback_with_more_arguments_or_options() -> None:
    async with JobScheduler() as scheduler:
        partial = scheduler.submit(
            chord([count.job(1), count.job(2)], functools.partial(total, title="parts"))
        )
        with_options = chord([count.job(5)], add_all.options(priority="high", name="sum"))
        assert with_options.callback.name == "sum"
        optioned = scheduler.submit(with_options)
        await scheduler.join()
    assert scheduler.get(partial).result == "parts: 3"
    assert scheduler.get(optioned).result == 5


async def test_a_chord_callback_job_names_the_group_itself() -> None:
    async with JobScheduler() as scheduler:
        members = group(extract.job(1), extract.job(2))
        callback = echo.job({"rows": result_of(members)})
        last = scheduler.submit(chord(members, callback))
        await scheduler.join()
    assert last == callback.job_id
    assert scheduler.get(last).result == {"rows": [[0], [0, 1]]}


async def test_a_failed_member_cancels_the_chord_callback() -> None:
    async with JobScheduler() as scheduler:
        callback = scheduler.submit(chord([count.job(1), fail.job("boom")], add_all))
        await scheduler.join()
    assert scheduler.get(callback).status is JobStatus.CANCELLED


async def test_a_local_client_submits_workflows() -> None:
    async with JobScheduler() as scheduler, LocalClient(scheduler) as client:
        last = await client.submit(chord([count.job(2), count.job(3)], add_all))
        ids = await client.submit_many([chain(count.job(1), count.job(2)), count.job(9)])
        assert len(ids) == 3
        assert await client.result(last, timeout=60) == 5
        assert [(await client.result(i, timeout=60)) for i in ids] == [1, 2, 9]


async def test_submit_many_gives_every_id_of_a_workflow_subclass() -> None:
    class Steps(Chain):
        """A chain under another name: still a workflow to submit_many."""

    async with JobScheduler() as scheduler:
        a, b = count.job(1), count.job(2)
        ids = scheduler.submit_many([Steps((a, b))])
        await scheduler.join()
    assert ids == [a.job_id, b.job_id]
    assert scheduler.kernel.graph.depends_on(b.job_id) == (a.job_id,)


async def test_a_workflows_first_steps_wait_for_depends_on() -> None:
    async with JobScheduler() as scheduler:
        gate = scheduler.submit(count.job(0))
        a, b = count.job(1), count.job(2)
        scheduler.submit(group(a, b), depends_on=[gate])
        await scheduler.join()
    assert (
        scheduler.kernel.graph.depends_on(a.job_id)
        == scheduler.kernel.graph.depends_on(b.job_id)
        == (gate,)
    )


# ── across processes ───────────────────────────────────────────────────
@pytest.mark.slow
async def test_a_chord_runs_on_a_worker_process(flow_worker: str) -> None:
    async with Client(flow_worker) as client:
        members = group(count.job(1), count.job(2), chain(count.job(3), count.job(4)))
        last = await client.submit(chord(members, add_all))
        assert await client.result(last, timeout=60) == 7
        ids = await client.submit_many([chain(extract.job(3), count.job(5)), count.job(6)])
        assert len(ids) == 3
        assert [await client.result(i, timeout=60) for i in ids] == [[0, 1, 2], 5, 6]


@pytest.mark.slow
def test_a_blocking_client_submits_a_chord(flow_worker: str) -> None:
    with BlockingClient(flow_worker) as client:
        last = client.submit(chord([extract.job(2), extract.job(3)], echo))
        assert client.result(last, timeout=60) == [[0, 1], [0, 1, 2]]


@pytest.mark.slow
async def test_a_shared_scheduler_submits_a_chain(flow_worker: str) -> None:
    # A scheduler on the shared store submits; the worker process (and this
    # scheduler) run the jobs; the chain's edges are the store's.
    async with JobScheduler(store=flow_worker, shared=True) as scheduler:
        a = extract.job(4)
        b = total.job(result_of(a))
        last = scheduler.submit(chain(a, b))
        await scheduler.join()
    async with Client(flow_worker) as client:
        assert await client.result(last, timeout=60) == "total: 6"


# ── bad input ──────────────────────────────────────────────────────────
@pytest.mark.parametrize(
    ("build", "error", "message"),
    [
        (lambda: chain(), ValueError, "chain() needs at least one job"),
        (lambda: group(count), TypeError, "group() step 1 must be a job or a workflow"),
        (
            lambda: chain(count.job(1), "job-1"),
            TypeError,
            "chain() step 2 must be a job or a workflow, got 'job-1'",
        ),
        (lambda: chord(count.job(1), add_all), TypeError, "chord() takes a group or a list"),
        (
            lambda: chord([count.job(1)], print),
            TypeError,
            "chord() callback must be a task, task.options(...), functools.partial(task, ...) "
            "or a job",
        ),
    ],
)
def test_bad_workflows_are_refused_when_built(build: Any, error: type, message: str) -> None:
    with pytest.raises(error) as info:
        build()
    assert str(info.value).startswith(message)


async def test_a_job_twice_in_a_workflow_is_refused_before_anything_is_submitted() -> None:
    job = count.job(1)
    async with JobScheduler() as scheduler:
        with pytest.raises(ValueError, match="appears twice in the workflow"):
            scheduler.submit(chain(job, group(count.job(2), job)))
        assert scheduler.jobs() == []
        done = count.job(3)
        scheduler.submit(done)
        with pytest.raises(SchedulerError, match="was already submitted"):
            scheduler.submit(chain(count.job(4), done))
        assert len(scheduler.jobs()) == 1
        with pytest.raises(TypeError, match=r"takes depends_on only"):
            scheduler.submit(chain(count.job(5)), priority="high")
        await scheduler.join()


@pytest.mark.parametrize(
    "option",
    [{"result_ttl": 5}, {"keep_result": False}, {"trigger_rule": "all_done"}, {"key": "k"}],
    ids=lambda option: next(iter(option)),
)
async def test_a_scheduler_refuses_a_job_option_on_a_workflow(option: dict[str, Any]) -> None:
    async with JobScheduler() as scheduler:
        with pytest.raises(
            TypeError, match=r"^submit\(chain\(flow.count\)\) takes depends_on only"
        ):
            scheduler.submit(chain(count.job(1)), **option)
        assert scheduler.jobs() == []


@pytest.mark.parametrize(
    "option",
    [
        {"priority": 0},
        {"keep_result": False},
        {"trigger_rule": "all_done"},
        {"timeout": None},
        {"delay": 1},
    ],
    ids=lambda option: f"{next(iter(option))}={next(iter(option.values()))!r}",
)
async def test_a_client_refuses_a_job_option_on_a_workflow(
    tmp_path: Path, option: dict[str, Any]
) -> None:
    # priority=0 and keep_result=False equal an unset delay's 0.0: still refused.
    async with Client(f"sqlite:///{tmp_path / 'jobs.db'}") as client:
        with pytest.raises(
            TypeError, match=r"^submit\(chain\(flow.count\)\) takes depends_on only"
        ):
            await client.submit(chain(count.job(1)), **option)
        assert await client.jobs() == []


def test_the_workflow_classes_describe_themselves() -> None:
    a, b, c = count.job(1), count.job(2), count.job(3)
    flow = chain(a, group(b, c))
    assert isinstance(flow, Chain) and isinstance(flow.steps[1], Group)
    assert flow.jobs() == [a, b, c]
    assert flow.last() is c
    assert repr(flow) == "chain(flow.count, group(flow.count, flow.count))"
    made = chord([a], add_all)
    assert isinstance(made, Chord) and made.last() is made.callback


# ── job files: [[group]], [[chain]] and { result_of = ID } ─────────────
JOBFILE_DOC = Path(__file__).resolve().parent.parent / "docs" / "jobfile.md"


def jobfile_doc_files() -> dict[str, str]:
    """The blocks of docs/jobfile.md that start with ``# file: NAME``."""
    blocks = re.findall(r"^```\w*\n# file: (\S+)\n(.*?)^```", JOBFILE_DOC.read_text(), re.S | re.M)
    return dict(blocks)


@pytest.mark.parametrize("store", [None, "sqlite"])
def test_the_job_file_pipeline_of_the_docs_runs_as_it_says(
    tmp_path: Path, store: str | None
) -> None:
    files = jobfile_doc_files()
    assert sorted(files) == ["pipeline.toml", "pipeline_tasks.py"]
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    args = ["run", "pipeline.toml", "--import", "pipeline_tasks", "--json"]
    if store:
        args += ["--store", f"sqlite:///{tmp_path / 'jobs.db'}"]
    done = subprocess.run(
        [sys.executable, "-m", "jobsched", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    jobs = {job["id"]: job for job in json.loads(done.stdout)["jobs"]}
    assert {k: v["result"] for k, v in jobs.items()} == {
        "orders": [0, 1, 2],
        "refunds": [0, 1],
        "total": 4,
        "report": "daily: 4",
        "cleanup": [],
    }
    order = {k: v["start_order"] for k, v in jobs.items()}
    assert max(order["orders"], order["refunds"]) < order["total"]
    assert order["total"] < order["report"] < order["cleanup"]


PIPELINE = """\
[[job]]
id = "a"
type = "flow.count"
args = { n = 1 }

[[job]]
id = "b"
type = "flow.count"
args = { n = 2 }

[[group]]
id = "g"
members = ["a", "b"]

[[job]]
id = "sum"
type = "flow.add_all"
args = { parts = { result_of = "g" } }

[[chain]]
steps = ["a", "b"]
"""


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            ('steps = ["a", "b"]', 'steps = ["a", "bb"]'),
            "pipeline.toml:21: [[chain]]: step 'bb' is not a [[job]] or [[group]] id in this "
            "file; did you mean 'b'?",
        ),
        (
            ('steps = ["a", "b"]', 'steps = ["a"]'),
            "pipeline.toml:21: [[chain]] #1: steps must be an array of at least two different "
            "ids, got array ['a']",
        ),
        (
            ('members = ["a", "b"]', 'members = ["a", "c"]'),
            "pipeline.toml:13: group 'g': member 'c' is not a [[job]] id in this file",
        ),
        (
            ('result_of = "g"', 'result_of = "gg"'),
            "pipeline.toml:18: job 'sum': result_of 'gg' is not a [[job]] or [[group]] id in "
            "this file; did you mean 'g'?",
        ),
        (
            ('result_of = "g"', "result_of = 3"),
            "pipeline.toml:18: job 'sum': args: result_of must be an entry id or an array of "
            "ids, got integer 3",
        ),
        (
            ('id = "g"', 'id = "a"'),
            "pipeline.toml:12: duplicate id 'a' (first used at line 1)",
        ),
        (
            ('steps = ["a", "b"]', 'steps = ["sum", "a"]'),
            "pipeline.toml:1: dependency cycle:",
        ),
    ],
)
def test_bad_workflow_tables_are_refused_naming_the_culprit(
    tmp_path: Path, change: tuple[str, str], message: str
) -> None:
    path = tmp_path / "pipeline.toml"
    path.write_text(PIPELINE.replace(*change))
    done = subprocess.run(
        [sys.executable, "-m", "jobsched", "run", "pipeline.toml", "--import", "flow_tasks"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"jobsched: error: {message}"), lines[0]


def test_result_of_in_a_job_type_that_is_not_a_task_is_refused_by_the_loader() -> None:
    text = PIPELINE.replace('type = "flow.add_all"', 'type = "email"').replace(
        "parts = {", "subject = 's', to = {"
    )
    with pytest.raises(JobFileError, match="'email' is not a task"):
        parse_jobfile(text, source="pipeline.toml", plugins=PluginManager())


async def test_a_job_file_workflow_runs_from_python() -> None:
    plugins = PluginManager()
    jobfile = parse_jobfile(PIPELINE, source="pipeline.toml", plugins=plugins)
    assert jobfile.groups == {"g": ("a", "b")}
    assert dict((j.id, j.depends_on) for j in jobfile.jobs) == {
        "a": (),
        "b": ("a",),
        "sum": ("a", "b"),
    }
    result = await run_jobfile(jobfile, plugins=plugins)
    assert result.exit_code == 0
    assert {o.id: o.result for o in result.outcomes} == {"a": 1, "b": 2, "sum": 3}


async def test_submit_threadsafe_refuses_a_workflow() -> None:
    async with JobScheduler() as scheduler:
        with pytest.raises(TypeError, match="submit a workflow on the loop"):
            scheduler.submit_threadsafe(chain(count.job(1)))


async def test_a_job_file_trigger_rule_may_rest_on_result_of_alone() -> None:
    text = """\
[[job]]
id = "bad"
type = "flow.fail"
args = { message = "boom" }

[[job]]
id = "after"
type = "flow.echo"
args = { value = { result_of = "bad" } }
trigger_rule = "all_done"
"""
    plugins = PluginManager()
    result = await run_jobfile(
        parse_jobfile(text, source="f.toml", plugins=plugins), plugins=plugins
    )
    outcomes = {o.id: (o.status.value, o.result) for o in result.outcomes}
    # The upstream did not complete: under all_done its marker is None.
    assert outcomes == {"bad": ("failed", None), "after": ("completed", None)}


@pytest.mark.slow
def test_a_job_file_workflow_runs_on_worker_processes(
    pg_schema: tuple[str, str], tmp_path: Path
) -> None:
    # `jobsched run --store postgresql://...` is a client; a worker runs the jobs.
    url = pg_schema[0]
    path = tmp_path / "pipeline.toml"
    path.write_text(PIPELINE)
    command = ["run", str(path), "--store", url, "--json", "--import", "flow_tasks"]
    worker = FlowWorker(url)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "jobsched", *command],
            cwd=Path(__file__).resolve().parent,  # where flow_tasks is
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        worker.stop()
    assert done.returncode == 0, done.stderr
    results = {job["id"]: job["result"] for job in json.loads(done.stdout)["jobs"]}
    assert results == {"a": 1, "b": 2, "sum": 3}
