"""docs/client.md's examples run as written against PostgreSQL, with a real worker
that imports the tasks they submit (docs/tasks.md's ``myapp/tasks.py``)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from worker_support import wait_started

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


def tasks_module() -> str:
    """docs/tasks.md's ``# file: myapp/tasks.py`` block: the tasks the examples submit."""
    text = (DOC.parent / "tasks.md").read_text()
    (body,) = re.findall(r"```python\n(# file: myapp/tasks\.py\n.*?)```", text, flags=re.S)
    return body


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A folder holding ``myapp/tasks.py``, where the worker and the examples run."""
    package = tmp_path / "myapp"
    package.mkdir()
    (package / "__init__.py").touch()
    (package / "tasks.py").write_text(tasks_module())
    return tmp_path


@pytest.fixture
def worker(pg_schema: tuple[str, str], project: Path) -> Iterator[str]:
    """The store's URL, served by ``jobsched worker --import myapp.tasks``."""
    url = pg_schema[0]
    running = subprocess.Popen(
        [sys.executable, "-m", "jobsched", "worker", "--store", url, "--import=myapp.tasks"],
        cwd=project,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_started(running)
        yield url
    finally:
        running.terminate()
        assert running.wait(timeout=60) == 0


def run_example(code: str, url: str, project: Path) -> str:
    assert DOC_URL in code
    done = subprocess.run(
        [sys.executable, "-c", code.replace(DOC_URL, url)],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_examples_submit_their_own_tasks_not_the_demo_types() -> None:
    for code, _ in examples():
        assert "from myapp.tasks import" in code and "build_job" not in code


def test_the_page_has_the_examples_this_test_runs() -> None:
    assert len(examples()) == 6
    assert [expected is not None for _, expected in examples()] == [
        True,
        True,
        False,
        True,
        True,
        True,
    ]


@pytest.mark.parametrize("index", [0, 1, 3, 4, 5])
def test_an_example_prints_what_the_page_says(worker: str, project: Path, index: int) -> None:
    code, expected = examples()[index]
    assert run_example(code, worker, project) == expected


def test_the_web_app_example_enqueues_and_reports(worker: str, project: Path) -> None:
    code, _ = examples()[2]
    use = (
        "\njob = signup('carol@example.com')['job']\n"
        "client.wait(job, timeout=60)\n"
        "print(job_status(job))\n"
    )
    out = run_example(code + use, worker, project)
    assert out == (
        "{'status': 'completed', 'result': \"sent 'Welcome' to carol@example.com\", "
        "'error': None}\n"
    )
