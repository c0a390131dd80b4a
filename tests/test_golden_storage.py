"""What jobsched writes into a store, pinned byte for byte.

Restructuring must not change stored data: a job's type, arguments and
options as the codec writes them, and a schedule's id (a hash of its job and
trigger), are read back by processes of other versions. A changed schedule id
would make every existing store's schedules new ones.

The expected rows are in ``golden/storage.json``. To see what changed, run
with ``JOBSCHED_WRITE_GOLDEN=1`` and diff the file; changing it is a stored
format change and needs a migration.
"""

from __future__ import annotations

import itertools
import json
import os
import pathlib
import sqlite3
from typing import Any

import pytest

from jobsched import BlockingClient, JobScheduler, _recurring, build_job
from task_examples import Color, add, paint, send_email

GOLDEN = pathlib.Path(__file__).with_name("golden") / "storage.json"


def _jobs() -> list[tuple[Any, dict[str, Any]]]:
    """Jobs with the options a producer gives, covering every kind of job."""
    return [
        (build_job("email", {"to": "a@b.c", "subject": "hi"}), {}),
        (
            build_job("sleep", {"name": "nap", "seconds": 0.25}),
            {"priority": "high", "timeout": 7, "name": "short nap"},
        ),
        (build_job("email", {"to": "x@y.z", "subject": "built"}, priority="low"), {}),
        (
            build_job("prime-count", {"n": 1000}),
            {"retry": {"policy": "exponential", "max_retries": 5, "base_delay": 0.5}},
        ),
        (
            build_job("email", {"to": "k@k.k", "subject": "keyed"}),
            {"key": "order-42", "unique_key": None},
        ),
        (build_job("email", {"to": "u@u.u", "subject": "unique"}), {"unique_key": "mail-u"}),
        (send_email.job("t@t.t", subject="task"), {}),
        (add.job(1, b=2.5), {"timeout": None}),
        (paint.job(Color.BLUE, pathlib.Path("/tmp/x"), (1, 2)), {"retry": "none"}),
        (
            build_job("email", {"to": "r@r.r", "subject": "results"}),
            {"result_ttl": 60, "keep_result": True},
        ),
    ]


def _schedules() -> list[tuple[Any, dict[str, Any]]]:
    """Schedules none of which fires while the test runs (an hour away, or a
    29 February)."""
    return [
        (build_job("email", {"to": "s@s.s", "subject": "tick"}), {"every": 5.0}),
        (
            build_job("sleep", {"name": "tick", "seconds": 1}),
            {"every": 60.0, "allow_overlap": True, "times": 3},
        ),
        (
            build_job("email", {"to": "n@n.n", "subject": "nightly"}),
            {"trigger": {"cron": "0 2 29 2 *"}},
        ),
        (add.job(2, b=1.0), {"every": 30.0, "key": "adder"}),
    ]


def _rows(path: pathlib.Path, query: str) -> list[list[Any]]:
    with sqlite3.connect(path) as conn:
        return [list(row) for row in conn.execute(query)]


def _without_origin(trigger_text: str) -> dict[str, Any]:
    """A stored trigger without its origin, the time it was added."""
    return {k: v for k, v in json.loads(trigger_text).items() if k != "origin"}


def _shared(tmp_path: pathlib.Path) -> dict[str, Any]:
    path = tmp_path / "shared.db"
    with BlockingClient(f"sqlite:///{path}") as client:
        for job, options in _jobs():
            client.submit(job, delay=3600, **options)
        for job, options in _schedules():
            start = {} if "trigger" in options else {"start_in": 3600}
            client.add_schedule(job, **start, **options)
    jobs = _rows(
        path,
        "SELECT type, args, options, key, unique_key FROM jobsched_shared_jobs ORDER BY seq",
    )
    schedules = _rows(
        path,
        "SELECT schedule_id, type, args, options, trigger, allow_overlap"
        " FROM jobsched_shared_schedules ORDER BY type, args",
    )
    for row in schedules:
        row[4] = _without_origin(row[4])
    return {"jobs": jobs, "schedules": schedules}


async def _single_owner(tmp_path: pathlib.Path) -> dict[str, Any]:
    path = tmp_path / "journal.db"
    scheduler = JobScheduler(store=f"sqlite:///{path}")
    await scheduler.start()
    try:
        scheduler.submit(build_job("email", {"to": "j@j.j", "subject": "journal"}), delay=3600)
        scheduler.submit(
            build_job(
                "sleep",
                {"name": "low", "seconds": 1},
                priority="low",
                retry={"policy": "fixed", "max_retries": 1, "seconds": 2},
            ),
            delay=3600,
        )
        scheduler.submit(send_email.job("task@j.j"), delay=3600)
        scheduler.schedule_recurring(
            lambda: build_job("email", {"to": "o@o.o", "subject": "owner"}), 10.0, start_in=3600
        )
        scheduler.schedule_recurring(
            lambda: build_job("sleep", {"name": "cron", "seconds": 2}),
            None,
            trigger={"cron": "30 4 29 2 *"},
        )
    finally:
        await scheduler.stop(cancel_running=True)
    jobs = _rows(path, "SELECT type, args, options, key FROM jobsched_jobs ORDER BY seq")
    schedules = _rows(
        path, "SELECT schedule_id, template, trigger FROM jobsched_schedules ORDER BY template"
    )
    for row in schedules:
        row[2] = _without_origin(row[2])
    return {"jobs": jobs, "schedules": schedules}


async def test_stored_jobs_and_schedule_ids_are_byte_identical(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An in-process schedule's id (``sched-N``) counts the process's
    # schedules: counted from 1 here, whatever ran before in this process.
    monkeypatch.setattr(_recurring, "_schedule_ids", itertools.count(1))
    written = {
        "shared_sqlite": _shared(tmp_path),
        "single_owner_sqlite": await _single_owner(tmp_path),
    }
    if os.environ.get("JOBSCHED_WRITE_GOLDEN") == "1":
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(written, indent=1, sort_keys=True) + "\n")
    expected = json.loads(GOLDEN.read_text())
    # Compared as JSON values of the stored *texts*: a text that changes by
    # one byte (key order, spacing, a float's spelling) is a different string.
    assert json.loads(json.dumps(written)) == expected
