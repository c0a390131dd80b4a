"""The SQLite store's shared mode: what differs from PostgreSQL, and the two modes.

The shared-store contract itself runs on SQLite in the parametrized suites
(test_shared_mode, test_shared_limits, test_postgres_store, test_postgres_cluster).
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from jobsched import JobScheduler, StoreError
from jobsched.store import NewJob, StoreContext, pack_sort_key, unpack_sort_key
from jobsched_plugins.sqlite_store import SQLiteStore
from worker_support import wait_started

SHARED = StoreContext(worker_id="test", shared=True)


def url_of(path: Path) -> str:
    return f"sqlite:///{path}"


def test_sort_keys_pack_to_bytes_in_tuple_order() -> None:
    keys = [
        (-3.5, 0.0),
        (-1.0, 2.0),
        (-0.0, 1.0),
        (0.0, 1.5),
        (1e-300, -1e300),
        (2.0, float("-inf")),
        (2.0, 7.0),
        (float("inf"), 0.0),
    ]
    packed = [pack_sort_key(k) for k in keys]
    assert sorted(packed) == packed
    assert [unpack_sort_key(p) for p in packed] == [(k[0] + 0.0, k[1]) for k in keys]


async def test_a_shared_file_is_refused_by_the_single_owner_mode_and_back(
    tmp_path: Path,
) -> None:
    shared_db, owned_db = tmp_path / "shared.db", tmp_path / "owned.db"
    worker = SQLiteStore(url_of(shared_db))
    await worker.open(SHARED)
    try:
        # While a worker uses it (and after): the single-owner mode names the shared one.
        with pytest.raises(StoreError, match=r"is a shared store \(jobsched worker.*single-owner"):
            await SQLiteStore(url_of(shared_db)).open(StoreContext(worker_id="owner"))
        # A scheduler left to choose follows the file's mode instead (a new file: single-owner).
        assert SQLiteStore(url_of(shared_db)).shared
        assert not SQLiteStore(url_of(owned_db)).shared
        with pytest.raises(ValueError, match=r"shared=False: .* is always shared"):
            JobScheduler(store=url_of(shared_db), shared=False)
    finally:
        await worker.close()
    owner = JobScheduler(store=url_of(owned_db))
    await owner.start()
    try:
        with pytest.raises(StoreError, match=r"is a single-owner store \(jobsched run.*shared"):
            await SQLiteStore(url_of(owned_db)).open(SHARED)
        with pytest.raises(StoreError, match="single-owner store"):
            await JobScheduler(store=url_of(owned_db), shared=True).start()
    finally:
        await owner.stop()
    # A refused open changed nothing: each file still opens in its own mode.
    again = SQLiteStore(url_of(shared_db))
    await again.open(SHARED)
    await again.close()


async def test_calls_of_the_other_mode_are_refused_by_name(tmp_path: Path) -> None:
    store = SQLiteStore(url_of(tmp_path / "jobs.db"))
    await store.open(StoreContext(worker_id="w"))
    try:
        with pytest.raises(StoreError, match=r"claim is a shared-mode call.*single-owner mode"):
            await store.claim(1, "w")
    finally:
        await store.close()


def test_shared_true_needs_a_store_that_can_be_shared() -> None:
    with pytest.raises(ValueError, match="shared=True needs a durable store"):
        JobScheduler(shared=True)
    with pytest.raises(TypeError, match="shared must be True, False or None"):
        JobScheduler(shared="yes")  # type: ignore[arg-type]


def test_bad_shared_mode_options_are_refused() -> None:
    with pytest.raises(ValueError, match="lease must be a number of seconds > 0"):
        SQLiteStore("sqlite:////tmp/x.db?lease=0")
    with pytest.raises(ValueError, match="poll must be a number of seconds > 0"):
        SQLiteStore("sqlite:////tmp/x.db?poll=soon")


async def test_a_readonly_open_reads_a_shared_file(tmp_path: Path) -> None:
    url = url_of(tmp_path / "jobs.db")
    store = SQLiteStore(url)
    await store.open(SHARED)
    now = time.time()
    await store.insert(
        [
            NewJob(
                job_id="a",
                type="sleep",
                args={"seconds": 0},
                run_at=now,
                submitted_at=now,
                sort_key=(1.0,),
            ),
            NewJob(
                job_id="b",
                type="sleep",
                args={},
                run_at=now,
                submitted_at=now,
                sort_key=(1.0,),
                depends_on=("a",),
            ),
        ]
    )
    await store.close()
    reader = SQLiteStore(url)
    snapshot = await reader.open(StoreContext(worker_id="r", readonly=True))
    try:
        rows = {r.job_id: r for r in snapshot.jobs}
        assert (rows["a"].status, rows["b"].depends_on) == ("pending", ("a",))
        assert json.loads(rows["a"].args) == {"seconds": 0}
        assert [r.job_id for r in await reader.jobs()] == ["a", "b"]
    finally:
        await reader.close()


# ── a real `jobsched worker` process on a SQLite file ──────────────────
def jobsched(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jobsched", *args], capture_output=True, text=True, timeout=120
    )


@pytest.mark.slow
async def test_jobsched_worker_runs_jobs_another_process_puts_in_the_file(
    tmp_path: Path,
) -> None:
    url = url_of(tmp_path / "jobs.db")
    # The "web app": it creates the file in shared mode and enqueues.
    producer = SQLiteStore(url)
    await producer.open(StoreContext(worker_id="web", shared=True))
    worker = subprocess.Popen(
        [sys.executable, "-m", "jobsched", "worker", "--store", url, "--workers", "2"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_started(worker)
        now = time.time()
        ids = await producer.insert(
            [
                NewJob(
                    job_id=f"nap{i}",
                    type="sleep",
                    args={"name": f"nap{i}", "seconds": 0.01},
                    options={"retry": {"policy": "none"}},
                    run_at=now,
                    submitted_at=now,
                    sort_key=(0.0,),
                )
                for i in range(5)
            ]
        )

        async def done() -> list[Any]:
            while True:
                rows = await producer.jobs(ids)
                if all(r.status == "completed" for r in rows):
                    return rows
                await producer.wait_finished(5)

        rows = await asyncio.wait_for(done(), 60)
        assert {r.lease_owner for r in rows} == {None} and all(r.attempts == 1 for r in rows)
        # `jobsched status` reads the shared file.
        run = jobsched("status", "--store", url, "--json")
        assert run.returncode == 0, run.stderr
        assert {r["status"] for r in json.loads(run.stdout)["jobs"]} == {"completed"}
    finally:
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=60) == 0
        await producer.close()


async def test_a_claim_and_a_waiting_dependent_wake_this_process_live_views(
    tmp_path: Path,
) -> None:
    # Other processes see every commit by their poll; this process's own
    # commits set its events directly (the poll sees only other connections').
    store = SQLiteStore(url_of(tmp_path / "jobs.db") + "?poll=3600")
    await store.open(SHARED)
    try:
        await store.wait_changed(0)  # whatever opening set
        now = time.time()

        def job(job_id: str, deps: tuple[str, ...] = ()) -> NewJob:
            return NewJob(
                job_id=job_id,
                key=None,
                type="noop",
                args={},
                run_at=now,
                submitted_at=now,
                sort_key=(0.0,),
                depends_on=deps,
            )

        await store.insert([job("a")])
        assert await store.wait_changed(0) is True
        await store.insert([job("b", deps=("a",))])  # waits: no new work
        assert await store.wait_changed(0) is True
        claimed, _ = await store.claim(2, "w")
        assert [r.job_id for r in claimed] == ["a"]
        assert await store.wait_changed(0) is True
        assert await store.claim(2, "w") == ([], None)
        assert await store.wait_changed(0) is False  # an empty claim changed nothing
    finally:
        await store.close()
