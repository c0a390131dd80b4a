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
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            if "shared scheduler started" in line:
                #: The worker's identity (``host:pid:random``), as its leases name it.
                self.identity = line.split("process=")[1].split()[0]
                threading.Thread(target=self.proc.stderr.read, daemon=True).start()
                return
        pytest.fail(f"worker exited with {self.proc.wait()} before starting")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(timeout=60) == 0
