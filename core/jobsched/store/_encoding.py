"""JSON and results as every store keeps them: one encoding, whatever the engine."""

from __future__ import annotations

import json
import traceback
from typing import Any

#: JSON text as stores keep it: compact, no NaN or infinity. One encoder for
#: everything (``json.dumps`` with options builds a new one per call).
encode_json = json.JSONEncoder(allow_nan=False, separators=(",", ":")).encode


# ── results: how every store keeps one ─────────────────────────────────
def encode_result(result: Any) -> str | None:
    """A result as JSON text (None stays None).

    A result JSON cannot hold (a set, an object, NaN) is stored as
    ``{"$repr": repr(result), "$note": "not JSON-encodable: <why>"}``: the
    job still completed, and its result can still be read. So is a result
    whose text not every store can keep: a NUL character (``\\x00``) or a
    lone surrogate, which PostgreSQL refuses (``$note`` ``"not storable:
    ..."``); every store keeps the same thing.
    """
    if result is None:
        return None
    try:
        text = encode_json(result)
    except (TypeError, ValueError) as exc:
        return _described(result, f"not JSON-encodable: {exc}")
    # \u0000 and \udXXX escapes are rare: only then is the value walked.
    if "\\u0000" in text or "\\ud" in text:
        found = _unstorable_char(result)
        if found is not None:
            return _described(result, f"not storable: its text holds {found}")
    return text


def _described(result: Any, note: str) -> str:
    return encode_json({"$repr": storable_text(repr(result)), "$note": note})


def _unstorable_char(value: Any) -> str | None:
    """What in a JSON value's strings no store can be trusted to keep, or None."""
    if isinstance(value, str):
        if "\x00" in value:
            return "a NUL character (\\x00)"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "a lone surrogate (not Unicode text)"
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            found = _unstorable_char(key) or _unstorable_char(item)
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for item in value:
            found = _unstorable_char(item)
            if found is not None:
                return found
    return None


def storable_text(text: str | None) -> str | None:
    """Text every store keeps as it is: a NUL character becomes the four
    characters ``\\x00`` and a lone surrogate its ``\\udXXX`` escape (no
    PostgreSQL text can hold either). Other text is returned unchanged.
    """
    if text is None:
        return None
    if "\x00" in text:
        text = text.replace("\x00", "\\x00")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def decode_result(text: str | None) -> Any:
    """The stored result: the JSON value `encode_result` wrote (None for None)."""
    return None if text is None else json.loads(text)


def result_as_json(result: Any) -> Any:
    """A result as the JSON value a store would give back (for ``--json`` output)."""
    return decode_result(encode_result(result))


# ── tracebacks: how every store keeps a failed attempt's ───────────────
#: The most characters of a failed attempt's traceback a store keeps.
TRACEBACK_LIMIT = 16 * 1024


def storable_traceback(error: BaseException, limit: int = TRACEBACK_LIMIT) -> str:
    """`error`'s formatted traceback as every store keeps it: `storable_text`,
    at most `limit` characters (a longer one keeps its start and its end, the
    innermost frames and the error, around a line saying how much was cut)."""
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    return cut_middle(storable_text(text) or "", limit)


def cut_middle(text: str, limit: int = TRACEBACK_LIMIT) -> str:
    """`text` if it has at most `limit` characters, else its start and end
    around a marker line ``[... N characters cut ...]``, `limit` in all."""
    if len(text) <= limit:
        return text
    # The marker's length depends on N, which depends on the marker: size it
    # for the largest N (the whole text), the rest is split head and tail.
    room = limit - len(_marker(len(text)))
    head = room // 2
    tail = room - head
    return text[:head] + _marker(len(text) - room) + text[len(text) - tail :]


def _marker(cut: int) -> str:
    return f"\n[... {cut} characters cut ...]\n"
