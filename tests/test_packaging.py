"""The built wheel: three import packages, py.typed, every built-in entry point, installable."""

from __future__ import annotations

import ast
import configparser
import json
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[1]
SOURCE_ROOTS = {
    "jobsched": ROOT / "core" / "jobsched",
    "jobsched_plugins": ROOT / "plugins" / "jobsched_plugins",
    "jobsched_contrib": ROOT / "contrib_jobs" / "jobsched_contrib",
}


def run(*cmd: str | Path, cwd: Path | None = None) -> str:
    """Run a command; on failure, fail the test with its whole output."""
    proc = subprocess.run(
        [str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        pytest.fail(
            f"{' '.join(map(str, cmd))} exited {proc.returncode}\n"
            f"--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
        )
    return proc.stdout


def pyproject_entry_points() -> dict[str, str]:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return dict(tomllib.load(f)["project"]["entry-points"]["jobsched"])


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    run(sys.executable, "-m", "build", "--wheel", "--outdir", out, ROOT)
    (built,) = out.glob("jobsched-*-py3-none-any.whl")
    return built


def test_wheel_carries_the_three_packages_typed(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    for package, source in SOURCE_ROOTS.items():
        assert f"{package}/__init__.py" in names
        assert f"{package}/py.typed" in names, f"{package} is not marked typed"
        modules = {f"{package}/{p.relative_to(source).as_posix()}" for p in source.rglob("*.py")}
        assert modules <= names, f"missing from the wheel: {sorted(modules - names)}"
    tops = {n.split("/", 1)[0] for n in names if not n.split("/", 1)[0].endswith(".dist-info")}
    assert tops == set(SOURCE_ROOTS), "no source-root folder (core/, plugins/) leaks as a package"


def test_wheel_carries_the_dashboards_templates_and_static_files(wheel: Path) -> None:
    web = SOURCE_ROOTS["jobsched"] / "web"
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    shipped = {
        f"jobsched/web/{p.relative_to(web).as_posix()}"
        for folder in ("templates", "static")
        for p in (web / folder).rglob("*")
        if p.is_file()
    }
    assert {"jobsched/web/static/htmx.min.js", "jobsched/web/templates/base.html"} <= shipped
    assert shipped <= names, f"missing from the wheel: {sorted(shipped - names)}"


def test_wheel_lists_every_builtin_entry_point(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        (ep_file,) = [n for n in zf.namelist() if n.endswith(".dist-info/entry_points.txt")]
        parser = configparser.ConfigParser(delimiters=("=",))
        parser.optionxform = str  # type: ignore[assignment,method-assign]  # keep names' case
        parser.read_string(zf.read(ep_file).decode())
        names = set(zf.namelist())
        (metadata_file,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        metadata = zf.read(metadata_file).decode()
    declared = pyproject_entry_points()
    assert dict(parser["jobsched"]) == declared
    assert set(declared) >= {  # the built-ins, at least
        "fifo",
        "priority",
        "aging",
        "edf",
        "async",
        "thread",
        "process",
        "exponential",
        "fixed",
        "none",
        "structlog",
    }
    for name, target in declared.items():
        path = target.split(":", 1)[0].replace(".", "/")
        module = {f"{path}.py", f"{path}/__init__.py"} & names  # a module or a package
        assert module, f"entry point {name} = {target} names a module not in the wheel"
    requires = sorted(
        line.split(":", 1)[1].strip().split(">")[0].split("=")[0].split("<")[0].strip()
        for line in metadata.splitlines()
        if line.startswith("Requires-Dist:") and "extra ==" not in line
    )
    assert {"attrs", "pluggy", "structlog"} <= set(requires), "the kernel's runtime dependencies"
    assert "Requires-Python: >=3.10" in metadata


def test_wheel_installs_into_a_fresh_venv_and_finds_the_builtins(
    wheel: Path, tmp_path: Path
) -> None:
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", venv)
    python = venv / "bin" / "python"
    run(python, "-m", "pip", "install", "--quiet", wheel)
    probe = textwrap.dedent(
        """
        import asyncio, json
        import jobsched, jobsched_contrib, jobsched_plugins
        from jobsched import JobScheduler, PluginManager

        async def double(x):
            return 2 * x

        async def main():
            scheduler = JobScheduler("aging", num_workers=2)
            async with scheduler:
                job_id = scheduler.submit(double, 21)
                await scheduler.join()
            return scheduler.get(job_id).result

        pm = PluginManager()
        result = asyncio.run(main())
        print(json.dumps({
            "files": [m.__file__ for m in (jobsched, jobsched_plugins, jobsched_contrib)],
            "records": [r.to_json() for r in pm.records()],
            "strategies": pm.names("strategies"),
            "executors": pm.names("executors"),
            "retry_policies": pm.names("retry_policies"),
            "result": result,
        }))
        """
    )
    # -I: no PYTHONPATH, no user site, no current directory: only what the venv installed.
    report = json.loads(run(python, "-I", "-c", probe, cwd=tmp_path))
    site = str(venv / "lib")
    assert all(f.startswith(site) for f in report["files"]), report["files"]
    builtins = {r["name"]: r for r in report["records"] if r["builtin"]}
    assert set(builtins) == set(pyproject_entry_points())
    assert all(r["distribution"] == "jobsched" for r in builtins.values())
    # Without their extras the observability plugins are failed rows that say
    # how to install them; every other built-in loads.
    for name, extra in (("prometheus", "jobsched[prometheus]"), ("otel", "jobsched[otel]")):
        assert builtins[name]["status"] == "failed"
        assert f"pip install '{extra}'" in builtins[name]["error"]
    assert all(
        r["status"] == "loaded" for n, r in builtins.items() if n not in {"prometheus", "otel"}
    )
    assert {"aging", "edf", "fifo", "priority"} <= set(report["strategies"])
    assert {"async", "process", "thread"} <= set(report["executors"])
    assert {"exponential", "fixed", "none"} <= set(report["retry_policies"])
    assert report["result"] == 42
    # `jobsched web` is listed without its extra, and says how to get it.
    web = subprocess.run(
        [venv / "bin" / "jobsched", "web", "--store", f"sqlite:///{tmp_path / 'jobs.db'}"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert web.returncode == 2, web.stderr
    assert web.stderr.startswith("jobsched: error: jobsched web needs starlette, jinja2, uvicorn")
    assert "pip install 'jobsched[web]'" in web.stderr


def test_the_kernel_imports_only_pluggy_attrs_structlog() -> None:
    """The distribution may depend on more (the CLI's rich, the cron plugin's cronsim);
    the kernel may not (DESIGN section 5)."""
    allowed = set(sys.stdlib_module_names) | {"jobsched", "pluggy", "attrs"}
    allowed.add("structlog")
    # Not cli/ and jobfile/ (the application), nor _pytest_plugin.py (the
    # fixtures, which only pytest loads); jobsched.testing itself is pytest-free.
    kernel = sorted(
        p for p in SOURCE_ROOTS["jobsched"].glob("*.py") if p.name != "_pytest_plugin.py"
    )
    assert len(kernel) > 5
    for path in kernel:
        imported = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
        assert imported <= allowed, f"{path.relative_to(ROOT)} imports {sorted(imported - allowed)}"
