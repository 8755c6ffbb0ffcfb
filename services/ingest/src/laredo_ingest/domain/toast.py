"""Unchanged TOASTed values ('u' in a new tuple) filled in from a complete old row (REPLICA IDENTITY FULL).

PostgreSQL does not repeat an out-of-line TOASTed value in an UPDATE's new tuple when the value did not
change. With REPLICA IDENTITY FULL the old tuple holds every value (the server inlines them), so the new
row can be completed here and downstream needs no earlier copy of the row. With other identities the
marker stays; consumers keep their stored value for it (laredo_kernel.tuples.UNCHANGED).
"""

from __future__ import annotations

import struct

from laredo_kernel.errors import ProtocolError
from laredo_kernel.tuples import UNCHANGED, decode_tuple_exact, encode_tuple

_I16 = struct.Struct("!h")
_I32 = struct.Struct("!i")


def has_unchanged(tuple_data: bytes) -> bool:
    """Whether a TupleData holds a 'u' column; walks the column kinds without copying values."""
    try:
        (count,) = _I16.unpack_from(tuple_data, 0)
        pos = 2
        for _ in range(count):
            kind = tuple_data[pos]
            if kind == 0x75:  # 'u'
                return True
            if kind == 0x74 or kind == 0x62:  # 't', 'b'
                pos += 5 + _I32.unpack_from(tuple_data, pos + 1)[0]
            else:
                pos += 1
    except (struct.error, IndexError):
        raise ProtocolError(f"corrupt new tuple ({len(tuple_data)} bytes)") from None
    return False


def fill_unchanged_from_old(new_tuple: bytes, old_tuple: bytes) -> bytes:
    """new_tuple with each 'u' column replaced by the old tuple's value of that column."""
    if not has_unchanged(new_tuple):
        return new_tuple
    new, old = decode_tuple_exact(new_tuple), decode_tuple_exact(old_tuple)
    if len(new) != len(old):
        raise ProtocolError(f"update with {len(new)} new and {len(old)} old columns")
    return encode_tuple([o if n is UNCHANGED else n for n, o in zip(new, old)])
