"""docs/integrations.md runs as written: its Starlette app, the FastAPI example's
files and answers, and the Django recipe's check script (a worker process
serving it on SQLite and PostgreSQL, no Django needed)."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from asgi_support import served
from worker_support import shared_store, wait_started

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "integrations.md"
#: The store URL the examples are written with.
DOC_URL = "sqlite:////srv/jobs.db"


def blocks() -> list[tuple[str, str]]:
    return re.findall(r"^```(\w*)\n(.*?)^```", DOC.read_text(), flags=re.S | re.M)


def files() -> dict[str, str]:
    """The page's ``# file: PATH`` blocks, by path (the marker line removed)."""
    found = {}
    for lang, body in blocks():
        first, _, rest = body.partition("\n")
        if lang == "python" and first.startswith("# file: "):
            found[first.removeprefix("# file: ")] = rest
    return found


def test_the_page_has_the_files_these_tests_use() -> None:
    assert list(files()) == [
        "app.py",
        "examples/fastapi_app/tasks.py",
        "examples/fastapi_app/app.py",
        "signups/tasks.py",
        "signups/jobs.py",
        "signups/apps.py",
        "signups/views.py",
        "check.py",
        "signups/members.py",
    ]
    # The Django files import Django, the nesting sketch names a made-up task:
    # these are only compiled (signups/members.py runs in test_django_on_commit.py).
    for path in ("signups/apps.py", "signups/views.py"):
        compile(files()[path], path, "exec")
    for lang, body in blocks():
        if lang == "python":
            compile(body, "integrations.md", "exec")


def test_the_fastapi_example_on_the_page_is_the_one_in_examples() -> None:
    for path in ("examples/fastapi_app/tasks.py", "examples/fastapi_app/app.py"):
        assert files()[path] == (ROOT / path).read_text(), path


async def test_the_starlette_app_answers_what_the_page_says(tmp_path: Path) -> None:
    path = tmp_path / "app.py"
    path.write_text(files()["app.py"])
    spec = importlib.util.spec_from_file_location("integrations_doc_app", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    said = re.search(r"`GET /shout/hi` answers `(.*?)`", DOC.read_text())
    assert said is not None
    async with served(module.app) as (http, _):
        assert (await http.get("/shout/hi")).json() == json.loads(said.group(1))


async def test_the_fastapi_examples_answers_are_the_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    (session,) = [body for lang, body in blocks() if lang == "text" and "curl" in body]
    lines = session.splitlines()
    posts = [json.loads(line.split(" -d ")[1].strip("'")) for line in lines if "-X POST" in line]
    answers = [json.loads(line) for line in lines if line.startswith('{"status"')]
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    example: Any = importlib.import_module("fastapi_app.app")
    async with served(example.create_app(None)) as (http, _):
        for body, answer in zip(posts, answers, strict=True):
            job_id = (await http.post("/signups", json=body)).json()["job_id"]
            got = await http.get(f"/jobs/{job_id}", params={"wait": 30})
            assert got.json() == answer


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return shared_store(request, tmp_path)


@pytest.mark.slow
def test_the_django_check_script_runs_against_a_worker(tmp_path: Path, store_url: str) -> None:
    project = tmp_path / "project"
    (project / "signups").mkdir(parents=True)
    (project / "signups" / "__init__.py").touch()
    for path in ("signups/tasks.py", "signups/jobs.py", "check.py"):
        (project / path).write_text(files()[path].replace(DOC_URL, store_url))
    (command,) = [
        body.strip() for lang, body in blocks() if lang == "sh" and "signups.tasks" in body
    ]
    assert command == f"jobsched worker --store {DOC_URL} --import signups.tasks"
    worker = subprocess.Popen(
        [sys.executable, "-m", *command.replace(DOC_URL, store_url).split()],
        cwd=project,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_started(worker)
        done = subprocess.run(
            [sys.executable, "check.py"], cwd=project, capture_output=True, text=True, timeout=120
        )
    finally:
        worker.terminate()
        assert worker.wait(timeout=60) == 0
    assert done.returncode == 0, done.stderr
    printed = [body for lang, body in blocks() if lang == "text" and "completed:" in body]
    assert [done.stdout] == printed
