"""The results a claimed job's `result_of` markers name, as the store keeps
its upstreams (`SharedBackend` replaces the markers before the job runs)."""

from __future__ import annotations

import re
import time
from typing import Any

from .._result_of import job_id_of, markers_in, not_json, unavailable
from ..store import SharedJobRow


def upstream_ids(value: Any) -> list[str]:
    """The job ids the markers in one stored argument value name."""
    return [i for marker in markers_in(value) for i in marker.ids(job_id_of)]


def stored_result(row: SharedJobRow | None, upstream_id: str) -> Any:
    """An upstream's result as its stored row gives it, for a `result_of` marker."""
    if row is None:
        raise unavailable(upstream_id, "no such job in the store (purged?)")
    if row.status != "completed":
        return None  # a trigger rule released the dependent anyway
    if row.options.get("keep_result") is False:
        raise unavailable(upstream_id, "its job keeps no result (keep_result=False)")
    # Past its time the result counts as gone, whether or not a reaper ran.
    if row.result_expires is not None and row.result_expires <= time.time():
        raise unavailable(upstream_id, "its result expired (result_ttl)")
    result = row.result
    if result is None:
        return None
    if isinstance(result, dict) and "$repr" in result:
        note = str(result.get("$note", ""))
        if note.startswith("not storable"):  # text no store can keep (`encode_result`)
            raise unavailable(upstream_id, f"its result was stored as its repr ({note})")
        found = re.search(r"Object of type (\w+)", note)
        raise unavailable(upstream_id, not_json(found.group(1) if found else "value"))
    return result
