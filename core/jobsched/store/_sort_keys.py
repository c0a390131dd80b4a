"""A strategy key as bytes that sort as the key does (the SQL stores' claim key).

A claim walks an index in ``(sort_key, seq)`` order. Keyed on the key's
numbers as an array (PostgreSQL's ``float8[]``), every comparison in that
index deconstructs two arrays; keyed on bytes, it is one ``memcmp``, and an
entry is a third of the size. Each number becomes 8 big-endian bytes of its
IEEE-754 double with the order-preserving flip: a negative number has every
bit inverted, any other gets the sign bit. Bytes compare byte by byte, a
shorter prefix first, which is the order of the tuples.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

_SIGN = 1 << 63
_ALL = (1 << 64) - 1
_DOUBLE = struct.Struct(">d")
_WORD = struct.Struct(">Q")
# Strategies give few distinct keys (FIFO one, priorities a handful): each is
# packed once. Bounded, as aging and EDF keys (times) are all different.
_CACHE_SIZE = 1024
_packed: dict[tuple[float, ...], bytes] = {}
_unpacked: dict[bytes, tuple[float, ...]] = {}


def pack_sort_key(key: Sequence[float]) -> bytes:
    """`key` as bytes whose byte order is the tuple order (``-0.0`` packs as
    ``0.0``, which it equals). NaN, which a stored key never holds, packs
    above every number."""
    cache_key = key if type(key) is tuple else tuple(key)
    packed = _packed.get(cache_key)
    if packed is not None:
        return packed
    out = bytearray()
    for x in cache_key:
        (bits,) = _WORD.unpack(_DOUBLE.pack(float(x) + 0.0))  # + 0.0: no -0.0
        out += _WORD.pack((~bits & _ALL) if bits & _SIGN else (bits | _SIGN))
    packed = bytes(out)
    if len(_packed) >= _CACHE_SIZE:
        _packed.clear()
    _packed[cache_key] = packed
    return packed


def unpack_sort_key(packed: bytes) -> tuple[float, ...]:
    """The key `pack_sort_key` packed; `ValueError` for bytes it cannot have made."""
    if type(packed) is not bytes or len(packed) % 8:
        raise ValueError(f"{packed!r} is not a packed strategy key")
    key = _unpacked.get(packed)
    if key is not None:
        return key
    numbers = []
    for (bits,) in _WORD.iter_unpack(packed):
        bits = (bits & ~_SIGN) if bits & _SIGN else (~bits & _ALL)
        numbers.append(_DOUBLE.unpack(_WORD.pack(bits))[0])
    key = tuple(numbers)
    if len(_unpacked) >= _CACHE_SIZE:
        _unpacked.clear()
    _unpacked[packed] = key
    return key
