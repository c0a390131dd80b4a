"""Shared pieces of the observability tests: store URLs and a real worker process."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

STORES = ["sqlite", "postgresql"]


def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh shared store: a SQLite file in shared mode, or a PostgreSQL schema."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/jobs.db"  # tmp_path is absolute: sqlite:////abs
    url, _ = request.getfixturevalue("pg_schema")
    return str(url)


@contextmanager
def worker_process(
    url: str, *args: str, env: Mapping[str, str] | None = None, workers: int = 8
) -> Iterator[tuple[subprocess.Popen[str], int | None]]:
    """``jobsched worker --store URL --metrics-port 0 ...`` until the block ends.

    Yields the process and the port its /metrics listens on (None without
    --metrics-port), once the worker says its scheduler started. Stops it
    with SIGTERM and checks it exits 0.
    """
    command = [sys.executable, "-m", "jobsched", "worker", "--store", url]
    command += ["--workers", str(workers), "--grace", "60", *args]
    proc = subprocess.Popen(
        command, stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})}
    )
    port = None
    seen: list[str] = []
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            seen.append(line)
            found = re.search(r"metrics on http://[^:]+:(\d+)/metrics", line)
            if found:
                port = int(found.group(1))
            if "shared scheduler started" in line:
                # Keep draining stderr, so the worker never blocks on a full pipe.
                threading.Thread(target=proc.stderr.read, daemon=True).start()
                break
        else:
            pytest.fail(f"worker exited with {proc.wait()} before starting:\n{''.join(seen)}")
        yield proc, port
    finally:
        proc.terminate()
        code = proc.wait(timeout=120)
    assert code == 0, "".join(seen)


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
        return str(response.read().decode())
