"""Issue 9, durable store: a store larger than the history resumes, a bad store
is one clear line (never a traceback or a hang), and a relative sqlite URL
that was meant to be absolute says how to write it."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobsched import JobScheduler, StoreError
from jobsched.cli import main
from jobsched.store import JobRow, Snapshot, StoreContext, check_snapshot
from jobsched_plugins.sqlite_store import SQLiteStore
from store_support import Noop, RecordingStore, scheduler
from test_cli import SCRIPT, assert_bad_input, jobsched, write

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


# ── defect 7: a store changed by hand ─────────────────────────────────
@pytest.fixture(scope="module")
def finished_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A job file and the store of its finished run (built once)."""
    folder = tmp_path_factory.mktemp("finished")
    jobfile = write(
        folder / "jobs.toml",
        """
        [[job]]
        id = "a"
        type = "sleep"
        args = { name = "s", seconds = 0 }
        [[job]]
        id = "b"
        type = "sleep"
        depends_on = ["a"]
        args = { name = "s", seconds = 0 }
        """,
    )
    db = folder / "jobs.db"
    result = jobsched("run", str(jobfile), "--store", url_of(db))
    assert result.returncode == 0, result.stderr
    return jobfile, db


TAMPERING = {
    "unknown status": ("UPDATE jobsched_jobs SET status = 'bogus' WHERE key = 'a'", "a", "bogus"),
    "time not a number": ("UPDATE jobsched_jobs SET run_at = 'soon' WHERE key = 'a'", "a", "soon"),
    "result not JSON": (
        "UPDATE jobsched_jobs SET result = '{garbage' WHERE key = 'a'",
        "a",
        "not JSON",
    ),
    "depends on itself": (
        "UPDATE jobsched_jobs SET depends_on = json_array(job_id) WHERE key = 'b'",
        "b",
        "depends on itself",
    ),
    "dependency cycle": (
        "UPDATE jobsched_jobs SET depends_on = "
        "(SELECT json_array(job_id) FROM jobsched_jobs WHERE key = 'b') WHERE key = 'a'",
        "a",
        "dependency cycle",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("tampering", TAMPERING)
def test_a_tampered_row_is_one_line_naming_the_file_and_the_row(
    tmp_path: Path, finished_store: tuple[Path, Path], tampering: str
) -> None:
    jobfile, original = finished_store
    db = tmp_path / "jobs.db"
    shutil.copy(original, db)
    sql, key, problem = TAMPERING[tampering]
    conn = sqlite3.connect(db, isolation_level=None)
    [(job_id,)] = conn.execute("SELECT job_id FROM jobsched_jobs WHERE key = ?", (key,))
    conn.execute(sql)
    conn.close()  # the last connection out writes the WAL back into the file
    assert not Path(f"{db}-wal").exists()
    before = db.read_bytes()
    for command in (
        ("run", str(jobfile), "--store", url_of(db)),  # before: a traceback or a hang
        ("status", "--store", url_of(db)),
        ("status", "--store", url_of(db), "--json"),
    ):
        assert_bad_input(jobsched(*command, timeout=30), str(db), f"job {job_id}", problem)
        assert db.read_bytes() == before


def test_every_job_of_a_dependency_cycle_is_refused_not_just_pairs() -> None:
    def job(job_id: str, seq: int, *deps: str) -> JobRow:
        return JobRow(job_id, "noop", "pending", 0.0, 0.0, seq, depends_on=deps)

    ring = Snapshot(jobs=[job("x", 1, "z"), job("y", 2, "x"), job("z", 3, "y"), job("w", 4, "x")])
    with pytest.raises(StoreError, match=r"job x .*dependency cycle \(x -> z -> y -> x\)"):
        check_snapshot("test://", ring)
    # A dependency on a later job is fine as long as it closes no cycle.
    check_snapshot("test://", Snapshot(jobs=[job("x", 1, "y"), job("y", 2)]))


async def test_a_cycle_in_another_store_fails_start_instead_of_hanging() -> None:
    store = RecordingStore()
    for n, dep in ((1, "job-2"), (2, "job-1")):
        store.jobs[f"job-{n}"] = JobRow(
            f"job-{n}", "noop", "pending", 0.0, 0.0, n, depends_on=(dep,)
        )
    s = scheduler(store)
    with pytest.raises(StoreError, match=r"recording://: job job-1 .*dependency cycle"):
        await s.start()


# ── defect 7: a folder or disk that cannot be written ─────────────────
@pytest.mark.slow
def test_a_lock_file_that_cannot_be_created(
    tmp_path: Path, finished_store: tuple[Path, Path]
) -> None:
    # Tests run as root, where a read-only folder (chmod 0o555) does not stop
    # a write. A folder where the lock file should be makes creating it fail
    # the same way for every user (test_an_unwritable_folder_as_another_user
    # covers the permission itself).
    jobfile, original = finished_store
    db = tmp_path / "jobs.db"
    shutil.copy(original, db)
    (tmp_path / "jobs.db.lock").mkdir()
    before = db.read_bytes()
    assert_bad_input(
        jobsched("run", str(jobfile), "--store", url_of(db)),
        f"cannot write the lock file {db}.lock",
    )
    assert db.read_bytes() == before


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs Linux's /dev/full")
def test_a_full_disk_at_start(tmp_path: Path, finished_store: tuple[Path, Path]) -> None:
    # /dev/full answers every write with ENOSPC, as a full disk does: the lock
    # file is the first thing a run writes.
    jobfile, original = finished_store
    db = tmp_path / "jobs.db"
    shutil.copy(original, db)
    (tmp_path / "jobs.db.lock").symlink_to("/dev/full")
    before = db.read_bytes()
    assert_bad_input(
        jobsched("run", str(jobfile), "--store", url_of(db)),
        f"cannot write the lock file {db}.lock",
        "No space left on device",
    )
    assert db.read_bytes() == before


def test_a_full_disk_when_the_store_is_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A disk with no room for a new file: SQLite may use one page (SQLITE_FULL).
    from jobsched_plugins.sqlite_store.connection import Database

    connect = Database.connect

    def full_disk(db: Database, readonly: bool) -> sqlite3.Connection:
        conn = connect(db, readonly)
        conn.execute("PRAGMA max_page_count = 1")
        return conn

    monkeypatch.setattr(Database, "connect", full_disk)
    jobfile = write(tmp_path / "jobs.toml", SLEEP_JOB)
    db = tmp_path / "new.db"
    assert main(["run", str(jobfile), "--store", url_of(db)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"the disk holding {db} is full" in err
    assert not db.exists()  # nothing is left of a store that could not be created


def _as_nobody() -> list[str] | None:
    """The command prefix that runs a command as an unprivileged user, if any."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    return [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]


@pytest.fixture
def unwritable_folder() -> Iterator[Path]:
    # Outside pytest's tmp_path: its parents are private to the user running
    # the tests, and the command must be able to reach the folder.
    folder = Path(tempfile.mkdtemp(prefix="jobsched-ro-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        folder.chmod(0o755)
        shutil.rmtree(folder)


@pytest.mark.slow
async def test_an_unwritable_folder_as_another_user(unwritable_folder: Path) -> None:
    prefix = _as_nobody()
    if prefix is None:
        pytest.skip("running as root without setpriv: cannot drop the permission to write")
    interpreter = Path(sys.executable)
    if prefix and not os.access(interpreter, os.X_OK, effective_ids=False):
        pytest.skip("the test interpreter is not reachable by another user")
    db = unwritable_folder / "jobs.db"
    s = scheduler(url_of(db))
    await s.start()
    s.submit(Noop(), key="a")
    await s.join()
    await s.stop()
    (unwritable_folder / "jobs.db.lock").unlink()
    jobfile = unwritable_folder / "jobs.toml"
    jobfile.write_text(SLEEP_JOB)
    db.chmod(0o644)
    unwritable_folder.chmod(0o555)
    before = db.read_bytes()

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        env = {"PATH": os.environ.get("PATH", ""), "HOME": "/", "COLUMNS": "250"}
        assert SCRIPT is not None
        return subprocess.run(
            [*prefix, SCRIPT, *args], capture_output=True, text=True, env=env, timeout=60
        )

    probe = run("--help")
    if probe.returncode != 0:
        pytest.skip(f"jobsched cannot run as another user here: {probe.stderr[-300:]}")
    assert_bad_input(
        run("run", str(jobfile), "--store", url_of(db)), f"cannot write the lock file {db}.lock"
    )
    status = run("status", "--store", url_of(db))
    assert_bad_input(status, f"cannot read {db}", "can this user write to")
    assert "not a usable SQLite database" not in status.stderr
    assert db.read_bytes() == before


# ── weakness: sqlite:///tmp/x.db is relative ──────────────────────────
async def test_a_relative_url_meant_to_be_absolute_names_the_absolute_form(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    s = JobScheduler(store="sqlite:///tmp/x.db")
    with pytest.raises(StoreError) as caught:
        await s.start()
    message = str(caught.value)
    assert "folder" in message and "does not exist" in message
    assert "sqlite:////tmp/x.db" in message and "\n" not in message
    reader = SQLiteStore("sqlite:///tmp/x.db")
    with pytest.raises(StoreError, match=r"no such file: tmp/x\.db .*sqlite:////tmp/x\.db"):
        await reader.open(StoreContext(worker_id="r", readonly=True))


@pytest.mark.slow
def test_run_with_a_relative_url_meant_to_be_absolute(tmp_path: Path) -> None:
    jobfile = write(tmp_path / "jobs.toml", SLEEP_JOB)
    assert_bad_input(
        jobsched("run", str(jobfile), "--store", "sqlite:///tmp/x.db", cwd=tmp_path),
        "does not exist",
        "sqlite:////tmp/x.db",
    )


def test_status_json_names_a_row_whose_arguments_are_not_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "jobs.db"

    async def fill() -> str:
        s = scheduler(url_of(db))
        await s.start()
        job_id = s.submit(Noop(), key="a")
        await s.join()
        await s.stop()
        return job_id

    job_id = asyncio.run(fill())
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("UPDATE jobsched_jobs SET args = '{oops'")
    conn.close()
    assert main(["status", "--store", url_of(db), "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert f"job {job_id} has a column that is not JSON" in captured.err
