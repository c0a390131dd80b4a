"""Reading a request's query and path values, for the API and the pages alike.

A value the store could not take (a NUL character: PostgreSQL refuses it in
text), a number out of range, or text past `MAX_TEXT` is `BadRequest` (a 400
naming the parameter), never an error from the store. A message repeats at
most a few dozen characters of what the client sent (`shown`).
"""

from __future__ import annotations

from collections.abc import Mapping

from jobsched import HISTORY_WINDOWS, check_queue

from ._http import shown

#: The most characters a text filter (``q``, ``type``) may have.
MAX_TEXT = 1000
#: The largest ``offset`` (beyond any store's jobs; SQLite's and PostgreSQL's
#: integers stop at 2**63).
MAX_OFFSET = 2**62


class BadRequest(ValueError):
    """A query or path value the app refuses: answered 400 with this message."""


def text(query: Mapping[str, str], name: str) -> str | None:
    """The query value `name` (None when absent or empty), checked as text."""
    value = query.get(name) or None
    if value is not None:
        check_text(name, value)
    return value


def check_text(name: str, value: str) -> None:
    """`BadRequest` for text the store cannot take or that is too long."""
    if "\x00" in value:
        raise BadRequest(f"{name} must not contain a NUL character")
    if len(value) > MAX_TEXT:
        raise BadRequest(f"{name} must be at most {MAX_TEXT} characters, got {len(value)}")


def path_value(path_params: Mapping[str, str], name: str) -> str:
    """The path value `name` (a job or schedule id), checked for a NUL character."""
    value = path_params[name]
    if "\x00" in value:
        raise BadRequest(f"{name} must not contain a NUL character")
    return value


def integer(query: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    """The query value `name` as an integer from `low` to `high` (`default`
    when absent; given empty, it is no integer)."""
    raw = query.get(name)
    if raw is None:
        return default
    digits = raw.strip().removeprefix("-")
    if not digits.isdigit() or not digits.isascii():
        raise BadRequest(f"{name} must be an integer, got {shown(raw)}")
    if len(digits) > len(str(max(abs(low), abs(high)))):
        raise BadRequest(f"{name} must be {low} to {high}, got {shown(raw)}")
    value = int(raw)
    if not low <= value <= high:
        raise BadRequest(f"{name} must be {low} to {high}, got {value}")
    return value


def history_query(
    query: Mapping[str, str], default: str = "24h"
) -> tuple[str, str | None, str | None]:
    """The ``window``, ``type`` and ``queue`` of a history request
    (`Client.history`): a window of `HISTORY_WINDOWS` (`default` when absent),
    a job type and a queue's name (None when absent or empty)."""
    window = query.get("window", default)
    if window not in HISTORY_WINDOWS:
        raise BadRequest(f"window must be one of {', '.join(HISTORY_WINDOWS)}, got {shown(window)}")
    queue = query.get("queue") or None
    if queue is not None:
        try:
            check_queue(queue)
        except ValueError as exc:
            raise BadRequest(str(exc)) from None
    return window, text(query, "type"), queue
