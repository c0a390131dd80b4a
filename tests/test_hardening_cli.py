"""Issue 9, command line and plugin manager: defects found by careless and hostile use.

Each test runs the installed console script in a subprocess as a user would
(or `jobsched.cli.main` in-process where a module constant must be lowered),
and waits on observable events (log lines), never on a guessed time.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

import jobsched._plugins as plugin_loading
from jobsched.cli import main
from test_cli import (
    EMAIL,
    SCRIPT,
    _distribution,
    _env,
    assert_bad_input,
    jobsched,
    write,
)
from test_plugin_discovery import Site, site  # noqa: F401 - `site` is a fixture

pytestmark = pytest.mark.slow


# ── 1. schedule preview --next is capped ──────────────────────────────
def test_schedule_preview_refuses_more_than_10000_fire_times() -> None:
    assert_bad_input(
        jobsched("schedule", "preview", "0 * * * *", "--next", "100000000"),
        "--next",
        "at most 10000, got 100000000",
    )
    assert_bad_input(jobsched("schedule", "preview", "0 * * * *", "--next", "10001"), "10000")
    most = jobsched(
        "schedule", "preview", "0 * * * *", "--after", "2026-01-01T00:00", "--next", "10000"
    )
    assert most.returncode == 0, most.stderr
    assert most.stdout.splitlines()[-1].startswith("'0 * * * *' in UTC: 10000 fire times")


# ── 2. SIGTERM stops a run as Ctrl-C does ─────────────────────────────
# A job that blocks until a file exists: the first run is stopped while it
# runs, the second finds the file and finishes at once. No timing guesses.
WAIT_FOR_FILE = """
    import asyncio
    from pathlib import Path

    import attrs
    from jobsched import AsyncJob, hookimpl


    @attrs.define
    class WaitForFile(AsyncJob):
        \"\"\"Waits until a file exists.\"\"\"

        path: str

        async def run(self) -> str:
            for _ in range(60_000):  # at most ~10 minutes: a hung test still ends
                if Path(self.path).exists():
                    return "found"
                await asyncio.sleep(0.01)
            raise TimeoutError(self.path)


    @hookimpl
    def jobsched_register_job_types(register):
        register("wait-for-file", WaitForFile)
"""


@pytest.fixture
def blocking_run(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """(job file, the file its `gate` job waits for, environment with the plugin)."""
    root = tmp_path / "site"
    root.mkdir()
    _distribution(root, "jobsched-waiter", "1.0", "waiter", "jobsched_waiter", WAIT_FOR_FILE)
    gate = tmp_path / "gate"
    path = write(
        tmp_path / "f.toml",
        f"""
        [[job]]
        id = "gate"
        type = "wait-for-file"
        args = {{ path = "{gate}" }}
        timeout = false

        [[job]]
        id = "after"
        {EMAIL}depends_on = ["gate"]

        [[job]]
        id = "free"
        {EMAIL}
        """,
    )
    return path, gate, {"PYTHONPATH": str(root)}


def _stop_while_gate_runs(
    path: Path, env: dict[str, str], *extra: str, sig: signal.Signals = signal.SIGTERM
) -> subprocess.CompletedProcess[str]:
    """Run `path`, send `sig` once `gate` runs and `free` completed; the finished process."""
    assert SCRIPT is not None
    args = [SCRIPT, "run", str(path), *extra, "--log-format", "json", "--log-level", "info"]
    process = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(env)
    )
    assert process.stderr is not None
    awaited = {("gate", "running"), ("free", "completed")}
    for line in process.stderr:  # wait for the events, not for a guessed time
        event = json.loads(line)
        awaited.discard((event.get("job_name"), event.get("new")))
        if not awaited:
            break
    else:
        pytest.fail(f"the run ended before its job started: {process.wait()}")
    process.send_signal(sig)
    stdout, stderr = process.communicate(timeout=60)
    return subprocess.CompletedProcess(args, process.returncode, stdout, stderr)


def _rows(stdout: str) -> dict[str, list[str]]:
    return {line.split()[0]: line.split() for line in stdout.splitlines()[2:-1] if line.strip()}


def test_sigterm_stops_a_run_like_ctrl_c_and_prints_the_summary(
    blocking_run: tuple[Path, Path, dict[str, str]],
) -> None:
    path, _, env = blocking_run
    result = _stop_while_gate_runs(path, env)
    assert result.returncode == 130, result.stderr
    rows = _rows(result.stdout)
    assert rows["gate"][2] == "cancelled"
    assert rows["after"][2] == "cancelled"
    assert result.stdout.splitlines()[-1].startswith("interrupted: 3 jobs in ")
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stopped_run_with_a_store_says_interrupted_and_resumes(
    blocking_run: tuple[Path, Path, dict[str, str]], tmp_path: Path, sig: signal.Signals
) -> None:
    path, gate, env = blocking_run
    url = f"sqlite:///{tmp_path}/jobs.db"
    stopped = _stop_while_gate_runs(path, env, "--store", url, sig=sig)
    assert stopped.returncode == 130, stopped.stderr
    rows = _rows(stopped.stdout)
    assert rows["gate"][2:4] == ["interrupted", "1"]
    assert rows["after"][2:4] == ["interrupted", "0"]
    assert rows["free"][2] == "completed"
    assert "will run again" in " ".join(rows["gate"])
    totals = stopped.stdout.splitlines()[-1]
    assert totals.startswith("interrupted: 3 jobs in ")
    assert "2 interrupted, will run again" in totals
    assert "cancelled" not in stopped.stdout

    status = json.loads(jobsched("status", "--store", url, "--json").stdout)
    assert {j["id"]: j["status"] for j in status["jobs"]} == {
        "gate": "running",  # ran when stopped: runs again (at-least-once)
        "after": "pending",
        "free": "completed",
    }

    gate.touch()
    resumed = jobsched("run", str(path), "--store", url, "--json", env=env)
    assert resumed.returncode == 0, resumed.stderr
    jobs = {j["id"]: j for j in json.loads(resumed.stdout)["jobs"]}
    assert {k: j["status"] for k, j in jobs.items()} == dict.fromkeys(jobs, "completed")
    assert jobs["gate"]["attempts"] == 2
    assert jobs["gate"]["result"] == "found"
    assert jobs["free"]["start_order"] is None, "finished in the first run, not run again"


def test_interrupted_jobs_in_run_json(
    blocking_run: tuple[Path, Path, dict[str, str]], tmp_path: Path
) -> None:
    path, _, env = blocking_run
    stopped = _stop_while_gate_runs(path, env, "--store", f"sqlite:///{tmp_path}/j.db", "--json")
    assert stopped.returncode == 130, stopped.stderr
    doc = json.loads(stopped.stdout)
    assert doc["interrupted"] is True and doc["exit_code"] == 130
    jobs = {j["id"]: j for j in doc["jobs"]}
    assert (jobs["gate"]["status"], jobs["gate"]["will_run_again"]) == ("interrupted", True)
    assert (jobs["free"]["status"], jobs["free"]["will_run_again"]) == ("completed", False)
    assert doc["counts"]["interrupted"] == 2 and doc["counts"]["cancelled"] == 0


# ── 3. usage errors: one line; --log-level's documented default ───────
@pytest.mark.parametrize(
    ("command", "fragment"),
    [
        ([], "the following arguments are required: COMMAND"),
        (["run"], "run: the following arguments are required: FILE.toml"),
        (["run", "a.toml", "extra"], "unrecognized arguments: extra"),
        (["run", "a.toml", "--log-level", "loud"], "run: argument --log-level: invalid choice"),
        (["demo", "--bogus"], "unrecognized arguments: --bogus"),
        (["worker"], "worker: the following arguments are required: --store"),
        (["worker", "--store", "x", "--workers", "many"], "worker: argument --workers"),
        (["status"], "status: the following arguments are required: --store"),
        (["jobs", "show"], "jobs show: the following arguments are required: NAME"),
        (["plugins", "frobnicate"], "plugins: argument COMMAND: invalid choice: 'frobnicate'"),
        (["schedule", "preview", "* * * * *", "--next", "0"], "must be a positive integer"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else None,
)
def test_every_usage_error_is_one_line(command: list[str], fragment: str) -> None:
    assert_bad_input(jobsched(*command), fragment, "--help")


def test_log_level_help_states_the_real_default() -> None:
    worker = " ".join(jobsched("worker", "--help").stdout.split())
    assert "every job transition (default: info)" in worker
    assert "default: warning" not in worker
    run = " ".join(jobsched("run", "--help").stdout.split())
    assert "every job transition (default: warning)" in run


# ── 5. big runs: counts and the rows that did not complete ────────────
def _many_jobs(tmp_path: Path, completing: int, failing: int) -> Path:
    entries = [f'[[job]]\nid = "ok{i}"\n{EMAIL}' for i in range(completing)]
    entries += [
        f'[[job]]\nid = "bad{i}"\ntype = "flaky-upload"\n'
        f'args = {{ path = "s3://b/{i}", failures = 5 }}\nretry = "none"\n'
        for i in range(failing)
    ]
    return write(tmp_path / "many.toml", "[scheduler]\nworkers = 8\n\n" + "\n".join(entries))


def test_a_big_run_lists_only_the_jobs_that_did_not_complete(tmp_path: Path) -> None:
    path = _many_jobs(tmp_path, completing=248, failing=3)
    result = jobsched("run", str(path))
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split()[:2] == ["ID", "TYPE"]
    listed = [line.split()[0] for line in lines[2:] if line.split()[0].startswith(("ok", "bad"))]
    assert listed == ["bad0", "bad1", "bad2"]
    assert "(248 completed jobs not listed: 251 jobs are more than 200; --all lists" in lines[-2]
    assert lines[-1].startswith("251 jobs in ")
    assert "248 completed, 3 failed" in lines[-1]

    every = jobsched("run", str(path), "--all")
    rows = [line.split()[0] for line in every.stdout.splitlines()[2:-1]]
    assert rows == [f"ok{i}" for i in range(248)] + ["bad0", "bad1", "bad2"]

    doc = json.loads(jobsched("run", str(path), "--json").stdout)
    assert len(doc["jobs"]) == 251
    assert doc["counts"]["completed"] == 248 and doc["counts"]["failed"] == 3


def test_a_run_of_200_jobs_lists_them_all(tmp_path: Path) -> None:
    path = _many_jobs(tmp_path, completing=199, failing=1)
    lines = jobsched("run", str(path)).stdout.splitlines()
    assert len(lines[2:-1]) == 200
    assert "not listed" not in "\n".join(lines)


# ── 6. the summary shows the order jobs started in ────────────────────
def test_the_summary_shows_the_start_order(tmp_path: Path) -> None:
    path = write(
        tmp_path / "f.toml",
        f"""
        [scheduler]
        workers = 1

        [[job]]
        id = "low"
        priority = "low"
        {EMAIL}
        [[job]]
        id = "high"
        priority = "high"
        {EMAIL}
        [[job]]
        id = "critical"
        priority = "critical"
        {EMAIL}
        [[job]]
        id = "never"
        cancel_after = 0
        {EMAIL}
        """,
    )
    result = jobsched("run", str(path))
    assert result.returncode == 1, result.stderr  # `never` was cancelled
    lines = result.stdout.splitlines()
    assert lines[0].split()[:6] == ["ID", "TYPE", "STATUS", "ATTEMPTS", "STARTED", "DURATION"]
    started = {line.split()[0]: line.split()[4] for line in lines[2:-1]}
    assert started == {"low": "#3", "high": "#2", "critical": "#1", "never": "-"}
    doc = json.loads(jobsched("run", str(path), "--json").stdout)
    assert [j["start_order"] for j in doc["jobs"]] == [3, 2, 1, None]


def test_the_demo_shows_priority_order() -> None:
    doc = json.loads(jobsched("demo", "--json").stdout)
    order = {j["id"]: j["start_order"] for j in doc["jobs"]}
    assert order["alert"] == 1, "the critical job starts first"
    assert {order["export"], order["primes"]} == {2, 3}
    assert order["notify"] is None and order["later"] is None
    table = jobsched("demo").stdout
    alert = next(line for line in table.splitlines() if line.startswith("alert "))
    assert alert.split()[4] == "#1"


# ── 7. a plugin slow to import is named; import times are listed ──────
SLOTH = """
    import time

    from jobsched import hookimpl
    from jobsched_plugins.fifo import FIFOStrategy

    time.sleep(0.05)  # a slow import (the notice threshold is lowered to 0 below)

    @hookimpl
    def jobsched_register_strategies(register):
        register("sloth-fifo", FIFOStrategy)
"""


def test_a_plugin_slow_to_import_is_named_once_and_import_times_are_listed(
    site: Site,  # noqa: F811 - the fixture imported above
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    site.install("sloth-sched", {"sloth": "sloth_plugin"}, {"sloth_plugin": SLOTH})
    monkeypatch.setattr(plugin_loading, "SLOW_IMPORT_SECONDS", 0)
    assert main(["plugins", "list", "--json"]) == 0
    out, err = capsys.readouterr()
    notice = (
        "jobsched: loading plugin 'sloth' (from sloth-sched) is taking a while; "
        "JOBSCHED_DISABLE_PLUGINS=sloth skips it"
    )
    assert err.splitlines().count(notice) == 1
    rows = {row["name"]: row for row in json.loads(out)}
    assert isinstance(rows["sloth"]["import_time"], float)
    assert all(isinstance(row["import_time"], float) for row in rows.values())

    assert main(["plugins", "list"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:6] == ["PLUGIN", "DISTRIBUTION", "ORIGIN", "STATUS", "IMPORT", "HOOKS"]
    sloth = next(line for line in table if line.startswith("sloth "))
    assert sloth.split()[5].endswith("ms")


def test_a_blocked_plugin_has_no_import_time(
    site: Site,  # noqa: F811 - the fixture imported above
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    site.install("sloth-sched", {"sloth": "sloth_plugin"}, {"sloth_plugin": SLOTH})
    monkeypatch.setenv("JOBSCHED_DISABLE_PLUGINS", "sloth")
    monkeypatch.setattr(plugin_loading, "SLOW_IMPORT_SECONDS", 0)
    assert main(["plugins", "list", "--json"]) == 0
    out, err = capsys.readouterr()
    assert "'sloth'" not in err
    rows = {row["name"]: row for row in json.loads(out)}
    assert (rows["sloth"]["status"], rows["sloth"]["import_time"]) == ("blocked", None)


# ── 8. a plugin taking a built-in's name fails only what uses the name ─
COPYCAT = """
    from jobsched import hookimpl
    from jobsched_contrib import SleepJob

    @hookimpl
    def jobsched_register_job_types(register):
        register("email", SleepJob)
"""


def test_a_name_clash_fails_only_runs_that_use_the_name(tmp_path: Path) -> None:
    root = tmp_path / "site"
    root.mkdir()
    _distribution(root, "jobsched-copycat", "1.0", "copycat", "jobsched_copycat", COPYCAT)
    env = {"PYTHONPATH": str(root)}
    clash = (
        "job type 'email' is registered by two plugins: 'contrib' (from jobsched) and "
        "'copycat' (from jobsched-copycat)"
    )

    sleeper = write(
        tmp_path / "sleep.toml",
        '[[job]]\nid = "nap"\ntype = "sleep"\nargs = { name = "nap", seconds = 0.001 }\n',
    )
    ran = jobsched("run", str(sleeper), env=env)
    assert ran.returncode == 0, ran.stderr
    assert ran.stderr == ""

    mailer = write(tmp_path / "mail.toml", f'[[job]]\nid = "a"\n{EMAIL}')
    assert_bad_input(
        jobsched("run", str(mailer), env=env), clash, "JOBSCHED_DISABLE_PLUGINS=copycat"
    )
    fixed = jobsched("run", str(mailer), env={**env, "JOBSCHED_DISABLE_PLUGINS": "copycat"})
    assert fixed.returncode == 0, fixed.stderr

    listed = jobsched("jobs", "list", "--json", env=env)
    assert listed.returncode == 0
    emails = [row for row in json.loads(listed.stdout) if row["name"] == "email"]
    assert [row["plugin"] for row in emails] == ["contrib", "copycat"]
    assert all(clash in row["warning"] for row in emails)
    others = [row for row in json.loads(listed.stdout) if row["name"] != "email"]
    assert all(row["warning"] is None for row in others)
    assert f"jobsched: warning: {clash}" in listed.stderr

    table = jobsched("jobs", "list", env=env)
    rows = [line for line in table.stdout.splitlines() if line.startswith("email ")]
    assert len(rows) == 2 and all("warning: job type 'email'" in row for row in rows)

    plugins = {
        r["name"]: r for r in json.loads(jobsched("plugins", "list", "--json", env=env).stdout)
    }
    for name in ("contrib", "copycat"):
        assert plugins[name]["status"] == "loaded"
        assert "email" in plugins[name]["provides"]["job_types"]
        assert len(plugins[name]["warnings"]) == 1 and clash in plugins[name]["warnings"][0]
    assert plugins["fifo"]["warnings"] == []
    plugin_table = jobsched("plugins", "list", env=env).stdout
    assert "warning: job type 'email' is registered by two plugins" in plugin_table
