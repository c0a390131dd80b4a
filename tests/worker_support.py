"""A ``jobsched worker --store URL`` process, started and stopped by a test.

It is started from tests/, so ``--import flow_tasks`` and ``--import
task_examples`` find the test modules; the test waits until the worker says
it started, and its log is read on (a full pipe would block it).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections.abc import Iterable
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent


def shared_store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store several processes share, for a fixture parametrised by
    ``"postgresql"`` (a new schema) or ``"sqlite"`` (a file in `tmp_path`)."""
    if request.param == "postgresql":
        url: str = request.getfixturevalue("pg_schema")[0]
        return url
    return f"sqlite:///{tmp_path / 'jobs.db'}"


class Log:
    """A worker's log lines as they come, for a test to wait on one."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._changed = threading.Condition()

    def follow(self, stream: Iterable[str]) -> None:
        for line in stream:
            with self._changed:
                self.lines.append(line)
                self._changed.notify_all()

    def wait_for(self, text: str, timeout: float = 60.0) -> str:
        """The first line containing `text`, once the worker has logged it."""
        with self._changed:
            found = self._changed.wait_for(
                lambda: next((line for line in self.lines if text in line), None), timeout
            )
        if found is None:
            pytest.fail(f"the worker did not log {text!r} within {timeout} s")
        return found


def wait_started(worker: subprocess.Popen[str], log: Log | None = None) -> str:
    """Wait until a ``jobsched worker`` started; its identity (``process=host:pid...``).

    Its log is read on (into `log`, if given), so a full pipe never blocks it."""
    assert worker.stderr is not None
    for line in worker.stderr:
        if "shared scheduler started" in line:
            follow = worker.stderr.read if log is None else lambda: log.follow(worker.stderr)
            threading.Thread(target=follow, daemon=True).start()
            return line.split("process=")[1].split()[0]
    pytest.fail(f"worker exited with {worker.wait()} before starting")


class Worker:
    """``jobsched worker --store URL --workers=2 --grace=0 [options]``."""

    def __init__(self, url: str, *options: str) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jobsched",
                "worker",
                "--store",
                url,
                "--workers=2",
                "--grace=0",
                *options,
            ],
            cwd=TESTS,
            stderr=subprocess.PIPE,
            text=True,
        )
        #: What it logged after it started.
        self.log = Log()
        #: The worker's identity (``host:pid:random``), as its leases name it.
        self.identity = wait_started(self.proc, self.log)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(timeout=60) == 0
