"""Synthetic change stream for bench/fanout.py: the rows of public.bench_items as COPY rows and ChangeBatches."""

from __future__ import annotations

import time
from collections.abc import Iterator

from laredo.stream.v1 import change_stream_pb2 as spb
from laredo_kernel.changes import ColumnInfo
from laredo_kernel.position import BASELINE_ORDINAL_BASE
from laredo_core.stream.codec import columns_to_proto
from laredo_kernel.tuples import encode_tuple

TABLE = "bench_items"
COLUMNS = (
    ColumnInfo("id", 20, "int8", is_identity_key=True, not_null=True, primary_key_ordinal=1),
    ColumnInfo("name", 25, "text", not_null=True),
    ColumnInfo("qty", 23, "int4"),
    ColumnInfo("updated_at", 1184, "timestamptz"),
)
_PROTO_COLUMNS = columns_to_proto(COLUMNS)
_SNAPSHOT_LSN = 0x1000000
_state = {"lsn": _SNAPSHOT_LSN, "xid": 1000, "round": 0}


def text_row(i: int, qty: int) -> list[bytes]:
    return [str(i).encode(), f"item {i}".encode(), str(qty).encode(), b"2026-11-22 10:00:00+00"]


def copy_rows(count: int) -> Iterator[tuple[object, ...]]:
    for i in range(1, count + 1):
        yield i, f"item {i}", i % 1000, "2026-11-22 10:00:00+00"


def _batch(kind: int, **fields: object) -> spb.ChangeBatch:
    return spb.ChangeBatch(source_id="bench", kind=kind, table=spb.TableRef(schema="public", name=TABLE),
                           columns=_PROTO_COLUMNS, replica_identity=spb.REPLICA_IDENTITY_DEFAULT, **fields)


def baseline_messages(count: int, chunk: int = 1000) -> list[bytes]:
    """BEGIN, rows in chunks, END: the same rows as copy_rows()."""
    common = {"commit_lsn": _SNAPSHOT_LSN, "baseline_id": "bench-baseline"}
    out = [_batch(spb.BATCH_KIND_BASELINE_BEGIN, **common).SerializeToString()]
    for index, start in enumerate(range(1, count + 1, chunk)):
        changes = [spb.Change(action=spb.ACTION_INSERT, ordinal=BASELINE_ORDINAL_BASE + i - 1,
                              new_tuple=encode_tuple(text_row(i, i % 1000)))
                   for i in range(start, min(start + chunk, count + 1))]
        out.append(_batch(spb.BATCH_KIND_BASELINE_ROWS, chunk=index, changes=changes, **common).SerializeToString())
    out.append(_batch(spb.BATCH_KIND_BASELINE_END, baseline_row_count=count, last_chunk=True,
                      **common).SerializeToString())
    return out


def update_transaction(first: int, count: int, rows: int) -> bytes:
    """One transaction updating `count` rows from row `first`; every call sets a new qty, so every update counts
    (one journal entry each). Its commit time is now: the latency figure is publish -> client.
    """
    _state["lsn"] += 0x100
    _state["xid"] += 1
    _state["round"] += 1
    qty = 100_000 + _state["round"]
    changes = [spb.Change(action=spb.ACTION_UPDATE, ordinal=o, new_tuple=encode_tuple(text_row((first + o) % rows + 1,
                                                                                             qty)))
               for o in range(count)]
    return _batch(spb.BATCH_KIND_TRANSACTION, commit_lsn=_state["lsn"], end_lsn=_state["lsn"] + 0x30,
                  xid=_state["xid"], commit_time_unix_us=time.time_ns() // 1000, last_chunk=True,
                  changes=changes).SerializeToString()
