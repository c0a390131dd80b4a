"""The worked plugin of docs/plugins.md (examples/jobsched-shortest) works as documented.

Discovery is tested for real: the example's own pyproject.toml is turned into
an installed distribution's ``*.dist-info`` (METADATA + entry_points.txt) on a
temporary ``sys.path`` entry, which is what pip leaves behind, and jobsched
finds it through the ``jobsched`` entry-point group like any installed plugin.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from jobsched import AsyncJob, JobScheduler, PluginManager

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "jobsched-shortest"
PACKAGE = "jobsched_shortest"


def _install_metadata(site: Path) -> str:
    """Write the dist-info pip would write for the example; return the distribution name."""
    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    name, version = project["name"], project["version"]
    dist_info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8"
    )
    entry_points = project["entry-points"]["jobsched"]
    lines = ["[jobsched]", *(f"{ep} = {target}" for ep, target in entry_points.items())]
    (dist_info / "entry_points.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(name)


@pytest.fixture
def installed_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.delenv("JOBSCHED_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.delenv("JOBSCHED_DISABLE_PLUGINS", raising=False)
    dist = _install_metadata(tmp_path / "site")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.syspath_prepend(str(EXAMPLE / "src"))
    for module in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
        monkeypatch.delitem(sys.modules, module)
    return dist


class Estimated(AsyncJob):
    def __init__(self, name: str, ran: list[str], estimated_seconds: float) -> None:
        super().__init__(name)
        self.ran = ran
        self.estimated_seconds = estimated_seconds

    async def run(self) -> None:
        self.ran.append(self.name)


async def test_installed_example_is_discovered_and_usable_by_name(installed_example: str) -> None:
    pm = PluginManager()
    record = next(r for r in pm.records() if r.name == "shortest")
    assert record.status == "loaded"
    assert record.distribution == installed_example
    assert record.version == "0.1.0"
    assert record.builtin is False
    assert record.provides == {
        "strategies": ("shortest-first",),
        "retry_policies": ("linear",),
    }
    assert "jobsched_job_transition" in record.hooks

    example = sys.modules[PACKAGE]
    example.TRANSITIONS.clear()
    linear = pm.resolve("retry_policies", "linear")(max_retries=1, step=0.0)
    assert linear.delay(1, None) == 0.0
    scheduler = JobScheduler("shortest-first", num_workers=1, plugins=pm)
    ran: list[str] = []
    for name, estimate in [("b", 2.0), ("c", 3.0), ("a", 1.0)]:
        scheduler.submit(Estimated(name, ran, estimate))
    async with scheduler:
        await scheduler.join()
    assert ran == ["a", "b", "c"]
    assert example.TRANSITIONS == {"running": 3, "completed": 3}


@pytest.mark.parametrize(
    ("env", "reason"),
    [
        ({"JOBSCHED_DISABLE_PLUGIN_AUTOLOAD": "1"}, "third-party autoload disabled"),
        ({"JOBSCHED_DISABLE_PLUGINS": "shortest"}, "deny-list"),
    ],
)
def test_the_example_can_be_switched_off(
    installed_example: str, monkeypatch: pytest.MonkeyPatch, env: dict[str, str], reason: str
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    pm = PluginManager()
    record = next(r for r in pm.records() if r.name == "shortest")
    assert record.status == "blocked"
    assert reason in (record.error or "")
    assert PACKAGE not in sys.modules  # blocked before import
    with pytest.raises(Exception, match="unknown strategy 'shortest-first'"):
        JobScheduler("shortest-first", plugins=pm)


@pytest.mark.slow
def test_the_examples_own_tests_pass() -> None:
    # The plugin author's test suite (docs/plugins.md, "Testing a plugin").
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=EXAMPLE,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("JOBSCHED_DISABLE")},
            "PYTHONPATH": str(EXAMPLE / "src"),
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3 passed" in proc.stdout
