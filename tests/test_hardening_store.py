"""Issue 9, durable store: a store larger than the history resumes, a bad store
is one clear line (never a traceback or a hang), and a relative sqlite URL
that was meant to be absolute says how to write it."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from store_support import Noop, scheduler
from test_cli import jobsched

SLEEP_JOB = '[[job]]\nid = "a"\ntype = "sleep"\nargs = { name = "s", seconds = 0 }\n'


def url_of(path: Path) -> str:
    return f"sqlite:///{path}"


def keyed_rows(path: Path) -> list[tuple[str, str | None, str]]:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT job_id, key, status FROM jobsched_jobs ORDER BY seq").fetchall()


# ── defect 1: more finished jobs than the history ─────────────────────
async def test_a_key_is_forgotten_with_its_job_so_the_key_map_stays_bounded() -> None:
    s = scheduler(None, history_limit=3)
    await s.start()
    for n in range(20):
        s.submit(Noop(), key=f"k{n}")
    await s.join()
    known = {f"k{n}": s.lookup(f"k{n}") for n in range(20)}
    assert [key for key, job_id in known.items() if job_id is not None] == ["k17", "k18", "k19"]
    for job_id in filter(None, known.values()):
        assert s.get(job_id).status.value == "completed"  # a known key always has its job
    await s.stop()


async def test_a_store_with_more_finished_jobs_than_the_history_resumes(tmp_path: Path) -> None:
    db = tmp_path / "jobs.db"
    first = scheduler(url_of(db), history_limit=2)
    await first.start()
    ids = [first.submit(Noop(), key=f"k{n}") for n in range(5)]
    await first.join()
    await first.stop()

    again = scheduler(url_of(db), history_limit=2)
    await again.start()
    # The two newest finished jobs are the history, with their keys; the older
    # ones are still in the file, but the scheduler no longer knows them.
    assert [again.lookup(f"k{n}") for n in range(5)] == [None, None, None, ids[3], ids[4]]
    for job_id in ids[3:]:
        assert again.get(job_id).status.value == "completed"
    # A forgotten key is a new job; the store takes it (keys are unique in the
    # file) and the old row keeps its history without the key.
    new = again.submit(Noop(), key="k0")
    assert new not in ids
    assert again.submit(Noop(), key="k4") == ids[4]  # a known key queues nothing
    await again.join()
    await again.stop()
    rows = keyed_rows(db)
    assert (new, "k0", "completed") in rows
    assert (ids[0], None, "completed") in rows
    assert sorted(key for _, key, _ in rows if key is not None) == ["k0", "k1", "k2", "k3", "k4"]

    # And a third start is as good as the second.
    third = scheduler(url_of(db), history_limit=2)
    await third.start()
    assert third.lookup("k0") == new
    await third.stop()


@pytest.mark.slow
def test_run_resumes_a_store_with_more_jobs_than_the_default_history(tmp_path: Path) -> None:
    count = 10_001  # one more than JobScheduler's default history_limit
    jobfile = tmp_path / "many.toml"
    jobfile.write_text(
        "".join(
            f'[[job]]\nid = "j{n}"\ntype = "sleep"\nargs = {{ name = "s", seconds = 0 }}\n'
            for n in range(count)
        )
    )
    url = url_of(tmp_path / "jobs.db")
    runs = []
    for _ in range(3):  # the first run, then two reruns of the finished run
        result = jobsched("run", str(jobfile), "--store", url, "--json", timeout=120)
        assert result.returncode == 0, result.stderr[-2000:]
        runs.append(json.loads(result.stdout))
    for doc in runs:
        assert doc["counts"]["completed"] == count
        assert [j["id"] for j in doc["jobs"]] == [f"j{n}" for n in range(count)]
    assert [j["job_id"] for j in runs[2]["jobs"]] == [j["job_id"] for j in runs[0]["jobs"]]
    assert all(j["duration"] is None for j in runs[2]["jobs"])  # nothing ran again
