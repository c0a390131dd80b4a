"""The JSON shape of jobsched's records: their attrs fields, under the same names."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

import attrs


def to_json(value: Any) -> Any:
    """`value` as JSON data: attrs records become objects of their fields,
    enums their values, tuples and lists arrays; anything else as it is."""
    if attrs.has(type(value)):
        return {f.name: to_json(getattr(value, f.name)) for f in attrs.fields(type(value))}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_json(v) for v in value]
    return value
