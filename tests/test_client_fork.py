"""Clients across a fork (issue 20 item 9), on both shared stores, with real forks.

A `BlockingClient` opened before a fork (gunicorn ``--preload``, Celery's
prefork pool, multiprocessing "fork") reopens itself in each child: the
child's calls are answered on its own connection, and the parent's client
goes on working. An async `Client` refuses every call in a child, saying how
to fix it. Each scenario runs in its own program (tests/fork_clients.py),
which forks as an application does.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from worker_support import TESTS, shared_store

pytestmark = pytest.mark.slow


@pytest.fixture(params=["postgresql", "sqlite"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return shared_store(request, tmp_path)


def run(mode: str, url: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run one scenario; what its child and its parent reported."""
    done = subprocess.run(
        [sys.executable, "fork_clients.py", mode, url],
        cwd=TESTS,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    by_role = {line["role"]: line for line in lines}
    assert set(by_role) == {"child", "parent"}, done.stdout + done.stderr
    return by_role["child"], by_role["parent"]


def test_a_blocking_client_opened_before_a_fork_reopens_in_the_child(url: str) -> None:
    child, parent = run("fork", url)
    assert parent["child_exit"] == 0
    # Both threads' first calls were answered, on the child's own connection.
    assert child["errors"] == [] and len(child["ids"]) == 2
    assert child["seen"] == parent["first"]
    assert all(f":{child['pid']}:" in who for who in child["submitted_by"])
    # The child finalized (its with block closed its client): the parent's
    # connection is untouched and everything is stored once.
    assert parent["stored"] == sorted([parent["first"], parent["again"], *child["ids"]])


def test_a_blocking_client_serves_a_multiprocessing_fork_pool(url: str) -> None:
    children, parent = run("pool", url)
    assert len(children["ids"]) == 4
    assert parent["stored"] == sorted([parent["first"], parent["again"], *children["ids"]])


def test_a_blocking_client_of_a_store_object_says_why_a_child_cannot_reopen_it(
    url: str,
) -> None:
    child, parent = run("object", url)
    assert parent["child_exit"] == 0
    error = child["error"]
    assert error is not None and "forked, with a store object" in error
    assert "Open a new BlockingClient in the child, or give the store's URL" in error
    assert parent["stored"] == sorted([parent["first"], parent["again"]])


def test_an_async_client_refuses_calls_in_a_forked_child_and_a_new_one_works(
    url: str,
) -> None:
    child, parent = run("async", url)
    assert parent["child_exit"] == 0
    error = child["error"]
    assert error is not None and f"before this process ({child['pid']}) forked" in error
    assert "Open a new Client in the child" in error
    # Closing the refused client in the child left the parent's connection working.
    assert parent["stored"] == sorted([parent["first"], parent["again"], *child["ids"]])
