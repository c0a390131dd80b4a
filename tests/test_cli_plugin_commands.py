"""The command line as plugins see it: commands they add, one plugin manager, essentials.

Plugins are real distributions: a ``*.dist-info`` folder (METADATA and
entry_points.txt) and a module in a folder put on ``sys.path`` (in-process
runs of ``jobsched.cli.main``) or on ``PYTHONPATH`` (the installed
``jobsched`` console script in a subprocess).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jobsched import PluginManager, default_plugin_manager
from jobsched.cli import main

pytestmark = pytest.mark.timeout(60)

SCRIPT = shutil.which("jobsched", path=str(Path(sys.executable).parent))

# Adds `jobsched hello`: an argument, a handler, and the invocation's plugins.
GREETER = """
    from jobsched import hookimpl

    SEEN = {}

    @hookimpl
    def jobsched_register_commands(cli):
        parser = cli.add_command(
            "hello", help="greet someone", handler=hello, description="Greet NAME, loudly."
        )
        parser.add_argument("name")
        parser.add_argument("--exit", type=int, default=None)
        parser.set_defaults(plugins=cli.plugins)

    def hello(args):
        SEEN["plugins"] = args.plugins
        print(f"hello {args.name} ({len(args.plugins.names('strategies'))} strategies)")
        return args.exit
"""

# Adds `jobsched half`, then fails: its command must not run half-registered.
HALF = """
    from jobsched import SchedulingStrategy, hookimpl

    class Last(SchedulingStrategy):
        def key(self, job):
            return (-job.seq,)

    @hookimpl
    def jobsched_register_strategies(register):
        register("half-last", Last)

    @hookimpl
    def jobsched_register_commands(cli):
        cli.add_command("half", help="never finished", handler=lambda args: 0)
        raise ValueError("no commands today")
"""

FAILS_AT_ONCE = """
    from jobsched import hookimpl

    @hookimpl
    def jobsched_register_commands(cli):
        raise ValueError("no commands today")
"""

TAKES_RUN = """
    from jobsched import hookimpl

    @hookimpl
    def jobsched_register_commands(cli):
        cli.add_command("run", help="my own run", handler=lambda args: 0)
"""

TAKES_HELLO = """
    from jobsched import hookimpl

    @hookimpl
    def jobsched_register_commands(cli):
        cli.add_command("hello", help="another hello", handler=lambda args: 0)
"""

# A shared store that holds nothing: enough for `jobsched status` to take the
# shared path without a PostgreSQL server.
SHARED_STORE = """
    from jobsched import hookimpl
    from jobsched.store import SHARED_STORE_MEMBERS

    class EmptySharedStore:
        durable = True
        shared = True

        def __init__(self, url):
            self.url = url

        async def open(self, context):
            return None

        async def page(self, statuses, type, text, limit, offset):
            return [], 0

        async def counts(self):
            return {}

        async def schedules(self):
            return []

        async def workers(self):  # the registry: which due jobs no worker runs
            return [], 0.0

        async def unserved_types(self, known, scan):
            return {}

        async def close(self):
            pass

    async def _unused(self, *args, **kwargs):
        raise AssertionError("jobsched status only reads")

    # The rest of the SharedStore contract, never called by `jobsched status`.
    for _name in SHARED_STORE_MEMBERS:
        if not hasattr(EmptySharedStore, _name):
            setattr(EmptySharedStore, _name, _unused)

    @hookimpl
    def jobsched_register_stores(register):
        register("emptyshared", EmptySharedStore)
"""


def install(site: Path, plugin: str, module: str, source: str) -> None:
    """Install distribution ``jobsched-<plugin>`` with entry point `plugin` = `module`."""
    dist = f"jobsched-{plugin}"
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[jobsched]\n{plugin} = {module}\n")
    (site / f"{module}.py").write_text(textwrap.dedent(source))


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    for name in ("JOBSCHED_DISABLE_PLUGINS", "JOBSCHED_DISABLE_PLUGIN_AUTOLOAD"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "250")
    path = tmp_path / "site"
    path.mkdir()
    monkeypatch.syspath_prepend(str(path))
    default_plugin_manager.cache_clear()
    yield path
    default_plugin_manager.cache_clear()
    for name, module in list(sys.modules.items()):
        if str(path) in str(getattr(module, "__file__", "") or ""):
            del sys.modules[name]


def jobsched(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The installed console script, with `site` on its path."""
    assert SCRIPT is not None, "the jobsched console script is not installed"
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBSCHED_")}
    env.update(PYTHONPATH=str(site), COLUMNS="250")
    return subprocess.run(
        [SCRIPT, *args], capture_output=True, text=True, env=env, timeout=60, check=False
    )


def one_error_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("jobsched: error: ")
    return lines[0]


# ── a plugin adds a command ───────────────────────────────────────────
def test_a_plugin_command_runs_through_the_installed_jobsched(site: Path) -> None:
    install(site, "greeter", "jobsched_greeter", GREETER)
    result = jobsched(site, "hello", "ada")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("hello ada (")
    assert jobsched(site, "hello", "ada", "--exit", "4").returncode == 4

    listing = jobsched(site, "--help")
    assert listing.returncode == 0
    (line,) = [line for line in listing.stdout.splitlines() if line.strip().startswith("hello")]
    assert "greet someone (plugin greeter)" in line
    assert "Greet NAME, loudly." in jobsched(site, "hello", "--help").stdout

    usage = jobsched(site, "hello")
    assert usage.returncode == 2
    assert "hello: the following arguments are required: name" in one_error_line(usage.stderr)


def test_a_plugin_command_gets_the_invocations_plugin_manager(
    site: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    install(site, "greeter", "jobsched_greeter", GREETER)
    assert main(["hello", "bob"]) == 0
    assert capsys.readouterr().out.startswith("hello bob (")
    seen = sys.modules["jobsched_greeter"].SEEN
    assert isinstance(seen["plugins"], PluginManager)
    assert "greeter" in {r.name for r in seen["plugins"].records() if r.status == "loaded"}


def test_plugins_list_shows_the_commands_hook(
    site: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    install(site, "greeter", "jobsched_greeter", GREETER)
    assert main(["plugins", "list", "--json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["greeter"]["status"] == "loaded"
    assert rows["greeter"]["hooks"] == ["jobsched_register_commands"]


# ── a plugin that fails in the hook breaks nothing else ────────────────
def test_a_plugin_failing_in_the_commands_hook_is_reported_and_breaks_nothing_else(
    site: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    install(site, "greeter", "jobsched_greeter", GREETER)
    install(site, "half", "jobsched_half", HALF)

    assert main(["plugins", "list", "--json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["half"]["status"] == "failed"
    assert rows["half"]["error"] == (
        "jobsched_register_commands raised ValueError: no commands today"
    )
    assert rows["half"]["provides"] == {}, "as in any hook: nothing it registers is used"
    assert rows["greeter"]["status"] == "loaded"

    # Every other command works.
    assert main(["hello", "eve"]) == 0
    assert main(["jobs", "show", "sleep", "--json"]) == 0
    capsys.readouterr()

    # Its half-added command says what went wrong instead of running.
    assert main(["half"]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "plugin 'half' failed to add its commands: jobsched_register_commands raised " in line
    assert "ValueError: no commands today - disable it with JOBSCHED_DISABLE_PLUGINS=half" in line


def test_a_command_missing_because_its_plugin_failed_is_explained(site: Path) -> None:
    install(site, "half", "jobsched_half", FAILS_AT_ONCE)
    result = jobsched(site, "half")
    line = one_error_line(result.stderr)
    assert result.returncode == 2
    assert "invalid choice: 'half'" in line
    assert "plugin 'half' failed to add its commands" in line
    assert "JOBSCHED_DISABLE_PLUGINS=half" in line
    assert "Not available: plugin 'half' failed" in " ".join(
        jobsched(site, "--help").stdout.split()
    )


def test_a_plugin_cannot_take_a_builtin_command(
    site: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    install(site, "thief", "jobsched_thief", TAKES_RUN)
    assert main(["plugins", "list", "--json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["thief"]["status"] == "failed"
    assert rows["thief"]["error"] == (
        "jobsched_register_commands raised PluginError: command 'run' is one of jobsched's own"
    )
    # `jobsched run` is still jobsched's: it asks for its FILE.
    with pytest.raises(SystemExit) as exited:
        main(["run"])
    assert exited.value.code == 2
    assert "run: the following arguments are required: FILE" in capsys.readouterr().err


def test_two_plugins_adding_one_command_the_second_fails_naming_the_first(
    site: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    install(site, "greeter", "jobsched_greeter", GREETER)
    # Plugins load in name order: "sequel" comes after "greeter".
    install(site, "sequel", "jobsched_sequel", TAKES_HELLO)
    assert main(["plugins", "list", "--json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["sequel"]["error"] == (
        "jobsched_register_commands raised PluginError: command 'hello' is already added by "
        "plugin 'greeter' (from jobsched-greeter); disable one of them, e.g. "
        "JOBSCHED_DISABLE_PLUGINS=sequel"
    )
    assert main(["hello", "ann"]) == 0
    assert capsys.readouterr().out.startswith("hello ann (")


@pytest.mark.parametrize(
    ("call", "error"),
    [
        ('cli.add_command("Bad Name", help="x", handler=print)', "command name 'Bad Name' is not"),
        ('cli.add_command("ok", help="x", handler=None)', "command 'ok': handler None is not"),
    ],
)
def test_a_bad_command_fails_its_plugin(
    site: Path, capsys: pytest.CaptureFixture[str], call: str, error: str
) -> None:
    source = f"""
        from jobsched import hookimpl

        @hookimpl
        def jobsched_register_commands(cli):
            {call}
    """
    install(site, "bad", "jobsched_bad", source)
    assert main(["plugins", "list", "--json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["bad"]["status"] == "failed"
    assert error in rows["bad"]["error"]


def test_a_plugin_command_returning_something_else_than_an_exit_code_is_a_crash(
    site: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    install(site, "odd", "jobsched_odd", TAKES_HELLO.replace("lambda args: 0", 'lambda a: "ok"'))
    assert main(["hello"]) == 3
    assert "command 'hello' of plugin 'odd' returned 'ok', not an exit code" in (
        capsys.readouterr().err
    )


# ── one plugin manager per invocation ─────────────────────────────────
JOBFILE = """
    [[job]]
    id = "a"
    type = "sleep"
    args = { name = "a", seconds = 0 }
"""


@pytest.fixture
def count_managers(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many `PluginManager`s have been created (a list of one int)."""
    built = [0]
    original = PluginManager.__init__

    def counting(self: PluginManager, *args: Any, **kwargs: Any) -> None:
        built[0] += 1
        original(self, *args, **kwargs)

    monkeypatch.setattr(PluginManager, "__init__", counting)
    return built


def test_every_command_builds_exactly_one_plugin_manager(
    site: Path, tmp_path: Path, count_managers: list[int], capsys: pytest.CaptureFixture[str]
) -> None:
    install(site, "greeter", "jobsched_greeter", GREETER)
    install(site, "emptyshared", "jobsched_emptyshared", SHARED_STORE)
    jobfile = tmp_path / "jobs.toml"
    jobfile.write_text(textwrap.dedent(JOBFILE))
    store = f"sqlite:///{tmp_path / 'jobs.db'}"
    commands = [
        ["plugins", "list", "--json"],
        ["plugins", "list"],
        ["jobs", "list", "--json"],
        ["jobs", "show", "sleep"],
        ["schedule", "preview", "0 * * * *", "--json"],
        ["run", str(jobfile), "--json"],
        ["run", str(jobfile), "--store", store, "--json"],
        ["status", "--store", store, "--json"],
        ["status", "--store", "emptyshared://x", "--json"],  # the shared-store path
        ["hello", "zed"],
    ]
    for argv in commands:
        default_plugin_manager.cache_clear()  # a hidden default manager would count too
        count_managers[0] = 0
        assert main(argv) == 0, (argv, capsys.readouterr().err)
        assert count_managers[0] == 1, argv
    capsys.readouterr()


# ── essential plugins, from the command line ──────────────────────────
def test_disabling_an_essential_plugin_is_one_line_and_exit_code_2(
    site: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("JOBSCHED_DISABLE_PLUGINS", "fifo,exponential")
    assert main(["plugins", "list"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert one_error_line(err) == (
        "jobsched: error: JOBSCHED_DISABLE_PLUGINS names 'exponential': essential plugins "
        "cannot be disabled ('exponential' provides the default retry policy 'exponential'); "
        "remove it from the list"
    )


def test_plugins_list_table_marks_the_essential_plugins(
    site: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plugins", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    origin = {line.split()[0]: line.split()[3] for line in lines[2:-1] if line.strip()}
    assert {name for name, o in origin.items() if o == "essential"} == {
        "priority",
        "exponential",
        "async",
        "interval",
    }
    assert origin["fifo"] == "built-in"
    assert "(4 essential, cannot be disabled)" in lines[-1]


def test_the_plugin_guide_command_example_runs(
    site: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    guide = (Path(__file__).resolve().parents[1] / "docs" / "plugins.md").read_text()
    section = guide[guide.index("**Command hook:**") :]
    start = section.index("```python\n") + len("```python\n")
    example = section[start : section.index("```\n", start)]
    install(site, "drain", "jobsched_drain", example)
    assert main(["drain", "--store", f"sqlite:///{tmp_path / 'jobs.db'}"]) == 0
    assert "run the jobs of a store until none is left (plugin drain)" in (
        subprocess.run(
            [SCRIPT or "jobsched", "--help"],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(site), "COLUMNS": "250"},
            check=False,
        ).stdout
    )
