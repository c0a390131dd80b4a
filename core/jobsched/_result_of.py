"""`ResultOf`: a job argument that stands for an upstream job's result.

``send_report.job(rows=jobsched.result_of(extract))`` puts a marker where the
value goes. The marker is data: its JSON form is ``{"$result_of": "<job
id>"}`` (or ``{"$result_of": ["<id>", ...]}`` for a group, whose result is
the list of its members' results, in member order), so every store keeps it
like any other argument. Submitting the job makes it depend on those
upstreams; when it is released, each marker is replaced by the upstream's
result (see docs/tasks.md, "Results through the DAG").

This module holds the marker and the pure functions over argument values
that find, encode and replace markers; who reads the results (the kernel,
a shared store's worker) gives them a lookup.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ._errors import ResultUnavailableError

#: The key of a marker's JSON form.
MARKER_KEY = "$result_of"

#: An upstream reference: a job id, a `Job` (its id once submitted), or a
#: tuple of references (a group: its result is a list).
Upstream = Any


class ResultOf:
    """Stands for the result of `upstream`: a job id, a `Job`, or a tuple of
    upstreams (a group) whose result is the list of their results."""

    __slots__ = ("upstream",)

    def __init__(self, upstream: Upstream) -> None:
        self.upstream = upstream

    def ids(self, id_of: Callable[[Any], str]) -> list[str]:
        """The ids of every job this marker waits for (`id_of` names a `Job`)."""
        return list(_ids(self.upstream, id_of))

    def to_data(self, id_of: Callable[[Any], str]) -> dict[str, Any]:
        """The JSON form, ``{"$result_of": id or [ids...]}``."""
        return {MARKER_KEY: _data(self.upstream, id_of)}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ResultOf) and _same(self.upstream, other.upstream)

    def __hash__(self) -> int:
        return hash(MARKER_KEY)

    def __repr__(self) -> str:
        return f"result_of({_shown(self.upstream)})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (ResultOf, (self.upstream,))


def _ids(upstream: Upstream, id_of: Callable[[Any], str]) -> Iterator[str]:
    if isinstance(upstream, str):
        yield upstream
    elif isinstance(upstream, tuple):
        for member in upstream:
            yield from _ids(member, id_of)
    else:
        yield id_of(upstream)


def _data(upstream: Upstream, id_of: Callable[[Any], str]) -> Any:
    if isinstance(upstream, str):
        return upstream
    if isinstance(upstream, tuple):
        return [_data(member, id_of) for member in upstream]
    return id_of(upstream)


def _same(a: Upstream, b: Upstream) -> bool:
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a is b or (isinstance(a, str) and a == b)


def _shown(upstream: Upstream) -> str:
    if isinstance(upstream, str):
        return repr(upstream)
    if isinstance(upstream, tuple):
        return "[" + ", ".join(_shown(m) for m in upstream) + "]"
    return str(getattr(upstream, "job_id", upstream))


def marker_from_data(value: Any) -> ResultOf | None:
    """The marker `value` is the JSON form of, or None. A malformed one is a `ValueError`."""
    if value.__class__ is not dict or MARKER_KEY not in value:
        return None
    if len(value) != 1:
        extra = sorted(k for k in value if k != MARKER_KEY)
        raise ValueError(f"a {MARKER_KEY} marker has no other keys, got {extra}")
    return ResultOf(_upstream_from_data(value[MARKER_KEY]))


def _upstream_from_data(data: Any) -> Upstream:
    if isinstance(data, str) and data:
        return data
    if isinstance(data, list) and data:
        return tuple(_upstream_from_data(d) for d in data)
    raise ValueError(f"{MARKER_KEY} takes a job id or a non-empty list of job ids, got {data!r}")


def as_marker(value: Any) -> ResultOf | None:
    """`value` as a marker (the object or its JSON form), or None."""
    if value.__class__ is ResultOf:
        return value
    return marker_from_data(value)


def markers_in(value: Any) -> Iterator[ResultOf]:
    """The markers in an argument value: itself, or inside its lists and tables."""
    if value.__class__ is ResultOf:
        yield value
    elif isinstance(value, list | tuple):
        for item in value:
            yield from markers_in(item)
    elif isinstance(value, dict):
        marker = marker_from_data(value)
        if marker is not None:
            yield marker
        else:
            for item in value.values():
                yield from markers_in(item)


def has_markers(args: dict[str, Any]) -> bool:
    """Whether any argument holds a marker."""
    return any(True for value in args.values() for _ in markers_in(value))


def to_data(value: Any, id_of: Callable[[Any], str]) -> Any:
    """`value` with every marker in its JSON form (`id_of` names a `Job` upstream)."""
    if value.__class__ is ResultOf:
        return value.to_data(id_of)
    if isinstance(value, list | tuple):
        return [to_data(item, id_of) for item in value]
    if isinstance(value, dict):
        return {k: to_data(v, id_of) for k, v in value.items()}
    return value


def resolve(value: Any, result_of: Callable[[str], Any], id_of: Callable[[Any], str]) -> Any:
    """`value` with every marker replaced by its result: ``result_of(job_id)``
    for one job, a list for a group. `result_of` raises `ResultUnavailableError`."""
    marker = as_marker(value)
    if marker is not None:
        return _result(marker.upstream, result_of, id_of)
    if isinstance(value, list | tuple):
        return [resolve(item, result_of, id_of) for item in value]
    if isinstance(value, dict):
        return {k: resolve(v, result_of, id_of) for k, v in value.items()}
    return value


def _result(
    upstream: Upstream, result_of: Callable[[str], Any], id_of: Callable[[Any], str]
) -> Any:
    if isinstance(upstream, tuple):
        return [_result(member, result_of, id_of) for member in upstream]
    return result_of(upstream if isinstance(upstream, str) else id_of(upstream))


def job_id_of(job: Any) -> str:
    """A `Job` upstream's id (the default `id_of`): its id once submitted."""
    job_id = getattr(job, "job_id", None)
    if not isinstance(job_id, str):
        raise TypeError(f"result_of takes a job, a job id or a group, got {job!r}")
    return job_id


def unavailable(upstream_id: str, why: str) -> ResultUnavailableError:
    """The error a dependent fails with when an upstream's result cannot be had."""
    return ResultUnavailableError(f"result_of({upstream_id!r}): {why}")


def not_json(type_name: str) -> str:
    """Why a result of type `type_name` cannot be passed on from a durable store."""
    return (
        f"its result is a {type_name}, not a JSON value: a store keeps results as JSON, "
        "so a result passed to another job must be one (str, number, bool, None, list, dict)"
    )
