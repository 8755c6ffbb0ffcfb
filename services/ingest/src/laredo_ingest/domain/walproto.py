"""Streaming replication framing around pgoutput: XLogData, primary keepalive, standby status update."""

from __future__ import annotations

import struct
from typing import NamedTuple

from laredo_kernel.errors import ProtocolError

XLOG_DATA = 0x77  # 'w'
PRIMARY_KEEPALIVE = 0x6B  # 'k'
#: Offset of the pgoutput message inside an XLogData frame ('w', start, end, send time).
XLOG_DATA_HEADER_SIZE = 25
#: 2000-01-01 00:00:00 UTC in unix microseconds: PostgreSQL timestamps count from there.
PG_EPOCH_UNIX_US = 946_684_800_000_000

_KEEPALIVE = struct.Struct("!QqB")
_STATUS = struct.Struct("!cQQQqB")


class Keepalive(NamedTuple):
    wal_end: int  # how far the server has sent (decoded) WAL
    send_time_pg_us: int
    reply_requested: bool


def parse_keepalive(frame: bytes | memoryview) -> Keepalive:
    if len(frame) < 1 + _KEEPALIVE.size:
        raise ProtocolError(f"truncated primary keepalive: {len(frame)} bytes")
    wal_end, send_time, reply = _KEEPALIVE.unpack_from(frame, 1)
    return Keepalive(wal_end, send_time, bool(reply))


def standby_status_update(write_lsn: int, flush_lsn: int, apply_lsn: int, now_unix_us: int,
                          *, reply_requested: bool = False) -> bytes:
    """The 'r' message that tells the server what the client has written, flushed and applied."""
    return _STATUS.pack(b"r", write_lsn, flush_lsn, apply_lsn, now_unix_us - PG_EPOCH_UNIX_US,
                        1 if reply_requested else 0)


def pg_time_to_unix_us(pg_us: int) -> int:
    return pg_us + PG_EPOCH_UNIX_US
