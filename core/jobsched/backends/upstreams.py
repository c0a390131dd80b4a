"""The results a claimed job's `result_of` markers name, as the store keeps
its upstreams (`SharedBackend` replaces the markers before the job runs:
`with_results`)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import attrs

from .._errors import ResultUnavailableError
from .._result_of import has_markers, job_id_of, markers_in, not_json, resolve, unavailable
from ..store import SharedJobRow, SharedStore


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


async def with_results(
    store: SharedStore,
    rows: list[SharedJobRow],
    *,
    fail: Callable[[str, str], None],
    hand_back: Callable[[list[str]], None],
    log: Any,
) -> list[SharedJobRow]:
    """Claimed rows with their `result_of` markers replaced by the upstreams'
    stored results (read in one query). A row whose result cannot be had
    fails at once, saying why (``fail(job_id, error)``); a failed read hands
    the rows back (`hand_back`) and leaves them out."""
    marked = {row.job_id: row for row in rows if has_markers(row.args)}
    if not marked:
        return rows
    wanted = {i for row in marked.values() for v in row.args.values() for i in upstream_ids(v)}
    try:
        upstreams = {u.job_id: u for u in await store.jobs(sorted(wanted))}
    except Exception as exc:
        log.error("cannot read upstream results", error=str(exc))
        hand_back(list(marked))
        return [row for row in rows if row.job_id not in marked]

    def result_of(upstream_id: str) -> Any:
        return stored_result(upstreams.get(upstream_id), upstream_id)

    ready = []
    for row in rows:
        if row.job_id in marked:
            try:
                args = {k: resolve(v, result_of, job_id_of) for k, v in row.args.items()}
            except ResultUnavailableError as exc:
                fail(row.job_id, f"ResultUnavailableError: {exc}")
                continue
            row = attrs.evolve(row, args=args)
        ready.append(row)
    return ready
