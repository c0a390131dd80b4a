"""The installed ``jobsched`` console script, run in a subprocess as a user would."""

from __future__ import annotations

import json
import os
import pty
import select
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = shutil.which("jobsched", path=str(Path(sys.executable).parent))
EMAIL = 'type = "email"\nargs = { to = "x@corp", subject = "hi", latency = 0.001 }\n'


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("JOBSCHED_") and k not in ("PYTHONPATH", "COLUMNS", "NO_COLOR")
    }
    env["COLUMNS"] = "250"
    env.update(extra or {})
    return env


def jobsched(
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    assert SCRIPT is not None, (
        f"the jobsched console script is not installed beside {sys.executable}"
    )
    return subprocess.run(
        [SCRIPT, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=_env(env),
        timeout=timeout,
        check=False,
    )


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


def assert_bad_input(result: subprocess.CompletedProcess[str], *expected: str) -> None:
    """Exit 2, nothing on stdout, one line on stderr holding every expected fragment."""
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("jobsched: error: ")
    assert "Traceback" not in result.stderr
    for fragment in expected:
        assert fragment in lines[0], (fragment, lines[0])


# ── third-party plugins on the path: real dist-info folders ─────────────
def _distribution(site: Path, dist: str, version: str, entry: str, module: str, code: str) -> None:
    package = site / module
    package.mkdir()
    (package / "__init__.py").write_text(textwrap.dedent(code))
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(f"[jobsched]\n{entry} = {module}\n")
    (info / "RECORD").write_text("")


GREET = """
    import attrs
    from jobsched import AsyncJob, hookimpl


    @attrs.define
    class GreetJob(AsyncJob):
        \"\"\"Greets someone, a few times.

        A third-party job type written with attrs fields.
        \"\"\"

        who: str
        times: int = 1

        async def run(self) -> str:
            return " ".join([f"hello {self.who}"] * self.times)


    @hookimpl
    def jobsched_register_job_types(register):
        register("greet", GreetJob)
"""


@pytest.fixture
def site(tmp_path: Path) -> dict[str, str]:
    """A folder on PYTHONPATH with a working plugin, one that fails to import,
    and one whose registration hook raises."""
    root = tmp_path / "site"
    root.mkdir()
    _distribution(root, "jobsched-greet", "1.2.3", "greet", "jobsched_greet", GREET)
    _distribution(
        root,
        "jobsched-broken",
        "0.0.1",
        "broken",
        "jobsched_broken",
        'raise RuntimeError("boom at import")\n',
    )
    _distribution(
        root,
        "jobsched-badhook",
        "0.2.0",
        "badhook",
        "jobsched_badhook",
        """
        from jobsched import hookimpl

        @hookimpl
        def jobsched_register_strategies(register):
            raise ValueError("no strategies today")
        """,
    )
    return {"PYTHONPATH": str(root)}


# ── --help, --version, python -m ───────────────────────────────────────
@pytest.mark.parametrize(
    "command",
    [
        [],
        ["run"],
        ["demo"],
        ["jobs"],
        ["jobs", "list"],
        ["jobs", "show"],
        ["plugins"],
        ["plugins", "list"],
    ],
    ids=lambda c: " ".join(c) or "jobsched",
)
def test_every_command_has_help(command: list[str]) -> None:
    result = jobsched(*command, "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: jobsched {' '.join(command)}".rstrip())
    assert result.stderr == ""


def test_help_lists_the_commands_and_exit_codes() -> None:
    out = jobsched("--help").stdout
    for command in ("run", "demo", "jobs", "plugins"):
        assert f"\n    {command} " in out
    assert "Exit codes" in out
    run_help = jobsched("run", "--help").stdout
    for option in ("--json", "--log-format", "--log-level", "FILE.toml"):
        assert option in run_help


def test_no_command_is_a_usage_error() -> None:
    assert_bad_input(jobsched(), "the following arguments are required: COMMAND")


def test_python_dash_m_runs_the_same_command_line() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "jobsched", "--version"],
        capture_output=True,
        text=True,
        env=_env(),
        check=False,
    )
    assert result.returncode == 0
    assert result.stdout.strip() == "jobsched 0.1.0"


# ── plugins list ───────────────────────────────────────────────────────
BUILTINS = {
    "aging": {"strategies": ["aging"]},
    "fifo": {"strategies": ["fifo"]},
    "priority": {"strategies": ["priority"]},
    "edf": {"strategies": ["edf"]},
    "async": {"executors": ["async"]},
    "thread": {"executors": ["thread"]},
    "process": {"executors": ["process"]},
    "exponential": {"retry_policies": ["exponential"]},
    "fixed": {"retry_policies": ["fixed"]},
    "none": {"retry_policies": ["none"]},
    "contrib": {"job_types": ["csv-export", "email", "flaky-upload", "prime-count", "sleep"]},
}


def test_plugins_list_json_shows_builtins_and_third_party_plugins(site: dict[str, str]) -> None:
    result = jobsched("plugins", "list", "--json", env=site)
    assert result.returncode == 0, result.stderr
    rows = {row["name"]: row for row in json.loads(result.stdout)}
    for row in rows.values():
        assert set(row) == {
            "name",
            "distribution",
            "version",
            "builtin",
            "essential",
            "status",
            "hooks",
            "provides",
            "error",
            "import_time",
            "warnings",
        }
        assert row["import_time"] is None or isinstance(row["import_time"], float)
    for name, provides in BUILTINS.items():
        row = rows[name]
        assert row["builtin"] is True
        assert row["distribution"] == "jobsched"
        assert row["status"] == "loaded"
        assert row["provides"] == provides
        assert row["error"] is None
        assert row["essential"] is (name in {"priority", "exponential", "async", "interval"})
    assert rows["structlog"]["hooks"] == ["jobsched_scheduler_started"]
    assert rows["greet"] == {
        "name": "greet",
        "distribution": "jobsched-greet",
        "version": "1.2.3",
        "builtin": False,
        "essential": False,
        "status": "loaded",
        "hooks": ["jobsched_register_job_types"],
        "provides": {"job_types": ["greet"]},
        "error": None,
        "import_time": rows["greet"]["import_time"],
        "warnings": [],
    }
    broken = rows["broken"]
    assert broken["status"] == "failed"
    assert broken["builtin"] is False
    assert broken["version"] == "0.0.1"
    assert "RuntimeError: boom at import" in broken["error"]
    badhook = rows["badhook"]
    assert badhook["status"] == "failed"
    assert "ValueError: no strategies today" in badhook["error"]


def test_plugins_list_table_never_crashes_on_broken_plugins(site: dict[str, str]) -> None:
    result = jobsched("plugins", "list", env=site)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    header = lines[0].split()
    assert header[:6] == ["PLUGIN", "DISTRIBUTION", "ORIGIN", "STATUS", "IMPORT", "HOOKS"]
    greet = next(line for line in lines if line.startswith("greet "))
    assert "jobsched-greet 1.2.3" in greet
    assert "third-party" in greet
    assert "loaded" in greet
    assert "job types: greet" in greet
    broken = next(line for line in lines if line.startswith("broken "))
    assert "failed" in broken
    assert "boom at import" in result.stdout
    aging = next(line for line in lines if line.startswith("aging "))
    assert "built-in" in aging
    assert "strategies: aging" in aging
    assert lines[-1].endswith("loaded, 0 blocked, 2 failed")


def test_plugins_list_shows_blocked_plugins(site: dict[str, str]) -> None:
    env = {**site, "JOBSCHED_DISABLE_PLUGINS": "broken,fifo"}
    rows = {r["name"]: r for r in json.loads(jobsched("plugins", "list", "--json", env=env).stdout)}
    assert rows["broken"]["status"] == "blocked"
    assert rows["fifo"]["status"] == "blocked"
    assert rows["greet"]["status"] == "loaded"

    env = {**site, "JOBSCHED_DISABLE_PLUGIN_AUTOLOAD": "1"}
    rows = {r["name"]: r for r in json.loads(jobsched("plugins", "list", "--json", env=env).stdout)}
    assert rows["greet"]["status"] == "blocked"
    assert "JOBSCHED_DISABLE_PLUGIN_AUTOLOAD" in rows["greet"]["error"]
    assert rows["contrib"]["status"] == "loaded"  # built-ins still load


# ── jobs list / show ───────────────────────────────────────────────────
def test_jobs_list_json(site: dict[str, str]) -> None:
    result = jobsched("jobs", "list", "--json", env=site)
    assert result.returncode == 0, result.stderr
    rows = {row["name"]: row for row in json.loads(result.stdout)}
    assert sorted(rows) == ["csv-export", "email", "flaky-upload", "greet", "prime-count", "sleep"]
    assert rows["email"] == {
        "name": "email",
        "plugin": "contrib",
        "class": "jobsched_contrib.jobs.EmailJob",
        "model": "async",
        "summary": "I/O-bound: awaits the network, so it belongs on the event loop.",
        "doc": "I/O-bound: awaits the network, so it belongs on the event loop.",
        "arguments": [
            {"name": "to", "type": "str", "required": True, "default": None},
            {"name": "subject", "type": "str", "required": True, "default": None},
            {"name": "latency", "type": "float", "required": False, "default": 0.05},
        ],
        "warning": None,
    }
    assert rows["csv-export"]["model"] == "thread"
    assert rows["prime-count"]["model"] == "process"
    assert rows["greet"]["plugin"] == "greet"
    assert rows["greet"]["summary"] == "Greets someone, a few times."
    assert rows["greet"]["arguments"] == [
        {"name": "who", "type": "str", "required": True, "default": None},
        {"name": "times", "type": "int", "required": False, "default": 1},
    ]


def test_jobs_list_table(site: dict[str, str]) -> None:
    result = jobsched("jobs", "list", env=site)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["TYPE", "PLUGIN", "MODEL", "ARGUMENTS", "DESCRIPTION"]
    email = next(line for line in lines if line.startswith("email "))
    for part in ("contrib", "async", "to: str, subject: str, latency: float = 0.05", "I/O-bound"):
        assert part in email
    greet = next(line for line in lines if line.startswith("greet "))
    assert "who: str, times: int = 1" in greet
    assert "Greets someone, a few times." in greet


def test_jobs_show(site: dict[str, str]) -> None:
    result = jobsched("jobs", "show", "greet", env=site)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.startswith("greet  (plugin greet)")
    assert "jobsched_greet.GreetJob" in out
    assert "A third-party job type written with attrs fields." in out
    assert any(line.split() == ["times", "int", "1"] for line in out.splitlines())
    assert any(line.split() == ["who", "str", "(required)"] for line in out.splitlines())

    as_json = json.loads(jobsched("jobs", "show", "csv-export", "--json").stdout)
    assert as_json["name"] == "csv-export"
    assert as_json["arguments"][1] == {
        "name": "rows",
        "type": "int",
        "required": False,
        "default": 1000,
    }


def test_jobs_show_unknown_name() -> None:
    assert_bad_input(
        jobsched("jobs", "show", "emial"),
        "unknown job type 'emial'",
        "did you mean 'email'?",
        "registered: csv-export, email",
    )


# ── run ────────────────────────────────────────────────────────────────
def test_run_prints_one_row_per_job_and_exits_0(tmp_path: Path) -> None:
    path = write(
        tmp_path / "ok.toml",
        f"""
        [scheduler]
        strategy = "fifo"
        workers = 2

        [[job]]
        id = "hello"
        {EMAIL}
        [[job]]
        id = "export"
        type = "csv-export"
        args = {{ table = "orders", rows = 42 }}
        """,
    )
    result = jobsched("run", str(path))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[0].split() == [
        "ID",
        "TYPE",
        "STATUS",
        "ATTEMPTS",
        "STARTED",
        "DURATION",
        "RESULT",
        "/",
        "ERROR",
    ]
    assert lines[2].split()[:4] == ["hello", "email", "completed", "1"]
    assert lines[2].split()[-2:] == ["to", "x@corp"]
    assert lines[3].split()[:4] == ["export", "csv-export", "completed", "1"]
    assert lines[3].split()[-1] == "42"
    assert "2 jobs in " in lines[-1]
    assert "2 completed" in lines[-1]
    assert "(2 workers, fifo strategy)" in lines[-1]
    assert "running jobs:" not in result.stdout  # no live progress when not a terminal


def test_run_json_summary(tmp_path: Path) -> None:
    path = write(
        tmp_path / "mixed.toml",
        f"""
        [scheduler]
        seed = 1

        [[job]]
        id = "fine"
        {EMAIL}
        [[job]]
        id = "broken"
        type = "flaky-upload"
        args = {{ path = "s3://b/x", failures = 5 }}
        retry = {{ policy = "fixed", max_retries = 1, seconds = 0.001 }}

        [[job]]
        id = "child"
        {EMAIL}depends_on = ["broken"]
        """,
    )
    result = jobsched("run", str(path), "--json")
    assert result.returncode == 1, result.stderr
    doc = json.loads(result.stdout)
    assert doc["ok"] is False
    assert doc["exit_code"] == 1
    assert doc["file"] == str(path)
    assert doc["strategy"] == "priority"
    assert doc["workers"] == 4
    assert doc["counts"] == {
        "pending": 0,
        "running": 0,
        "retry_wait": 0,
        "completed": 1,
        "failed": 1,
        "timed_out": 0,
        "cancelled": 1,
        "interrupted": 0,
    }
    jobs = {job["id"]: job for job in doc["jobs"]}
    assert [job["id"] for job in doc["jobs"]] == ["fine", "broken", "child"]
    assert jobs["fine"]["result"] == "sent to x@corp"
    assert jobs["fine"]["error"] is None
    assert jobs["broken"]["status"] == "failed"
    assert jobs["broken"]["attempts"] == 2
    assert jobs["broken"]["error"] == "ConnectionError: attempt 2: connection reset"
    assert jobs["broken"]["result"] is None
    assert jobs["child"]["status"] == "cancelled"
    assert jobs["child"]["error"] == "upstream 'broken' failed"
    assert jobs["child"]["duration"] is None
    assert jobs["child"]["attempts"] == 0
    assert set(jobs["fine"]) == {
        "id",
        "type",
        "job_id",
        "status",
        "attempts",
        "duration",
        "result",
        "error",
        "recurring",
        "start_order",
        "will_run_again",
    }


@pytest.mark.parametrize(
    ("entry", "status"),
    [
        (
            'type = "sleep"\nargs = { name = "s", seconds = 10.0 }\n'
            'timeout = "20ms"\nretry = "none"\n',
            "timed_out",
        ),
        (f"{EMAIL}cancel_after = 0\n", "cancelled"),
        (
            'type = "sleep"\nargs = { name = "s", seconds = 10.0 }\ntimeout = false\n'
            'cancel_after = "10ms"\n',
            "cancelled",
        ),
    ],
    ids=["timed-out", "cancelled-before-running", "cancelled-while-running"],
)
def test_run_exits_1_when_a_job_does_not_complete(tmp_path: Path, entry: str, status: str) -> None:
    path = write(tmp_path / "f.toml", f'[[job]]\nid = "j"\n{entry}\n[[job]]\nid = "ok"\n{EMAIL}')
    result = jobsched("run", str(path), "--json")
    assert result.returncode == 1, result.stderr
    jobs = {job["id"]: job for job in json.loads(result.stdout)["jobs"]}
    assert jobs["j"]["status"] == status
    assert jobs["ok"]["status"] == "completed"


def test_run_dependencies_in_any_order_keep_the_file_order(tmp_path: Path) -> None:
    path = write(
        tmp_path / "deps.toml",
        f"""
        [scheduler]
        strategy = "fifo"
        workers = 1

        [[job]]
        id = "report"
        {EMAIL}depends_on = ["export", "primes"]

        [[job]]
        id = "export"
        type = "csv-export"
        args = {{ table = "t", rows = 1 }}
        depends_on = ["primes"]

        [[job]]
        id = "primes"
        type = "prime-count"
        args = {{ n = 100 }}

        [[job]]
        id = "solo"
        {EMAIL}
        """,
    )
    result = jobsched("run", str(path), "--json")
    assert result.returncode == 0, result.stderr
    jobs = json.loads(result.stdout)["jobs"]
    assert [j["id"] for j in jobs] == ["report", "export", "primes", "solo"]
    assert all(j["status"] == "completed" for j in jobs)
    assert {j["id"]: j["result"] for j in jobs}["primes"] == 25
    # Submitted after their dependencies, otherwise in file order: job ids say so.
    order = sorted(jobs, key=lambda j: int(j["job_id"].split("-")[1]))
    assert [j["id"] for j in order] == ["primes", "export", "report", "solo"]


def test_run_recurring_times_and_until(tmp_path: Path) -> None:
    # `until` counts from the run's start: it is far above start_in + every, so
    # a slow scheduler start (a busy machine) still leaves the first fire time.
    path = write(
        tmp_path / "rec.toml",
        f"""
        [[recurring]]
        id = "beat"
        {EMAIL}every = "10ms"
        times = 3

        [[recurring]]
        id = "tick"
        {EMAIL}every = 0.05
        until = "500ms"
        start_in = "1ms"
        """,
    )
    result = jobsched("run", str(path), "--json")
    assert result.returncode == 0, result.stderr
    jobs = json.loads(result.stdout)["jobs"]
    beats = [j for j in jobs if j["recurring"] == "beat"]
    assert [j["id"] for j in beats] == ["beat#1", "beat#2", "beat#3"]
    ticks = [j for j in jobs if j["recurring"] == "tick"]
    assert ticks, "until must let the schedule fire before it ends"
    assert [j["id"] for j in ticks] == [f"tick#{i}" for i in range(1, len(ticks) + 1)]
    assert all(j["status"] == "completed" for j in jobs)


def test_run_a_third_party_job_type(tmp_path: Path, site: dict[str, str]) -> None:
    path = write(
        tmp_path / "greet.toml",
        """
        [[job]]
        id = "hi"
        type = "greet"
        args = { who = "world", times = 2 }
        priority = "high"
        """,
    )
    result = jobsched("run", str(path), "--json", env=site)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["jobs"][0]["result"] == "hello world hello world"

    bad = write(tmp_path / "bad.toml", '[[job]]\nid = "hi"\ntype = "greet"\nargs = { who = 3 }\n')
    assert_bad_input(
        jobsched("run", str(bad), env=site),
        "bad.toml:4:",
        "job 'hi' (greet): argument 'who' must be str, got integer 3",
    )


def test_an_unknown_type_names_the_plugins_that_failed(
    tmp_path: Path, site: dict[str, str]
) -> None:
    path = write(tmp_path / "f.toml", '[[job]]\nid = "a"\ntype = "resize"\n')
    assert_bad_input(
        jobsched("run", str(path), env=site),
        "unknown job type 'resize'",
        "broken (RuntimeError: boom at import",
        "JOBSCHED_DISABLE_PLUGINS=broken",
    )


def test_run_logs_through_structlog(tmp_path: Path) -> None:
    path = write(tmp_path / "f.toml", f'[[job]]\nid = "a"\n{EMAIL}')
    result = jobsched("run", str(path), "--json", "--log-format", "json", "--log-level", "info")
    assert result.returncode == 0, result.stderr
    json.loads(result.stdout)  # stdout stays pure JSON: logs go to stderr
    events = [json.loads(line) for line in result.stderr.splitlines()]
    transitions = [(e["old"], e["new"]) for e in events if e["event"] == "job.transition"]
    assert transitions == [("pending", "running"), ("running", "completed")]
    assert all(e["level"] == "info" and e["job_name"] == "a" for e in events)

    console = jobsched("run", str(path), "--log-level", "INFO")
    assert console.returncode == 0
    assert "job.transition" in console.stderr
    assert not console.stderr.lstrip().startswith("{")

    quiet = jobsched("run", str(path), "--log-level", "warning")
    assert quiet.stderr == ""


def test_run_shows_live_progress_only_on_a_terminal(tmp_path: Path) -> None:
    path = write(
        tmp_path / "f.toml",
        '[[job]]\nid = "nap"\ntype = "sleep"\nargs = { name = "nap", seconds = 0.05 }\n',
    )
    assert SCRIPT is not None
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [SCRIPT, "run", str(path)],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env=_env(),
        close_fds=True,
    )
    os.close(follower)
    output = b""
    while True:
        ready, _, _ = select.select([leader], [], [], 30)
        if not ready:
            break
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        output += chunk
    os.close(leader)
    assert process.wait(timeout=30) == 0
    text = output.decode("utf-8", "replace")
    assert "running jobs:" in text
    assert "elapsed" in text
    assert "nap" in text and "completed" in text


def test_ctrl_c_cancels_the_run_and_still_prints_the_summary(tmp_path: Path) -> None:
    path = write(
        tmp_path / "f.toml",
        """
        [[job]]
        id = "forever"
        type = "sleep"
        args = { name = "forever", seconds = 60.0 }
        timeout = false

        [[job]]
        id = "after"
        type = "email"
        args = { to = "x", subject = "y" }
        depends_on = ["forever"]
        """,
    )
    assert SCRIPT is not None
    process = subprocess.Popen(
        [SCRIPT, "run", str(path), "--log-format", "json", "--log-level", "info"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    assert process.stderr is not None
    for line in process.stderr:  # wait until the job is running: no timing guess
        if json.loads(line).get("new") == "running":
            break
    process.send_signal(signal.SIGINT)
    stdout, _ = process.communicate(timeout=30)
    assert process.returncode == 130
    lines = stdout.splitlines()
    assert any(line.split()[:3] == ["forever", "sleep", "cancelled"] for line in lines)
    assert any(line.split()[:3] == ["after", "email", "cancelled"] for line in lines)
    assert lines[-1].startswith("interrupted: 2 jobs in ")


# ── bad input: one line on stderr, exit 2, never a traceback ───────────
BAD_FILES = {
    "invalid-toml": ('[[job]]\nid = "a"\ntype = = "email"\n', ["bad.toml:3:8: invalid TOML"]),
    "unknown-key": (
        f'[[job]]\nid = "a"\n{EMAIL}prio = "high"\n',
        ["bad.toml:5:", "job 'a': unknown key 'prio'; did you mean 'priority'?"],
    ),
    "unknown-table": (
        "[schedular]\nworkers = 2\n",
        ["bad.toml:1:", "unknown table or key 'schedular'", "did you mean 'scheduler'?"],
    ),
    "unknown-scheduler-key": (
        "[scheduler]\nworker = 2\n",
        ["bad.toml:2:", "[scheduler]: unknown key 'worker'; did you mean 'workers'?"],
    ),
    "scheduler-not-a-table": (
        "scheduler = 3\n",
        ["bad.toml:1:", "'scheduler' must be a table: write [scheduler]"],
    ),
    "job-not-an-array": (
        '[job]\nid = "a"\n',
        ["bad.toml:1:", "'job' must be an array of tables: write [[job]]"],
    ),
    "unknown-job-type": (
        '[[job]]\nid = "a"\ntype = "emial"\n',
        ["bad.toml:3:", "job 'a': unknown job type 'emial'; did you mean 'email'?"],
    ),
    "unknown-strategy": (
        '[scheduler]\nstrategy = "priorty"\n',
        [
            "bad.toml:2:",
            "unknown strategy 'priorty'; did you mean 'priority'?",
            "registered: aging",
        ],
    ),
    "unknown-retry-policy": (
        f'[[job]]\nid = "a"\n{EMAIL}retry = {{ policy = "exponentail" }}\n',
        ["bad.toml:5:", "unknown retry policy 'exponentail'; did you mean 'exponential'?"],
    ),
    "unknown-retry-option": (
        f'[[job]]\nid = "a"\n{EMAIL}retry = {{ policy = "fixed", second = 1 }}\n',
        ["bad.toml:5:", "retry policy 'fixed' has no option 'second'; did you mean 'seconds'?"],
    ),
    "wrong-argument-type": (
        '[[job]]\nid = "a"\ntype = "csv-export"\nargs = { table = "t", rows = "many" }\n',
        ["bad.toml:4:", "job 'a' (csv-export): argument 'rows' must be int, got string 'many'"],
    ),
    "missing-argument": (
        '[[job]]\nid = "a"\ntype = "csv-export"\nargs = { rows = 3 }\n',
        ["job 'a' (csv-export): missing required argument 'table' (str)"],
    ),
    "unknown-argument": (
        '[[job]]\nid = "a"\ntype = "email"\nargs = { to = "x", subject = "y", latncy = 1 }\n',
        ["job 'a' (email): unknown argument 'latncy'; did you mean 'latency'?"],
    ),
    "option-inside-args": (
        '[[job]]\nid = "a"\ntype = "email"\nargs = { to = "x", subject = "y", timeout = 1 }\n',
        ["unknown argument 'timeout'; 'timeout' is an option: set it beside 'args'"],
    ),
    "bad-priority": (
        f'[[job]]\nid = "a"\n{EMAIL}priority = "urgent"\n',
        ["bad.toml:5:", "job 'a': priority must be one of low, medium, high, critical"],
    ),
    "bad-timeout": (
        f'[[job]]\nid = "a"\n{EMAIL}timeout = 0\n',
        ["job 'a': timeout must be positive, got 0 (or false for no timeout)"],
    ),
    "unknown-dependency": (
        f'[[job]]\nid = "export"\n{EMAIL}\n[[job]]\nid = "b"\n{EMAIL}depends_on = ["exprot"]\n',
        [
            "bad.toml:10:",
            "job 'b': depends_on 'exprot' is not a [[job]] id",
            "did you mean 'export'?",
        ],
    ),
    "dependency-on-recurring": (
        f'[[job]]\nid = "a"\n{EMAIL}depends_on = ["h"]\n'
        f'[[recurring]]\nid = "h"\n{EMAIL}every = 1\ntimes = 1\n',
        ["depends_on 'h' is a [[recurring]] entry"],
    ),
    "dependency-cycle": (
        f'[[job]]\nid = "a"\n{EMAIL}depends_on = ["c"]\n'
        f'[[job]]\nid = "b"\n{EMAIL}depends_on = ["a"]\n'
        f'[[job]]\nid = "c"\n{EMAIL}depends_on = ["b"]\n'
        f'[[job]]\nid = "d"\n{EMAIL}',
        ["dependency cycle: a -> c -> b -> a"],
    ),
    "self-dependency": (
        f'[[job]]\nid = "a"\n{EMAIL}depends_on = ["a"]\n',
        ["dependency cycle: a -> a"],
    ),
    "duplicate-id": (
        f'[[job]]\nid = "a"\n{EMAIL}\n[[recurring]]\nid = "a"\n{EMAIL}every = 1\ntimes = 1\n',
        ["bad.toml:7:", "duplicate id 'a' (first used at line 1)"],
    ),
    "zero-interval": (
        f'[[recurring]]\nid = "h"\n{EMAIL}every = "0s"\ntimes = 2\n',
        ["bad.toml:5:", "recurring 'h': every must be positive, got '0s'"],
    ),
    "negative-interval": (
        f'[[recurring]]\nid = "h"\n{EMAIL}every = -1\ntimes = 2\n',
        ["recurring 'h': every must be positive, got -1"],
    ),
    "bad-duration": (
        f'[[recurring]]\nid = "h"\n{EMAIL}every = "1 fortnight"\ntimes = 2\n',
        ['every must be a duration like "100ms", "2s", "5m"'],
    ),
    "endless-recurring": (
        f'[[recurring]]\nid = "h"\n{EMAIL}every = "1s"\n',
        ["recurring 'h': needs `times` or `until`"],
    ),
    "missing-id": (f"[[job]]\n{EMAIL}", ["[[job]] #1: missing required key 'id'"]),
    "zero-workers": (
        "[scheduler]\nworkers = 0\n",
        ["workers must be a positive integer, got integer 0"],
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_job_files(tmp_path: Path, case: str) -> None:
    text, expected = BAD_FILES[case]
    path = tmp_path / "bad.toml"
    path.write_text(text)
    assert_bad_input(jobsched("run", str(path)), *expected)


def test_bad_files_run_nothing(tmp_path: Path) -> None:
    # The second job is bad: the first must not run. At log level info a job
    # that ran would log its transitions on stderr beside the error.
    path = write(
        tmp_path / "bad.toml",
        f"""
        [[job]]
        id = "first"
        {EMAIL}
        [[job]]
        id = "second"
        type = "csv-export"
        args = {{ table = 1 }}
        """,
    )
    result = jobsched("run", str(path), "--log-level", "info")
    assert_bad_input(result, "argument 'table' must be str")


def test_missing_and_undecodable_files(tmp_path: Path) -> None:
    assert_bad_input(
        jobsched("run", str(tmp_path / "nope.toml")),
        "nope.toml: cannot read the job file: No such file or directory",
    )
    binary = tmp_path / "bin.toml"
    binary.write_bytes(b"\xff\xfe\x00")
    assert_bad_input(jobsched("run", str(binary)), "bin.toml: not UTF-8 text")


# ── demo ───────────────────────────────────────────────────────────────
DEMO_OUTCOMES = {
    "export": ("completed", 1, 4200),
    "primes": ("completed", 1, 17984),
    "report": ("completed", 1, "sent to finance@corp"),
    "alert": ("completed", 1, "sent to oncall@corp"),
    "flaky": ("completed", 3, "uploaded"),
    "dead": ("failed", 4, None),
    "slow": ("timed_out", 1, None),
    "notify": ("cancelled", 0, None),
    "later": ("cancelled", 0, None),
    "heartbeat#1": ("completed", 1, "sent to ops@corp"),
    "heartbeat#2": ("completed", 1, "sent to ops@corp"),
    "heartbeat#3": ("completed", 1, "sent to ops@corp"),
}


def test_demo_runs_the_reference_demo() -> None:
    result = jobsched("demo", "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    outcomes = {j["id"]: (j["status"], j["attempts"], j["result"]) for j in doc["jobs"]}
    assert outcomes == DEMO_OUTCOMES
    errors = {j["id"]: j["error"] for j in doc["jobs"]}
    assert errors["dead"] == "ConnectionError: attempt 4: connection reset"
    assert errors["slow"] == "timed out after 0.1s"
    assert errors["notify"] == "upstream 'dead' failed"
    assert doc["peak_running"] == 3
    assert doc["workers"] == 3


def test_demo_table() -> None:
    result = jobsched("demo")
    assert result.returncode == 0, result.stderr
    rows = {line.split()[0]: line.split() for line in result.stdout.splitlines() if line.strip()}
    for job_id, (status, attempts, _) in DEMO_OUTCOMES.items():
        assert rows[job_id][2:4] == [status, str(attempts)]
    assert result.stdout.splitlines()[-1].startswith("12 jobs in ")


def test_run_examples_demo_toml_exits_1_because_the_demo_fails_on_purpose() -> None:
    result = jobsched("run", "examples/demo.toml", "--json", cwd=ROOT)
    assert result.returncode == 1, result.stderr
    outcomes = {
        j["id"]: (j["status"], j["attempts"], j["result"])
        for j in json.loads(result.stdout)["jobs"]
    }
    assert outcomes == DEMO_OUTCOMES


def test_shipped_demo_is_examples_demo_toml() -> None:
    shipped = ROOT / "core" / "jobsched" / "cli" / "demo.toml"
    assert shipped.read_bytes() == (ROOT / "examples" / "demo.toml").read_bytes()


def test_two_plugins_registering_one_name(tmp_path: Path) -> None:
    root = tmp_path / "site"
    root.mkdir()
    _distribution(
        root,
        "jobsched-copycat",
        "1.0",
        "copycat",
        "jobsched_copycat",
        """
        from jobsched import hookimpl
        from jobsched_contrib import SleepJob

        @hookimpl
        def jobsched_register_job_types(register):
            register("email", SleepJob)
        """,
    )
    env = {"PYTHONPATH": str(root)}
    listed = jobsched("plugins", "list", env=env)
    assert listed.returncode == 0
    assert "jobsched: warning: job type 'email' is registered by two plugins" in listed.stderr
    assert "'copycat' (from jobsched-copycat)" in listed.stderr
    path = write(tmp_path / "f.toml", f'[[job]]\nid = "a"\n{EMAIL}')
    assert_bad_input(
        jobsched("run", str(path), env=env),
        "job type 'email' is registered by two plugins",
        "'contrib' (from jobsched)",
    )
