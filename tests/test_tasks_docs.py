"""docs/tasks.md's examples run as written: in one process, and a worker process
(``--import myapp.tasks``) serving a client's jobs on SQLite and PostgreSQL."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from worker_support import shared_store, wait_started

pytestmark = pytest.mark.slow

DOC = Path(__file__).resolve().parent.parent / "docs" / "tasks.md"
#: The store URL the worked example is written with.
DOC_URL = "sqlite:////srv/jobs.db"


def blocks() -> list[tuple[str, str]]:
    return re.findall(r"^ *```(\w*)\n(.*?)^ *```", DOC.read_text(), flags=re.S | re.M)


def python_blocks() -> list[str]:
    return [body for lang, body in blocks() if lang == "python"]


def output_after(code: str) -> str:
    found = blocks()
    index = found.index(("python", code))
    following = [body for lang, body in found[index + 1 :] if lang == "text"]
    return following[0]


def run(args: list[str], cwd: Path) -> str:
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_page_has_the_examples_these_tests_run() -> None:
    code = python_blocks()
    assert len(code) == 6
    assert [c.splitlines()[0] for c in code[1:3]] == ["# file: myapp/tasks.py", "# file: submit.py"]
    # Sketches whose I/O and tasks are made up: the Retry one, the trigger rules one.
    for sketch in code[3:5]:
        compile(sketch, "sketch", "exec")


def test_the_workflow_example_prints_what_the_page_says(tmp_path: Path) -> None:
    code = python_blocks()[5]
    assert "chord(" in code and "result_of(" in code
    assert run([sys.executable, "-c", code], tmp_path) == output_after(code)


def test_the_first_example_prints_what_the_page_says(tmp_path: Path) -> None:
    code = python_blocks()[0]
    assert run([sys.executable, "-c", code], tmp_path) == output_after(code)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return shared_store(request, tmp_path)


def test_the_worked_example_runs_with_a_worker_process(tmp_path: Path, store_url: str) -> None:
    project = tmp_path / "project"
    for code in python_blocks()[1:3]:
        path = project / code.splitlines()[0].removeprefix("# file: ")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(code.replace(DOC_URL, store_url))
    (shell,) = [body for lang, body in blocks() if lang == "sh" and "--import" in body]
    touch, command = shell.strip().splitlines()
    assert touch == "touch myapp/__init__.py"
    (project / "myapp" / "__init__.py").touch()
    assert command == f"jobsched worker --store {DOC_URL} --import myapp.tasks"
    worker = subprocess.Popen(
        [sys.executable, "-m", "jobsched", "worker", "--store", store_url, "--import=myapp.tasks"],
        cwd=project,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_started(worker)
        submit = python_blocks()[2]
        assert run([sys.executable, "submit.py"], project) == output_after(submit)
        # docs/client.md's workflow example, on the same worker.
        workflow, printed = client_doc_workflow()
        (project / "workflow.py").write_text(workflow.replace(DOC_URL, store_url))
        assert run([sys.executable, "workflow.py"], project) == printed
    finally:
        worker.terminate()
        assert worker.wait(timeout=60) == 0


def client_doc_workflow() -> tuple[str, str]:
    """docs/client.md's ``# file: workflow.py`` block and the output after it."""
    text = (DOC.parent / "client.md").read_text()
    found = re.findall(r"^```(\w*)\n(.*?)^```", text, flags=re.S | re.M)
    index = next(i for i, (_, body) in enumerate(found) if body.startswith("# file: workflow.py"))
    assert found[index + 1][0] == "text"
    return found[index][1], found[index + 1][1]


def test_the_readmes_five_lines_run(tmp_path: Path) -> None:
    readme = (DOC.parent.parent / "README.md").read_text()
    section = readme.split("## Five lines", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, flags=re.S)
    assert code is not None and "@task" in code.group(1)
    assert run([sys.executable, "-c", code.group(1)], tmp_path) == "fetched https://example.org\n"
