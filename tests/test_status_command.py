"""``jobsched status`` on every durable store (issue 21, item 15).

The same columns and the same JSON on a single-owner SQLite file, a shared
SQLite file and PostgreSQL; ``--status``, ``--type`` and ``--limit``; the
newest page by default, with a line saying how many more match; bad filter
values are one line and exit code 2. Each store is filled through its own
API (no worker runs), then read by the command, in-process.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from jobsched.cli import main
from jobsched.store import JobRow, NewJob, Outcome, StoreContext
from jobsched_plugins.postgres_store import PostgresStore
from jobsched_plugins.sqlite_store import SQLiteStore
from jobsched_plugins.sqlite_store import journal as sqlite_journal
from jobsched_plugins.sqlite_store import queries as sqlite_queries

STORES = ["single-owner", "shared-sqlite", "postgresql"]
#: What the store holds: (type, status) per job, in submit order.
JOBS = [("alpha", "pending")] * 45 + [("beta", "completed")] * 10 + [("beta", "failed")] * 5
JOB_KEYS = {
    "id",
    "group",
    "job_id",
    "type",
    "status",
    "attempts",
    "run_at",
    "submitted_at",
    "started_at",
    "finished_at",
    "trigger_rule",
    "result",
    "error",
    "traceback",
    "build_refusals",
    "last_refusal",
    "schedule_id",
    "held_by",
    "lease_expires_in",
    "submitted_by",
    "progress",
    "args",
    "options",
}
DOC_KEYS = {
    "store",
    "counts",
    "filters",
    "limit",
    "matching",
    "jobs",
    "schedules",
    "waiting_for_worker",
}
COLUMNS = ["ID", "JOB ID", "TYPE", "STATUS", "ATTEMPTS", "NEXT RUN", "HELD BY", "RESULT / ERROR"]


async def _fill_single_owner(url: str) -> None:
    store = SQLiteStore(url)
    await store.open(StoreContext(worker_id="filler"))
    await store.write(
        [
            JobRow(
                job_id=f"job-{i}",
                key=f"k{i}",
                type=kind,
                status=status,
                run_at=1_800_000_000.0 + i,
                submitted_at=1_800_000_000.0 + i,
                seq=i,
                args=json.dumps({"n": i}),
                options='{"name": "n", "executor": "async"}',
                attempts=0 if status == "pending" else 1,
                finished_at=None if status == "pending" else 1_800_000_100.0,
                result="7" if status == "completed" else None,
                last_error="ValueError: no" if status == "failed" else None,
            )
            for i, (kind, status) in enumerate(JOBS)
        ]
    )
    await store.close()


async def _fill_shared(store: Any) -> None:
    await store.open(StoreContext(worker_id="filler", shared=True))
    try:
        await store.insert(
            [
                NewJob(
                    job_id=f"job-{i}",
                    key=f"k{i}",
                    type=kind,
                    args={"n": i},
                    options={"name": "n", "executor": "async"},
                    # The ended ones first: the claim takes them by sort key.
                    sort_key=(0.0 if status != "pending" else 1.0,),
                    run_at=0.0,
                    submitted_at=1_800_000_000.0 + i,
                )
                for i, (kind, status) in enumerate(JOBS)
            ]
        )
        ended = {f"job-{i}": status for i, (_, status) in enumerate(JOBS) if status != "pending"}
        claimed, _ = await store.claim(len(ended), "filler")
        assert {row.job_id for row in claimed} == set(ended)
        await store.finish(
            [
                Outcome(
                    job_id=job_id,
                    status=status,
                    result="7" if status == "completed" else None,
                    error="ValueError: no" if status == "failed" else None,
                )
                for job_id, status in ended.items()
            ],
            "filler",
        )
    finally:
        await store.close()


@pytest.fixture(params=STORES)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store of each durable format holding `JOBS`."""
    if request.param == "single-owner":
        url = f"sqlite:///{tmp_path}/owned.db"
        asyncio.run(_fill_single_owner(url))
    elif request.param == "shared-sqlite":
        url = f"sqlite:///{tmp_path}/shared.db"
        asyncio.run(_fill_shared(SQLiteStore(url)))
    else:
        url = request.getfixturevalue("pg_schema")[0]
        asyncio.run(_fill_shared(PostgresStore(url)))
    return url


def status(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["status", *args])
    out, err = capsys.readouterr()
    return code, out, err


def status_json(capsys: pytest.CaptureFixture[str], url: str, *args: str) -> dict[str, Any]:
    code, out, err = status(capsys, "--store", url, "--json", *args)
    assert code == 0, err
    doc: dict[str, Any] = json.loads(out)
    return doc


def test_the_same_columns_and_json_on_every_store(
    store_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # One page is read, never every job (bounded memory however big the store).
    def every_job(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("jobsched status read every job")

    for reader in (SQLiteStore, PostgresStore):
        monkeypatch.setattr(reader, "jobs", every_job)
    monkeypatch.setattr(sqlite_journal, "load", every_job)
    monkeypatch.setattr(sqlite_queries, "snapshot", every_job)
    doc = status_json(capsys, store_url)
    assert set(doc) == DOC_KEYS
    assert doc["store"] == store_url
    assert doc["counts"] == {
        "pending": 45,
        "running": 0,
        "retry_wait": 0,
        "completed": 10,
        "failed": 5,
        "timed_out": 0,
        "cancelled": 0,
    }
    assert all(set(job) == JOB_KEYS for job in doc["jobs"])
    newest = doc["jobs"][0]
    assert (newest["id"], newest["job_id"], newest["type"], newest["status"]) == (
        "k59",
        "job-59",
        "beta",
        "failed",
    )
    assert (newest["error"], newest["args"], newest["options"]["name"]) == (
        "ValueError: no",
        {"n": 59},
        "n",
    )
    completed = next(job for job in doc["jobs"] if job["status"] == "completed")
    assert (completed["result"], completed["error"]) == (7, None)
    assert doc["schedules"] == []

    code, out, err = status(capsys, "--store", store_url)
    assert code == 0, err
    assert out.splitlines()[0].split() == " ".join(COLUMNS).split()
    assert f"60 jobs in {store_url}: 45 pending, 10 completed, 5 failed" in out


def test_the_newest_page_by_default_and_how_to_see_more(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = status_json(capsys, store_url)
    assert (doc["limit"], doc["matching"]) == (50, 60)
    assert [job["job_id"] for job in doc["jobs"]] == [f"job-{i}" for i in range(59, 9, -1)]
    code, out, err = status(capsys, "--store", store_url)
    assert code == 0, err
    assert "showing the newest 50 of 60 jobs; 10 more: --limit N shows up to 1000" in out
    rows = [line for line in out.splitlines() if line.startswith("k")]
    assert len(rows) == 50


def test_filters(store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    failed = status_json(capsys, store_url, "--status", "failed")
    assert failed["matching"] == 5 and {job["status"] for job in failed["jobs"]} == {"failed"}
    assert failed["filters"] == {"status": ["failed"], "type": None}
    ended = status_json(capsys, store_url, "--status", "completed", "--status", "failed,pending")
    assert ended["matching"] == 60 and len(ended["jobs"]) == 50
    beta = status_json(capsys, store_url, "--type", "beta", "--limit", "12")
    assert (beta["matching"], len(beta["jobs"])) == (15, 12)
    assert {job["type"] for job in beta["jobs"]} == {"beta"}
    both = status_json(capsys, store_url, "--type", "alpha", "--status", "failed")
    assert (both["matching"], both["jobs"]) == (0, [])
    few = status_json(capsys, store_url, "--limit", "3")
    assert [job["job_id"] for job in few["jobs"]] == ["job-59", "job-58", "job-57"]
    code, out, err = status(capsys, "--store", store_url, "--type", "beta", "--status", "failed")
    assert code == 0, err
    assert "5 matching jobs" in out and "more" not in out


@pytest.mark.parametrize(
    ("args", "culprit"),
    [
        (["--status", "bogus"], "'bogus' is not a status"),
        (["--status", ","], "names no status"),
        (["--limit", "0"], "'0' is not a number of jobs from 1 to 1000"),
        (["--limit", "1001"], "from 1 to 1000"),
        (["--limit", "many"], "'many'"),
        (["--limit", "9" * 5000], "'99999999"),
        (["--type", ""], "is not a job type name"),
        (["--type", "a\x00b"], "is not a job type name"),
    ],
)
def test_bad_filter_values_are_one_line_and_exit_code_2(
    store_url: str, capsys: pytest.CaptureFixture[str], args: list[str], culprit: str
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["status", "--store", store_url, *args])
    out, err = capsys.readouterr()
    assert stopped.value.code == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith("jobsched: error: status: ")
    assert culprit in err and len(err) < 300
