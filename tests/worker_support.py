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


def wait_started(worker: subprocess.Popen[str]) -> str:
    """Wait until a ``jobsched worker`` started; its identity (``process=host:pid...``)."""
    assert worker.stderr is not None
    for line in worker.stderr:
        if "shared scheduler started" in line:
            # Keep reading its log so a full pipe never blocks the worker.
            threading.Thread(target=worker.stderr.read, daemon=True).start()
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
        #: The worker's identity (``host:pid:random``), as its leases name it.
        self.identity = wait_started(self.proc)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(timeout=60) == 0
