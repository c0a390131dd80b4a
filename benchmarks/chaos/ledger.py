"""The ledger: what really ran, kept where the store cannot touch it.

Each process appends JSON lines to its own file in the ledger folder
(``<role>-<pid>.jsonl``) and fsyncs each one before going on, so a record
written before a ``kill -9`` is there afterwards. A line cut short by a kill
is skipped when reading (`read` counts them).
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

_lock = threading.Lock()
_files: dict[str, int] = {}


def append(folder: str, role: str, record: dict[str, Any], *, sync: bool = True) -> None:
    """Append `record` (with this process's pid and the wall time) and fsync it
    (unless not `sync`: then the line survives the process, not the machine).

    Blocking: call it in a thread from async code. Safe from several threads
    (each line is one ``write`` on an ``O_APPEND`` file).
    """
    line = json.dumps({**record, "pid": os.getpid(), "t": time.time()}, separators=(",", ":"))
    path = os.path.join(folder, f"{role}-{os.getpid()}.jsonl")
    with _lock:
        fd = _files.get(path)
        if fd is None:
            fd = _files[path] = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, (line + "\n").encode())
    if sync:
        os.fsync(fd)


def read(folder: str | Path) -> tuple[list[dict[str, Any]], int]:
    """Every record of every process, oldest first, and how many torn lines were skipped."""
    records: list[dict[str, Any]] = []
    torn = 0
    for path in sorted(Path(folder).glob("*.jsonl")):
        role = path.name.split("-", 1)[0]
        for line in path.read_text().splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                torn += 1
                continue
            record["role"] = role
            records.append(record)
    records.sort(key=lambda r: r["t"])
    return records, torn


def follow(path: Path, offset: int) -> tuple[list[dict[str, Any]], int]:
    """The complete records appended to `path` after byte `offset`, and the new offset."""
    try:
        with path.open("rb") as f:
            f.seek(offset)
            data = f.read()
    except FileNotFoundError:
        return [], offset
    end = data.rfind(b"\n") + 1
    records = []
    for line in data[:end].splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            continue
    return records, offset + end
