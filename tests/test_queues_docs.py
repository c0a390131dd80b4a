"""docs/queues.md's examples run as written, each printing what the page shows."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parent.parent / "docs" / "queues.md"
LOG = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \[")


def examples() -> list[tuple[str, str]]:
    """Each ``python`` block with the ``text`` block right after it (its output)."""
    blocks = re.findall(r"```(\w*)\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    return [
        (body, blocks[n + 1][1])
        for n, (lang, body) in enumerate(blocks)
        if lang == "python" and n + 1 < len(blocks) and blocks[n + 1][0] == "text"
    ]


def test_the_page_has_its_examples() -> None:
    assert len(examples()) == 2


@pytest.mark.parametrize("number", range(2))
def test_an_example_prints_what_the_page_shows(number: int, tmp_path: Path) -> None:
    code, output = examples()[number]
    (tmp_path / "example.py").write_text(code, encoding="utf-8")
    ran = subprocess.run(
        [sys.executable, "example.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    # structlog, unconfigured (a library never configures it), logs to stdout.
    printed = [line for line in ran.stdout.splitlines(keepends=True) if not LOG.match(line)]
    assert "".join(printed) == output
