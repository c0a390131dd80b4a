"""``kill -9`` tests, run as a user would: ``jobsched run FILE --store sqlite:///...``
in a subprocess, killed at several points, run again, until every job is done.

The job type comes from a test plugin installed the way third-party plugins
are (a module and a ``*.dist-info`` with an entry point, on PYTHONPATH). Each
execution of a job appends ``start <tag>`` to a side file, so the test can
count executions. The test synchronizes on files (the side file, files the
jobs touch, the store itself), never on sleeps: a bounded poll only fails a
test that hangs.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

PLUGIN = '''
"""A job type for the crash tests: records every execution in a side file."""
import asyncio
import os

import attrs

from jobsched import AsyncJob, hookimpl


@attrs.define
class Logged(AsyncJob):
    """Appends "start <tag>" to `log`; touches `touch`; waits for `gate`; fails
    its first `fail_times` executions; then appends "end <tag>"."""

    log: str
    tag: str
    gate: str = ""
    touch: str = ""
    fail_times: int = 0

    async def run(self) -> int:
        with open(self.log, "a") as f:
            f.write(f"start {self.tag}\\n")
        if self.touch:
            open(self.touch, "w").close()
        while self.gate and not os.path.exists(self.gate):
            await asyncio.sleep(0.01)
        with open(self.log) as f:
            starts = f.read().splitlines().count(f"start {self.tag}")
        if starts <= self.fail_times:
            raise RuntimeError(f"{self.tag} fails on purpose")
        with open(self.log, "a") as f:
            f.write(f"end {self.tag}\\n")
        return starts


@hookimpl
def jobsched_register_job_types(register):
    register("logged", Logged)
'''

TERMINAL = {"completed", "failed", "timed_out", "cancelled"}


class Run:
    """One test's files, and the ``jobsched run`` subprocess."""

    def __init__(self, tmp_path: Path) -> None:
        self.dir = tmp_path
        site = tmp_path / "site"
        (site / "jobsched_crashtest").mkdir(parents=True)
        (site / "jobsched_crashtest" / "__init__.py").write_text(PLUGIN)
        info = site / "jobsched_crashtest-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            "Metadata-Version: 2.1\nName: jobsched-crashtest\nVersion: 0.1\n"
        )
        (info / "entry_points.txt").write_text("[jobsched]\ncrashtest = jobsched_crashtest\n")
        self.env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
        }
        self.db = tmp_path / "jobs.db"
        self.url = f"sqlite:///{self.db}"
        self.log = tmp_path / "runs.log"
        self.gate = tmp_path / "gate"
        self.file = tmp_path / "jobs.toml"
        self.proc: subprocess.Popen[str] | None = None
        self.kills: list[dict[str, str]] = []  # the store's statuses at each kill
        self.starts_at_kills: list[Counter[str]] = []  # executions so far, at each kill

    def write_jobfile(self, body: str) -> None:
        self.file.write_text(textwrap.dedent(body).format(log=self.log, dir=self.dir))

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jobsched", "run", str(self.file), "--store", self.url],
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def statuses(self) -> dict[str, str]:
        """id -> status of every job row the store has committed."""
        if not self.db.exists():
            return {}
        try:
            with sqlite3.connect(f"file:{self.db}?mode=ro", uri=True) as conn:
                rows = conn.execute("SELECT key, status FROM jobsched_jobs").fetchall()
        except sqlite3.OperationalError:  # the schema is not created yet
            return {}
        return {key: status for key, status in rows}

    def wait_for(self, what: str, condition: Callable[[], bool]) -> None:
        """Poll files until `condition()` holds; a watchdog only fails a hung test."""
        give_up = time.monotonic() + 60
        while not condition():
            assert self.proc is not None
            if self.proc.poll() is not None:
                out, err = self.proc.communicate()
                raise AssertionError(
                    f"jobsched exited ({self.proc.returncode}) before {what}:\n{out}\n{err}"
                )
            if time.monotonic() > give_up:
                raise AssertionError(f"gave up waiting for {what}: store {self.statuses()}")
            time.sleep(0.01)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.communicate()
        assert self.proc.returncode == -signal.SIGKILL
        self.kills.append(self.statuses())
        self.starts_at_kills.append(self.starts())

    def finish(self) -> tuple[str, str]:
        assert self.proc is not None
        out, err = self.proc.communicate(timeout=120)
        assert self.proc.returncode == 0, f"exit {self.proc.returncode}:\n{out}\n{err}"
        return out, err

    def starts(self) -> Counter[str]:
        lines = self.log.read_text().splitlines() if self.log.exists() else []
        return Counter(line.split(" ", 1)[1] for line in lines if line.startswith("start "))

    def status_json(self) -> dict[str, object]:
        done = subprocess.run(
            [sys.executable, "-m", "jobsched", "status", "--store", self.url, "--json"],
            env=self.env,
            capture_output=True,
            text=True,
            check=True,
        )
        return json.loads(done.stdout)  # type: ignore[no-any-return]

    def check_semantics(self, tags: dict[str, str]) -> None:
        """Every job ended, none that completed before a kill ran again, and a
        job ran once more for each kill that found it RUNNING - and only then.

        `tags` maps each job id in the file to the tag its runs write.
        """
        status = self.status_json()
        jobs = {job["id"]: job for job in status["jobs"]}  # type: ignore[index,union-attr]
        assert {job["status"] for job in jobs.values()} <= TERMINAL, jobs
        starts = self.starts()
        for job_id, tag in tags.items():
            assert jobs[job_id]["status"] == "completed", jobs[job_id]
            failures = 1 if tag == "flaky" else 0  # flaky fails once on purpose
            assert starts[tag] == 1 + failures + self.interrupted(job_id, tag), (
                job_id,
                starts,
                self.kills,
            )
            for kill, before in zip(self.kills, self.starts_at_kills, strict=True):
                if kill.get(job_id) == "completed":
                    assert starts[tag] == before[tag], f"{job_id} ran again after completing"

    def interrupted_runs(self, prefix: str, tag: str) -> int:
        """Like `interrupted`, for the runs of a recurring entry (one shared tag):
        at each kill, the runs started in that process minus those whose
        completion the store held."""
        count = 0
        previous_starts: Counter[str] = Counter()
        previous_done = 0
        for kill, starts in zip(self.kills, self.starts_at_kills, strict=True):
            done = sum(1 for k, s in kill.items() if k.startswith(prefix) and s == "completed")
            count += (starts[tag] - previous_starts[tag]) - (done - previous_done)
            previous_starts, previous_done = starts, done
        return count

    def interrupted(self, job_id: str, tag: str) -> int:
        """At how many kills `job_id` was RUNNING: an execution had started in
        that process and the store did not hold its outcome."""
        count = 0
        previous: Counter[str] = Counter()
        for kill, starts in zip(self.kills, self.starts_at_kills, strict=True):
            started_here = starts[tag] > previous[tag]
            if started_here and kill.get(job_id) not in TERMINAL | {"retry_wait"}:
                count += 1
            previous = starts
        return count


JOBS = """
    [scheduler]
    workers = 2
    strategy = "priority"

    [[job]]
    id = "quick"
    type = "logged"
    priority = "critical"
    args = {{ log = "{log}", tag = "quick" }}

    [[job]]
    id = "flaky"
    type = "logged"
    priority = "critical"
    retry = {{ policy = "fixed", seconds = 1.5, max_retries = 2 }}
    args = {{ log = "{log}", tag = "flaky", fail_times = 1 }}

    [[job]]
    id = "hold"
    type = "logged"
    priority = "high"
    timeout = false
    args = {{ log = "{log}", tag = "hold", gate = "{dir}/gate-a", touch = "{dir}/hold.started" }}

    [[job]]
    id = "hold2"
    type = "logged"
    priority = "high"
    timeout = false
    args = {{ log = "{log}", tag = "hold2", gate = "{dir}/gate-b", touch = "{dir}/hold2.started" }}

    [[job]]
    id = "queued"
    type = "logged"
    priority = "low"
    args = {{ log = "{log}", tag = "queued" }}

    [[job]]
    id = "after"
    type = "logged"
    depends_on = ["hold"]
    args = {{ log = "{log}", tag = "after" }}

    [[job]]
    id = "later"
    type = "logged"
    delay = "2s"
    args = {{ log = "{log}", tag = "later" }}

    [[recurring]]
    id = "tick"
    type = "logged"
    every = "100ms"
    times = 3
    priority = "low"
    args = {{ log = "{log}", tag = "tick" }}
"""


def test_kill_9_at_several_points_then_resume(tmp_path: Path) -> None:
    run = Run(tmp_path)
    run.write_jobfile(JOBS)
    started = [tmp_path / "hold.started", tmp_path / "hold2.started"]

    # 1. Kill with a job in every state: completed, retrying, running (two),
    #    queued, blocked on a dependency, delayed, and a recurring schedule.
    run.start()
    run.wait_for(
        "every state in the store",
        lambda: (
            all(p.exists() for p in started)
            and run.statuses().get("quick") == "completed"
            and run.statuses().get("flaky") == "retry_wait"
            and run.statuses().get("hold") == run.statuses().get("hold2") == "running"
            and run.statuses().get("tick#1") == "pending"
        ),
    )
    run.kill()
    at_kill = run.kills[-1]
    assert at_kill["queued"] == at_kill["after"] == at_kill["later"] == "pending"
    assert run.starts() == Counter({"quick": 1, "flaky": 1, "hold": 1, "hold2": 1})

    # 2. Restart with the gates shut: the interrupted jobs run again at once.
    #    Kill as soon as both have started.
    for p in started:
        p.unlink()
    run.start()
    run.wait_for("the interrupted jobs to start again", lambda: all(p.exists() for p in started))
    run.kill()
    assert run.starts()["quick"] == 1  # completed before the first kill: never again

    # 3. Open one gate: "hold" completes, which releases "after", and the freed
    #    worker takes the retry. Kill once those completed, "hold2" still running.
    for p in started:
        p.unlink()
    (tmp_path / "gate-a").touch()
    run.start()
    run.wait_for(
        "hold, after and flaky to complete",
        lambda: (
            started[1].exists()
            and all(run.statuses().get(j) == "completed" for j in ("hold", "after", "flaky"))
        ),
    )
    run.kill()

    # 4. Open the other gate: everything runs to the end.
    (tmp_path / "gate-b").touch()
    run.start()
    out, _ = run.finish()
    assert "quick" in out and "tick#3" in out
    run.check_semantics(
        {
            "quick": "quick",
            "flaky": "flaky",
            "hold": "hold",
            "hold2": "hold2",
            "queued": "queued",
            "after": "after",
            "later": "later",
        }
    )
    # The recurring entry fired 3 times in all (each run is in the store once,
    # under its key), and a run executed again only if a kill interrupted it.
    jobs = {job["id"]: job for job in run.status_json()["jobs"]}  # type: ignore[union-attr]
    assert sorted(k for k in jobs if k.startswith("tick#")) == ["tick#1", "tick#2", "tick#3"]
    assert {jobs[f"tick#{n}"]["status"] for n in (1, 2, 3)} == {"completed"}
    assert run.starts()["tick"] == 3 + run.interrupted_runs("tick#", "tick")

    # 5. Running the finished file again runs nothing.
    before = run.starts()
    run.start()
    out, _ = run.finish()
    assert run.starts() == before
    assert out.count("completed") >= 10


def test_kill_9_right_after_the_first_commit(tmp_path: Path) -> None:
    run = Run(tmp_path)
    run.write_jobfile(
        """
        [scheduler]
        workers = 1

        [[job]]
        id = "first"
        type = "logged"
        timeout = false
        args = {{ log = "{log}", tag = "first", gate = "{dir}/gate" }}

        [[job]]
        id = "second"
        type = "logged"
        depends_on = ["first"]
        args = {{ log = "{log}", tag = "second" }}
        """
    )
    run.start()
    run.wait_for(
        "the first job running in the store",
        lambda: run.statuses() == {"first": "running", "second": "pending"},
    )
    run.kill()
    run.gate.touch()
    run.start()
    run.finish()
    run.check_semantics({"first": "first", "second": "second"})


def test_ctrl_c_leaves_the_run_to_resume(tmp_path: Path) -> None:
    run = Run(tmp_path)
    run.write_jobfile(
        """
        [scheduler]
        workers = 1

        [[job]]
        id = "long"
        type = "logged"
        timeout = false
        args = {{ log = "{log}", tag = "long", gate = "{dir}/gate" }}

        [[job]]
        id = "next"
        type = "logged"
        args = {{ log = "{log}", tag = "next" }}
        """
    )
    run.start()
    run.wait_for("the long job to run", lambda: run.statuses().get("long") == "running")
    assert run.proc is not None
    run.proc.send_signal(signal.SIGINT)
    _, err = run.proc.communicate(timeout=60)
    assert run.proc.returncode == 130, err
    # Interrupted, not cancelled: the store keeps both for the next run.
    assert run.statuses() == {"long": "running", "next": "pending"}
    run.gate.touch()
    run.start()
    run.finish()
    assert run.starts() == Counter({"long": 2, "next": 1})
    status = run.status_json()
    assert {job["id"]: job["status"] for job in status["jobs"]} == {  # type: ignore[union-attr]
        "long": "completed",
        "next": "completed",
    }
