"""pgoutput TupleData encoding: the row format of the change stream, for stream and baseline alike.

Layout: Int16 column count, then per column one of
  'n'                       NULL
  'u'                       unchanged TOASTed value (the stored value stays)
  't' Int32 len, len bytes  the value's text form
  'b' Int32 len, len bytes  binary form (pgoutput binary mode; not produced by Laredo)
"""

from __future__ import annotations

import struct
from typing import Final

from laredo_kernel.errors import ProtocolError


class _Unchanged:
    """Marker for an unchanged TOASTed value: keep whatever the consumer already stores. One instance,
    UNCHANGED, compared by identity: copies and unpickled ones are UNCHANGED itself (__reduce__)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNCHANGED"

    def __reduce__(self) -> str:
        return "UNCHANGED"


UNCHANGED: Final = _Unchanged()

RawValue = bytes | None | _Unchanged
_INT16 = struct.Struct("!h")
_INT32 = struct.Struct("!i")


def decode_tuple(buf: bytes | memoryview, offset: int = 0) -> tuple[list[RawValue], int]:
    """Decode one TupleData at offset; return the raw values and the offset just past it."""
    try:
        (ncols,) = _INT16.unpack_from(buf, offset)
    except struct.error:
        raise ProtocolError(f"truncated tuple: no column count at byte {offset}") from None
    if ncols < 0:
        raise ProtocolError(f"corrupt tuple: negative column count {ncols} at byte {offset}")
    pos = offset + 2
    end = len(buf)
    values: list[RawValue] = []
    append = values.append
    for col in range(ncols):
        if pos >= end:
            raise ProtocolError(f"truncated tuple: column {col} of {ncols} missing at byte {pos}")
        kind = buf[pos]
        if kind == 0x74 or kind == 0x62:  # 't' text, 'b' binary
            if pos + 5 > end:
                raise ProtocolError(f"truncated tuple: length of column {col} cut at byte {pos}")
            (length,) = _INT32.unpack_from(buf, pos + 1)
            start = pos + 5
            pos = start + length
            if length < 0 or pos > end:
                raise ProtocolError(f"corrupt tuple: column {col} claims {length} bytes, {end - start} remain")
            append(bytes(buf[start:pos]))
        elif kind == 0x6E:  # 'n'
            append(None)
            pos += 1
        elif kind == 0x75:  # 'u'
            append(UNCHANGED)
            pos += 1
        else:
            raise ProtocolError(f"corrupt tuple: unknown column kind {kind:#04x} for column {col} at byte {pos}")
    return values, pos


def decode_tuple_exact(buf: bytes | memoryview) -> list[RawValue]:
    """Decode a buffer that holds exactly one TupleData."""
    values, end = decode_tuple(buf, 0)
    if end != len(buf):
        raise ProtocolError(f"corrupt tuple: {len(buf) - end} trailing bytes after {len(values)} columns")
    return values


def encode_tuple(values: list[RawValue] | tuple[RawValue, ...]) -> bytes:
    """Encode raw values (text-form bytes, None, UNCHANGED) as TupleData."""
    parts = [_INT16.pack(len(values))]
    for value in values:
        if value is None:
            parts.append(b"n")
        elif value is UNCHANGED:
            parts.append(b"u")
        else:
            parts.append(b"t" + _INT32.pack(len(value)) + value)  # type: ignore[arg-type, operator]
    return b"".join(parts)
