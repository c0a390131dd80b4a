"""Run ``mypy --strict`` on a snippet, for the tests that check what the
type checker accepts (tests/test_tasks.py, tests/test_result_of.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def mypy_errors(folder: Path, snippet: str) -> tuple[list[str], str]:
    """The ``error:`` lines of ``mypy --strict`` on `snippet` (written to
    `folder`/snippet.py, checked with no config and no cache), and its output."""
    (folder / "snippet.py").write_text(snippet)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-incremental",
            "--cache-dir",
            os.devnull,
            "--config-file",
            os.devnull,
            "snippet.py",
        ],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return [line for line in done.stdout.splitlines() if ": error:" in line], done.stdout
