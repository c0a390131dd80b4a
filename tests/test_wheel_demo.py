"""`jobsched demo` works from a built wheel: the demo file ships inside the package."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_the_wheel_ships_the_demo_and_runs_it(tmp_path: Path) -> None:
    built = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp_path / "dist"), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (tmp_path / "dist").glob("jobsched-*.whl")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        assert "jobsched/cli/demo.toml" in names
        assert archive.read("jobsched/cli/demo.toml") == (ROOT / "examples/demo.toml").read_bytes()
        entry_points = archive.read("jobsched-0.1.0.dist-info/entry_points.txt").decode()
        assert "jobsched = jobsched.cli:main" in entry_points
        assert "contrib = jobsched_contrib.plugin" in entry_points
        archive.extractall(site)
    # Run from the unpacked wheel, away from the source tree.
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBSCHED_")}
    env["PYTHONPATH"] = str(site)
    where = subprocess.run(
        [
            sys.executable,
            "-c",
            "import jobsched.cli, jobsched_contrib; "
            "print(jobsched.cli.__file__); print(jobsched_contrib.__file__)",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        check=True,
    )
    assert all(line.startswith(str(site)) for line in where.stdout.splitlines())
    demo = subprocess.run(
        [sys.executable, "-m", "jobsched", "demo", "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
        check=False,
    )
    assert demo.returncode == 0, demo.stderr
    doc = json.loads(demo.stdout)
    assert doc["file"].startswith(str(site))
    assert len(doc["jobs"]) == 12
    assert doc["counts"]["completed"] == 8
