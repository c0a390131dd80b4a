"""docs/client.md's examples run as written against PostgreSQL, with a real worker."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from worker_support import Worker

pytestmark = pytest.mark.slow

DOC = Path(__file__).resolve().parent.parent / "docs" / "client.md"
#: The URL the examples are written with; the test gives them a fresh schema.
DOC_URL = "postgresql://jobs@db/jobs"


def examples() -> list[tuple[str, str | None]]:
    """Each ``python`` block written for a shared store (its URL), with the ``text`` block
    right after it (its output)."""
    blocks = re.findall(r"```(\w*)\n(.*?)```", DOC.read_text(), flags=re.S)
    found = []
    for n, (lang, body) in enumerate(blocks):
        if lang == "python" and DOC_URL in body:  # LocalClient's: test_local_client.py
            after = blocks[n + 1] if n + 1 < len(blocks) else ("", "")
            found.append((body, after[1] if after[0] == "text" else None))
    return found


@pytest.fixture
def worker(pg_schema: tuple[str, str]) -> Iterator[str]:
    running = Worker(pg_schema[0])
    try:
        yield pg_schema[0]
    finally:
        running.stop()


def run_example(code: str, url: str) -> str:
    assert DOC_URL in code
    done = subprocess.run(
        [sys.executable, "-c", code.replace(DOC_URL, url)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_page_has_the_examples_this_test_runs() -> None:
    assert len(examples()) == 4
    assert [expected is not None for _, expected in examples()] == [True, True, False, True]


@pytest.mark.parametrize("index", [0, 1, 3])
def test_an_example_prints_what_the_page_says(worker: str, index: int) -> None:
    code, expected = examples()[index]
    assert run_example(code, worker) == expected


def test_the_web_app_example_enqueues_and_reports(worker: str) -> None:
    code, _ = examples()[2]
    use = (
        "\njob = signup('carol@example.com')['job']\n"
        "client.wait(job, timeout=60)\n"
        "print(job_status(job))\n"
    )
    out = run_example(code + use, worker)
    assert out == "{'status': 'completed', 'result': 'sent to carol@example.com', 'error': None}\n"
