"""Each job state's round trip through a store, and the recovery semantics.

A scheduler builds the state, the test "crashes" it (no more writes, like
``kill -9``), and a new scheduler on the same store restores it. Times come
from manual clocks: the restarted process has another monotonic origin and a
later wall time, as a real restart has.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
import structlog

from jobsched import AsyncJob, JobSpecError, JobStatus, StoreError, default_plugin_manager, hookimpl
from jobsched.store import JobRow, read_store
from jobsched_plugins.fixed_retry import FixedRetryPolicy
from jobsched_plugins.no_retry import NoRetryPolicy
from store_support import (
    GATES,
    Fail,
    Gate,
    ManualClock,
    Noop,
    Odd,
    Record,
    RecordingStore,
    crash,
    gate,
    runs,
    scheduler,
    until,
)

WALL = 1_800_000_000.0


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/jobs.db"


async def read_rows(url: str) -> dict[str, dict[str, object]]:
    """Every job row in the store, as ``jobsched status`` would read it."""
    from jobsched.store import StoreContext
    from jobsched_plugins.sqlite_store import SQLiteStore

    store = SQLiteStore(url)
    snapshot = await store.open(StoreContext(worker_id="test", readonly=True))
    await store.close()
    return {
        row.job_id: {
            "status": row.status,
            "attempts": row.attempts,
            "run_at": row.run_at,
            "result": row.result,
            "key": row.key,
        }
        for row in snapshot.jobs
    }


def release(tag: str) -> None:
    GATES[tag][1].set()


async def test_every_state_round_trips_through_sqlite(url: str, tmp_path: Path) -> None:
    log = tmp_path / "runs.log"
    clock = ManualClock(mono=1000.0, wall=WALL)
    s = scheduler(url, clock)
    await s.start()
    running_started, _ = gate("running")
    gate("slow")
    done = s.submit(Record(str(log), "done", value={"n": 1}), key="done")
    failed = s.submit(Fail("bad input"))
    cancelled = s.submit(Noop("never"), delay=50.0)
    s.cancel(cancelled)
    flaky = Record(str(log), "flaky", fail_times=1)
    flaky.retry = FixedRetryPolicy(max_retries=2, seconds=100.0)
    retrying = s.submit(flaky)
    delayed = s.submit(Record(str(log), "later"), delay=200.0)
    slow = Gate("slow")
    slow.timeout = 5.0
    slow.retry = NoRetryPolicy()
    timed = s.submit(slow)
    running = s.submit(Gate("running"))
    blocked = s.submit(Record(str(log), "after"), depends_on=[running])
    await running_started.wait()
    await clock.advance(6.0)  # the watchdog times "slow" out
    hold_started, _ = gate("hold")
    holder = s.submit(Gate("hold"))
    queued = s.submit(Record(str(log), "queued"))
    await hold_started.wait()
    await s.flush()
    expected = {
        done: "completed",
        failed: "failed",
        cancelled: "cancelled",
        retrying: "retry_wait",
        delayed: "pending",
        timed: "timed_out",
        running: "running",
        blocked: "pending",
        holder: "running",
        queued: "pending",
    }
    before = await read_rows(url)
    assert {job_id: row["status"] for job_id, row in before.items()} == expected
    assert json.loads(str(before[done]["result"])) == {"n": 1}
    assert before[retrying]["attempts"] == 1
    assert runs(log) == ["done", "flaky"]
    await crash(s)

    # A restarted process: another monotonic origin, 30 s later on the wall.
    clock2 = ManualClock(mono=50.0, wall=WALL + 36.0)
    offset2 = clock2.time() - clock2.now()
    gate("running")
    gate("hold")
    s2 = scheduler(url, clock2)
    await s2.start()
    get = s2.get
    # Terminal jobs are history: same state, never run again.
    assert get(done).status is JobStatus.COMPLETED and get(done).result == {"n": 1}
    assert get(failed).status is JobStatus.FAILED and "bad input" in str(get(failed).last_error)
    assert get(timed).status is JobStatus.TIMED_OUT
    assert get(cancelled).status is JobStatus.CANCELLED
    # Interrupted attempts are pending again, their attempts kept.
    assert (get(running).status, get(running).attempts) == (JobStatus.PENDING, 1)
    # Backoffs and delays keep their wall-clock due times.
    assert get(retrying).status is JobStatus.RETRY_WAIT
    assert get(retrying).run_at + offset2 == pytest.approx(before[retrying]["run_at"])
    assert get(delayed).run_at + offset2 == pytest.approx(before[delayed]["run_at"])
    assert get(blocked).status is JobStatus.PENDING and s2.waiting_on(blocked)
    # The key of a finished job still resolves: resubmitting it adds nothing.
    assert s2.submit(Record(str(log), "done"), key="done") == done
    # New ids never collide with restored ones.
    fresh = s2.submit(Noop("fresh"))
    assert fresh not in before

    release("running")
    release("hold")
    await until(lambda: get(running).status is get(holder).status is JobStatus.COMPLETED)
    await clock2.advance(1000.0)
    await s2.join()
    await s2.stop()
    assert get(running).attempts == 2  # one interrupted, one finished
    assert (get(retrying).status, get(retrying).attempts) == (JobStatus.COMPLETED, 2)
    assert get(holder).status is JobStatus.COMPLETED
    # Completed before the crash: never again. The others ran to the end.
    assert sorted(runs(log)) == sorted(["done", "flaky", "flaky", "later", "after", "queued"])
    after = await read_rows(url)
    assert {row["status"] for row in after.values()} <= {
        "completed",
        "failed",
        "timed_out",
        "cancelled",
    }
    assert after[done]["key"] == "done"


def row(
    job_id: str, status: str, seq: int, *, type: str = "noop", deps: tuple[str, ...] = ()
) -> JobRow:
    """A job row as another scheduler (or a store plugin) would write it."""
    return JobRow(
        job_id=job_id,
        type=type,
        status=status,
        seq=seq,
        run_at=WALL,
        submitted_at=WALL,
        depends_on=deps,
        attempts=1 if status != "pending" else 0,
    )


async def test_dependents_of_jobs_that_finished_before_the_crash() -> None:
    store = RecordingStore()
    for r in [
        row("job-1", "completed", 1),
        row("job-2", "failed", 2),
        row("job-3", "pending", 3, deps=("job-1",)),  # upstream completed: released
        row("job-4", "pending", 4, deps=("job-2",)),  # upstream failed: cancelled
        row("job-5", "pending", 5, deps=("job-4",)),  # and the cascade goes on
        row("job-6", "pending", 6, deps=("job-1", "job-7")),  # one upstream still to run
        row("job-7", "retry_wait", 7),
        row("job-8", "pending", 8, deps=("job-99",)),  # upstream missing from the store
    ]:
        store.jobs[r.job_id] = r
    clock = ManualClock(wall=WALL + 10)
    s = scheduler(store, clock)
    await s.start()
    # job-5 is cancelled once job-4's cancellation is committed.
    waiting = {job.job_id: s.waiting_on(job.job_id) for job in s.jobs()}
    assert {job_id: deps for job_id, deps in waiting.items() if deps} == {
        "job-5": {"job-4"},
        "job-6": {"job-7"},
    }
    await s.join()
    await s.stop()
    status = {j.job_id: (j.status.value, j.last_error) for j in s.jobs()}
    assert status["job-3"] == ("completed", None)
    assert status["job-4"] == ("cancelled", "upstream job-2 failed")
    assert status["job-5"] == ("cancelled", "upstream job-4 cancelled")
    assert status["job-6"] == ("completed", None)
    assert status["job-7"][0] == "completed"
    assert status["job-8"] == ("cancelled", "upstream job-99 is missing from the store")
    assert {job_id: store.status(job_id) for job_id in status} == {
        job_id: value for job_id, (value, _) in status.items()
    }


async def test_a_dependent_starts_only_after_its_upstream_is_committed() -> None:
    store = RecordingStore()
    s = scheduler(store)
    await s.start()
    up_started, _ = gate("up")
    up = s.submit(Gate("up"))
    down = s.submit(Noop("down"), depends_on=[up])
    await up_started.wait()
    await s.flush()
    store.gate = asyncio.Event()  # hold every write from now on
    release("up")
    await until(lambda: s.get(up).status is JobStatus.COMPLETED)
    for _ in range(20):  # give a wrongly released dependent every chance to start
        await asyncio.sleep(0)
    # Completed in memory, not committed: the dependent must not start.
    assert store.status(up) == "running"
    assert s.get(down).status is JobStatus.PENDING and s.waiting_on(down) == {up}
    # A job submitted now on the same upstream waits for the commit too.
    late = s.submit(Noop("late"), depends_on=[up])
    assert s.waiting_on(late) == {up}
    store.gate.set()
    await s.join()
    await s.stop()
    assert store.status(up) == "completed"
    assert store.status(down) == store.status(late) == "completed"
    # The upstream's COMPLETED row was committed in an earlier batch than any
    # row of its dependents running.
    up_batch = next(
        i
        for i, b in enumerate(store.batches)
        if any(r.job_id == up and getattr(r, "status", "") == "completed" for r in b)
    )
    down_running = next(
        i
        for i, b in enumerate(store.batches)
        if any(r.job_id == down and getattr(r, "status", "") in ("running", "completed") for r in b)
    )
    assert up_batch < down_running


async def test_a_failure_cascade_waits_for_the_commit_too() -> None:
    store = RecordingStore()
    s = scheduler(store)
    await s.start()
    await s.flush()
    store.gate = asyncio.Event()
    bad = s.submit(Fail())
    down = s.submit(Noop("down"), depends_on=[bad])
    await until(lambda: s.get(bad).status is JobStatus.FAILED)
    for _ in range(20):
        await asyncio.sleep(0)
    assert s.get(down).status is JobStatus.PENDING
    store.gate.set()
    await s.join()
    await s.stop()
    assert (s.get(down).status, s.get(down).last_error) == (
        JobStatus.CANCELLED,
        f"upstream {bad} failed",
    )
    assert store.status(down) == "cancelled"


async def test_recurring_schedule_resumes_at_its_rate_and_coalesces_missed_fires(
    url: str, tmp_path: Path
) -> None:
    log = tmp_path / "runs.log"
    clock = ManualClock(mono=0.0, wall=WALL)
    s = scheduler(url, clock)
    await s.start()
    sid = s.schedule_recurring(lambda: Record(str(log), "tick"), 10.0, start_in=10.0, key="ticker")
    await clock.advance(10.0)  # fires at 10
    await s.join()
    await clock.advance(5.0)  # t = 15, next fire due at 20
    await s.flush()
    assert runs(log) == ["tick"]
    await crash(s)

    # Down from t=15 to t=55: fires due at 20, 30, 40 and 50 were missed.
    clock2 = ManualClock(mono=7.0, wall=WALL + 55.0)
    s2 = scheduler(url, clock2)
    await s2.start()
    [sched] = s2.recurring()
    assert sched.schedule_id == sid and sched.fired == 1
    assert sched.next_run + clock2.time() - clock2.now() == pytest.approx(WALL + 20.0)
    # Nobody scheduled it again: it fires its stored template (the last job it fired).
    await clock2.advance(0.0)
    await s2.join()
    assert runs(log) == ["tick", "tick"]  # the missed fires coalesced into one
    assert sched.fired == 2
    # Back on the fixed-rate grid: the next fire is at t=60 of the first clock.
    assert sched.next_run + clock2.time() - clock2.now() == pytest.approx(WALL + 60.0)
    # Scheduling its key again resumes it with the new factory: no second copy.
    assert s2.schedule_recurring(lambda: Record(str(log), "tock"), 10.0, key="ticker") == sid
    assert len(s2.recurring()) == 1
    await clock2.advance(5.0)
    await s2.join()
    assert runs(log) == ["tick", "tick", "tock"]
    # Fired jobs carry the schedule's key and their number.
    assert [s2.lookup(f"ticker#{n}") is not None for n in (1, 2, 3, 4)] == [True] * 3 + [False]
    assert s2.cancel_recurring(sid)
    await s2.stop()

    s3 = scheduler(url, ManualClock(wall=WALL + 100.0))
    await s3.start()
    assert s3.recurring() == []  # cancelled schedules stay cancelled
    assert sorted(j.name for j in s3.jobs()) == ["tick", "tick", "tock"]
    await s3.stop()
    rows = await read_rows(url)
    assert len(rows) == 3


async def test_a_result_json_cannot_encode_is_kept_as_its_repr(url: str) -> None:
    s = scheduler(url)
    await s.start()
    job_id = s.submit(Odd())
    await s.join()
    await s.stop()
    rows = await read_rows(url)
    stored = json.loads(str(rows[job_id]["result"]))
    assert stored["$repr"] == repr({1, 2})
    assert "not JSON-encodable" in stored["$note"]
    s2 = scheduler(url)
    await s2.start()
    assert s2.get(job_id).result == stored
    await s2.stop()


async def test_a_job_built_before_the_store_was_opened_gets_a_fresh_id(url: str) -> None:
    s = scheduler(url)
    await s.start()
    first = s.submit(Noop())
    await s.join()
    await s.stop()
    # A new "process" whose id counter starts low again.
    early = Noop()
    early.job_id = first
    s2 = scheduler(url)
    await s2.start()
    new_id = s2.submit(early)
    assert new_id != first and early.job_id == new_id
    assert s2.get(first).status is JobStatus.COMPLETED
    await s2.join()
    await s2.stop()


async def test_jobs_submitted_before_start_run_after_the_restore(url: str) -> None:
    # The reference design's flow: submit, then start. With a durable store
    # the submits are accepted once start() has restored the stored jobs; a
    # job whose id a restored job already has is renumbered, and a dependency
    # on it follows.
    s = scheduler(url)
    await s.start()
    first = s.submit(Noop())
    await s.join()
    await s.stop()

    upstream, downstream = Noop(), Noop()
    upstream.job_id = first  # as if a new process's counter started low again
    s2 = scheduler(url)
    assert s2.submit(upstream) == first
    s2.submit(downstream, depends_on=[first])
    await s2.start()
    assert upstream.job_id != first
    assert s2.get(first).status is JobStatus.COMPLETED  # the restored job, untouched
    await s2.join()
    await s2.stop()
    assert upstream.status is JobStatus.COMPLETED
    assert downstream.status is JobStatus.COMPLETED
    assert downstream.started_at is not None and upstream.finished_at is not None
    assert upstream.finished_at <= downstream.started_at
    rows = await read_rows(url)
    assert {first, upstream.job_id, downstream.job_id} <= set(rows)


async def test_stop_cancel_running_leaves_interrupted_jobs_for_the_next_start(
    url: str, tmp_path: Path
) -> None:
    log = tmp_path / "runs.log"
    s = scheduler(url)
    await s.start()
    started, _ = gate("busy")
    busy = s.submit(Gate("busy"))
    after = s.submit(Record(str(log), "after"), depends_on=[busy])
    await started.wait()
    await s.stop(cancel_running=True)
    # In this process the attempt was cancelled; the store keeps it RUNNING.
    assert s.get(busy).status is JobStatus.CANCELLED
    rows = await read_rows(url)
    assert rows[busy]["status"] == "running" and rows[after]["status"] == "pending"

    _, release_busy = gate("busy")
    release_busy.set()
    s2 = scheduler(url)
    await s2.start()
    assert s2.get(busy).status is JobStatus.PENDING
    await s2.join()
    await s2.stop()
    assert (s2.get(busy).status, s2.get(busy).attempts) == (JobStatus.COMPLETED, 2)
    assert runs(log) == ["after"]


async def test_submit_threadsafe_takes_a_key(url: str) -> None:
    s = scheduler(url)
    await s.start()
    job_id = await asyncio.to_thread(s.submit_threadsafe, Noop(), key="k")
    await until(lambda: s.lookup("k") is not None)
    assert s.lookup("k") == job_id
    assert s.submit(Noop(), key="k") == job_id  # known key: nothing new
    await s.join()
    await s.stop()
    assert len(await read_rows(url)) == 1


async def test_a_cron_schedule_resumes_on_the_wall_clock(url: str, tmp_path: Path) -> None:
    log = tmp_path / "runs.log"
    minute = 60.0
    start = 1_800_000_000.0 - 1_800_000_000.0 % minute  # on a minute boundary
    clock = ManualClock(mono=500.0, wall=start + 1.0)
    s = scheduler(url, clock)
    await s.start()
    sid = s.schedule_recurring(
        lambda: Record(str(log), "cron"), trigger={"cron": "* * * * *", "tz": "UTC"}, key="c"
    )
    await clock.advance(minute)  # the fire at start + 60
    await s.join()
    await s.flush()
    assert runs(log) == ["cron"]
    await crash(s)

    # Down for five minutes, on another monotonic origin.
    clock2 = ManualClock(mono=3.0, wall=start + 5 * minute + 30.0)
    s2 = scheduler(url, clock2)
    await s2.start()
    [sched] = s2.recurring()
    assert (sched.schedule_id, sched.name, sched.coalesce) == (sid, None, "one")
    assert sched.next_fire == start + 2 * minute  # wall time, as stored
    await clock2.advance(0.0)
    await s2.join()
    assert runs(log) == ["cron", "cron"]  # four missed fires, one run
    assert sched.next_fire == start + 6 * minute
    await s2.stop()


async def test_a_trigger_object_cannot_be_stored(url: str) -> None:
    from jobsched_plugins.cron_trigger import CronTrigger

    s = scheduler(url)
    await s.start()
    with pytest.raises(JobSpecError, match="give it as a mapping"):
        s.schedule_recurring(Noop, trigger=CronTrigger("* * * * *"))
    assert s.recurring() == []
    await s.stop()


async def test_a_unique_key_still_dedupes_after_a_restart(url: str) -> None:
    s = scheduler(url)
    await s.start()
    first = s.submit(Noop(), delay=3600, unique_key="nightly")
    await s.stop()
    s2 = scheduler(url)
    await s2.start()
    # Restored and unfinished: the key still stands for it.
    assert s2.submit(Noop(), unique_key="nightly") == first
    s2.cancel(first)
    # Finished: the key is free again.
    second = s2.submit(Noop(), unique_key="nightly")
    assert second != first
    await s2.join()
    await s2.stop()
    rows = await read_rows(url)
    assert (rows[first]["status"], rows[second]["status"]) == ("cancelled", "completed")


# ── an operator's pause survives a restart ─────────────────────────────
async def test_a_paused_schedule_stays_paused_after_a_restart(url: str, tmp_path: Path) -> None:
    log = tmp_path / "runs.log"
    clock = ManualClock(mono=0.0, wall=WALL)
    s = scheduler(url, clock)
    await s.start()
    sid = s.schedule_recurring(lambda: Record(str(log), "tick"), 10.0, start_in=10.0, key="t")
    await clock.advance(10.0)  # fires at 10
    await s.join()
    assert s.pause_schedule(sid) is True
    await s.stop()
    assert runs(log) == ["tick"]

    # Down from t=10 to t=55: a running schedule would fire its missed periods at once.
    clock2 = ManualClock(mono=3.0, wall=WALL + 55.0)
    s2 = scheduler(url, clock2)
    await s2.start()
    [sched] = s2.recurring()
    assert (sched.schedule_id, sched.paused, sched.fired) == (sid, True, 1)
    await clock2.advance(0.0)
    await clock2.advance(100.0)  # t = 155 of the first clock: still nothing
    await s2.join()
    assert runs(log) == ["tick"]
    assert s2.pause_schedule(sid) is False  # already paused, as restored
    # Resumed, it fires at the next period after now (t = 160), as in memory.
    assert s2.resume_schedule(sid) is True
    assert sched.next_run + clock2.time() - clock2.now() == pytest.approx(WALL + 160.0)
    await clock2.advance(4.0)
    await s2.join()
    assert runs(log) == ["tick"]
    await clock2.advance(1.0)
    await s2.join()
    assert runs(log) == ["tick", "tick"]
    await s2.stop()

    # The resume is stored too: the next restart fires the missed period at once.
    s3 = scheduler(url, ManualClock(mono=9.0, wall=WALL + 175.0))
    await s3.start()
    [sched] = s3.recurring()
    assert sched.paused is False
    await s3.stop()
    assert await stored_pauses(url) == [(sid, False)]


async def test_a_pause_and_a_resume_land_in_the_store(url: str) -> None:
    s = scheduler(url, ManualClock(mono=0.0, wall=WALL))
    await s.start()
    sid = s.schedule_recurring(Noop, 10.0, start_in=10.0)
    s.pause_schedule(sid)
    await s.flush()
    assert await stored_pauses(url) == [(sid, True)]
    s.resume_schedule(sid)
    await s.flush()
    assert await stored_pauses(url) == [(sid, False)]
    await s.stop()


async def test_a_paused_flag_changed_by_hand_is_refused_naming_the_schedule(url: str) -> None:
    s = scheduler(url, ManualClock(mono=0.0, wall=WALL))
    await s.start()
    sid = s.schedule_recurring(Noop, 10.0, start_in=10.0)
    await s.stop()
    path = url.removeprefix("sqlite:///")
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("UPDATE jobsched_schedules SET paused = 'yes'")
        conn.commit()
    with pytest.raises(StoreError, match=rf"recurring schedule {sid} .*paused 'yes' is not a flag"):
        await scheduler(url).start()


async def stored_pauses(url: str) -> list[tuple[str, bool]]:
    """Each stored schedule's id and paused flag, read as ``jobsched status`` reads them."""
    snapshot = await read_store(url, default_plugin_manager())
    assert snapshot is not None
    return [(row.schedule_id, row.paused) for row in snapshot.schedules]


async def test_a_single_owner_file_of_version_5_is_migrated_and_keeps_its_schedules(
    url: str, tmp_path: Path
) -> None:
    from jobsched_plugins.sqlite_store import migrations

    log = tmp_path / "runs.log"
    s = scheduler(url, ManualClock(mono=0.0, wall=WALL))
    await s.start()
    sid = s.schedule_recurring(lambda: Record(str(log), "tick"), 10.0, start_in=10.0)
    await s.stop()
    # Make it the file a jobsched of schema version 5 wrote: no paused column.
    path = url.removeprefix("sqlite:///")
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("ALTER TABLE jobsched_schedules DROP COLUMN paused")
        conn.execute("ALTER TABLE jobsched_jobs DROP COLUMN last_traceback")
        conn.execute("UPDATE jobsched_meta SET value = '5' WHERE name = 'schema_version'")
        conn.commit()

    def version() -> str:
        with contextlib.closing(sqlite3.connect(path)) as conn:
            row = conn.execute(
                "SELECT value FROM jobsched_meta WHERE name = 'schema_version'"
            ).fetchone()
        return str(row[0])

    # `jobsched status` reads it unmigrated, and changes nothing.
    assert await stored_pauses(url) == [(sid, False)]
    assert version() == "5"
    s2 = scheduler(url, ManualClock(mono=0.0, wall=WALL + 1.0))
    await s2.start()
    assert version() == str(migrations.SCHEMA_VERSION) == "16"
    [sched] = s2.recurring()
    assert (sched.schedule_id, sched.paused) == (sid, False)
    s2.pause_schedule(sid)
    await s2.stop()
    assert await stored_pauses(url) == [(sid, True)]
    s3 = scheduler(url, ManualClock(mono=0.0, wall=WALL + 2.0))
    await s3.start()
    [sched] = s3.recurring()
    assert sched.paused is True
    await s3.stop()


# ── expired results leave the file too ────────────────────────────────
async def test_an_expired_result_is_dropped_from_the_file(url: str, tmp_path: Path) -> None:
    log = tmp_path / "runs.log"
    clock = ManualClock(mono=0.0, wall=WALL)
    s = scheduler(url, clock, result_ttl=10.0)  # the reaper runs every 2.5 s
    await s.start()
    gone = s.submit(Record(str(log), "gone", value={"n": 1}), key="gone")
    await s.join()
    await clock.advance(6.0)
    kept = s.submit(Record(str(log), "kept", value=[1, 2]))
    await s.join()
    await s.flush()
    rows = await read_rows(url)
    assert (rows[gone]["result"], rows[kept]["result"]) == ('{"n":1}', "[1,2]")
    await clock.advance(5.0)  # t = 11: `gone` finished 11 s ago, `kept` 5 s ago
    await s.flush()
    assert s.get(gone).result is None and s.get(kept).result == [1, 2]
    rows = await read_rows(url)
    assert (rows[gone]["status"], rows[gone]["result"], rows[gone]["key"]) == (
        "completed",
        None,
        "gone",
    )
    assert rows[kept]["result"] == "[1,2]"
    await s.stop()
    s2 = scheduler(url, ManualClock(mono=0.0, wall=WALL + 12.0), result_ttl=10.0)
    await s2.start()
    assert s2.get(gone).status is JobStatus.COMPLETED and s2.get(gone).result is None
    assert s2.lookup("gone") == gone and s2.get(kept).result == [1, 2]
    await s2.stop()


async def test_an_expired_result_keeps_the_schedule_that_fired_its_job(
    url: str, tmp_path: Path
) -> None:
    log = tmp_path / "runs.log"
    clock = ManualClock(mono=0.0, wall=WALL)
    s = scheduler(url, clock, result_ttl=1.0)  # the reaper runs every second
    await s.start()
    sid = s.schedule_recurring(lambda: Record(str(log), "tick", value=7), 100.0, start_in=1.0)
    await clock.advance(1.0)
    await s.join()
    await s.flush()  # its finished row is committed: nothing about it is pending
    [job] = s.jobs()
    assert job.result == 7
    await clock.advance(2.0)  # the reaper drops the result and writes the row again
    await s.flush()
    assert job.result is None
    snapshot = await read_store(url, default_plugin_manager())
    assert snapshot is not None
    assert [(row.schedule_id, row.result) for row in snapshot.jobs] == [(sid, None)]
    await s.stop()


@attrs.define(slots=True, eq=False, repr=False)
class Spoiled(AsyncJob):
    """Returns a result, then holds a value its arguments cannot store."""

    note: Any = "fresh"

    async def run(self) -> int:
        self.note = object()  # no longer describable as data
        return 5


class spoiled_plugin:
    @staticmethod
    @hookimpl
    def jobsched_register_job_types(register: Callable[[str, Any], None]) -> None:
        register("spoiled", Spoiled)


async def test_a_job_that_can_no_longer_be_described_keeps_its_result_and_the_reaper_goes_on(
    url: str, tmp_path: Path
) -> None:
    log = tmp_path / "runs.log"
    clock = ManualClock(mono=0.0, wall=WALL)
    s = scheduler(url, clock, result_ttl=10.0, extra=[spoiled_plugin])
    await s.start()
    spoiled = s.submit(Spoiled())
    plain = s.submit(Record(str(log), "plain", value=1))
    await s.join()
    await s.flush()  # both finished rows are committed
    with structlog.testing.capture_logs() as logs:
        await clock.advance(10.0)  # both expire in the same reaper pass
        await s.flush()
    assert [e["event"] for e in logs if e.get("job_id") == spoiled] == [
        "expired result kept in the store"
    ]
    rows = await read_rows(url)
    assert (rows[spoiled]["result"], rows[plain]["result"]) == ("5", None)
    assert s.get(spoiled).result is None  # gone from memory all the same
    await s.stop()
