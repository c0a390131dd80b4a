"""Issue 15's scenario with real ``jobsched worker`` processes: a worker paused
(SIGSTOP) past its lease while another completes its jobs must not run any of
them again when it goes on (SIGCONT), nor write over their results, and says
"lease lost" once per job.

Every wait polls the store or the worker's log; `until` only fails a hung test.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from jobsched.store import NewJob
from shared_support import Target


@pytest.fixture
def target(db_target: Target) -> Target:
    """The workers are processes of their own:
    the databases only (a memory store is seen by one process)."""
    return db_target


pytestmark = pytest.mark.slow
HERE = Path(__file__).parent


async def until(what: str, check: Callable[[], Awaitable[Any]], timeout: float = 90.0) -> Any:
    give_up = time.monotonic() + timeout
    while not (value := await check()):
        if time.monotonic() > give_up:
            pytest.fail(f"timed out waiting for {what}; last value {value!r}")
        await asyncio.sleep(0.05)
    return value


class Worker:
    """A ``jobsched worker`` subprocess whose JSON log lines are collected."""

    def __init__(self, url: str, workers: int, site: Path) -> None:
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(site), str(HERE), os.environ.get("PYTHONPATH", "")]),
        }
        args = ["worker", "--store", url, "--workers", str(workers), "--log-format", "json"]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jobsched", *args, "--grace", "60"],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.identity = f"{socket.gethostname()}:{self.proc.pid}"
        self.lines: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            try:
                self.lines.append(json.loads(line))
            except ValueError:
                self.lines.append({"event": line.rstrip()})

    def said(self, event: str) -> list[dict[str, Any]]:
        return [e for e in list(self.lines) if e.get("event") == event]

    async def started(self) -> None:
        async def check() -> bool:
            if self.proc.poll() is not None:
                pytest.fail(f"worker exited with {self.proc.returncode}: {self.lines}")
            return bool(self.said("shared scheduler started"))

        await until("the worker to start", check)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(timeout=90) == 0
        self._reader.join(timeout=30)


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """The test job types as an installed plugin (a dist-info with an entry point)."""
    site = tmp_path / "site"
    info = site / "jobsched_pgjobs-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: jobsched-pgjobs\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[jobsched]\npgjobs = pg_jobs\n")
    return site


@pytest.fixture
def workers() -> Iterator[list[Worker]]:
    started: list[Worker] = []
    yield started
    for w in started:
        if w.proc.poll() is None:
            w.proc.send_signal(signal.SIGCONT)
            w.proc.kill()
            w.proc.wait()


def sleeper(target: Target, tag: str, seconds: float) -> NewJob:
    now = time.time()
    return NewJob(
        job_id=tag,
        type="record",
        args={"dsn": target.side, "schema": target.schema, "tag": tag, "seconds": seconds},
        options={"retry": {"policy": "none"}},
        run_at=now,
        submitted_at=now,
        sort_key=(0.0,),
    )


def snapshot(rows: list[Any]) -> dict[str, tuple[Any, ...]]:
    return {
        r.job_id: (r.status, r.attempts, r.finished_at, r.result, r.last_error, r.lease_owner)
        for r in rows
    }


async def test_a_worker_paused_past_its_lease_runs_nothing_another_completed(
    target: Target, site: Path, workers: list[Worker]
) -> None:
    target = target.with_lease(2)
    probe = await target.open_store()
    try:
        a = Worker(target.url, 2, site)
        workers.append(a)
        await a.started()
        jobs = ["j1", "j2", "j3", "j4"]
        await probe.insert([sleeper(target, tag, 4) for tag in jobs])

        async def a_holds_all() -> bool:
            rows = await probe.jobs(jobs)
            ran = [job for job, _, pid in target.executions() if pid == a.proc.pid]
            return len(ran) == 2 and all(
                r.status == "running" and r.lease_owner == a.identity for r in rows
            )

        # Two attempts running, two claims prefetched.
        await until("worker A to hold all four jobs", a_holds_all)
        started_by_a = sorted(job for job, _, _ in target.executions())
        a.proc.send_signal(signal.SIGSTOP)

        b = Worker(target.url, 4, site)
        workers.append(b)
        await b.started()

        async def all_completed() -> bool:
            return {r.status for r in await probe.jobs(jobs)} == {"completed"}

        await until("worker B to complete all four", all_completed)
        b.stop()
        before = snapshot(await probe.jobs(jobs))
        ran_before = target.executions()
        assert len(ran_before) == 6  # A started two, B ran all four

        a.proc.send_signal(signal.SIGCONT)

        async def said_once_each() -> bool:
            return {e["job_id"] for e in a.said("lease lost")} == set(jobs)

        await until("A to say it lost each lease", said_once_each)
        # A job after SIGCONT, held by A alone: three renewals of its lease
        # prove A's renewer went round three more times.
        await probe.insert([sleeper(target, "marker", 3600)])
        seen: set[float] = set()

        async def renewed_three_times() -> bool:
            row = await probe.get("marker")
            if row is not None and row.status == "running" and row.lease_expires is not None:
                seen.add(row.lease_expires)
            return len(seen) >= 4

        await until("A to renew the marker's lease three times", renewed_three_times)
        assert await probe.request_cancel("marker")
        a.stop()

        after = snapshot(await probe.jobs(jobs))
        ran_after = target.executions()
    finally:
        await probe.close()
    # A's late ends were ignored (owner guard): B's results stand, untouched.
    assert after == before
    assert all(v[0] == "completed" and v[5] is None for v in after.values())
    # After SIGCONT nothing ran again but the marker.
    assert ran_after[: len(ran_before)] == ran_before
    assert [job for job, _, _ in ran_after[len(ran_before) :]] == ["marker"]
    assert sorted(job for job, _, pid in ran_before if pid == a.proc.pid) == started_by_a
    # Said once per job, never in a loop; the two prefetched ones were not started.
    lost = a.said("lease lost")
    assert sorted(e["job_id"] for e in lost) == jobs
    actions = {e["job_id"]: e["action"] for e in lost}
    prefetched = sorted(set(jobs) - set(started_by_a))
    assert [actions[j] for j in prefetched] == ["not started", "not started"]
    assert {actions[j] for j in started_by_a} <= {"attempt stopped", "result not recorded"}
    started_again = [
        e
        for e in a.said("job.transition")
        if e.get("new") == "running" and e.get("job_id") in prefetched
    ]
    assert started_again == []
