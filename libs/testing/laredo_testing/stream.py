"""ChangeBatch messages as ingest publishes them, for tests of the services that consume the stream.

A service's test kit subclasses Batches with its own table and columns as defaults, e.g.
`@dataclass class Batches(stream.Batches): table: TableId = TABLE; columns: tuple[ColumnInfo, ...] = COLUMNS`.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from laredo.stream.v1 import change_stream_pb2 as spb
from laredo_kernel.changes import ColumnInfo, TableId
from laredo_kernel.position import BASELINE_ORDINAL_BASE
from laredo_core.stream.codec import columns_to_proto
from laredo_kernel.tuples import UNCHANGED, encode_tuple


def raw(value: Any) -> Any:
    """A typed test value as pgoutput text form (None, UNCHANGED kept)."""
    if value is None or value is UNCHANGED:
        return value
    if isinstance(value, bool):
        return b"t" if value else b"f"
    return str(value).encode()


def tuple_of(row: Mapping[str, Any], columns: Sequence[ColumnInfo], *, key_only: bool = False) -> bytes:
    """The TupleData of a row (absent columns are NULL); only the identity key columns with `key_only`."""
    return encode_tuple([
        raw(row.get(c.name)) if (not key_only or c.is_identity_key) else None for c in columns
    ])


@dataclass
class Batches:
    """Builds serialized ChangeBatch messages for one table; LSNs grow on every transaction."""

    table: TableId
    columns: tuple[ColumnInfo, ...]
    source_id: str = "pg"
    lsn: int = 0x1000000
    xid: int = 700
    _ids: itertools.count = field(default_factory=lambda: itertools.count(1))

    def _batch(self, kind: int, **fields: Any) -> spb.ChangeBatch:
        return spb.ChangeBatch(
            source_id=self.source_id, kind=kind,
            table=spb.TableRef(schema=self.table.schema, name=self.table.name, relation_id=16384),
            columns=columns_to_proto(self.columns), replica_identity=spb.REPLICA_IDENTITY_DEFAULT, **fields)

    def baseline(self, rows: Sequence[Mapping[str, Any]], *, chunk_rows: int = 100) -> list[bytes]:
        self.lsn += 0x100
        baseline_id = f"bl{next(self._ids)}"
        common = {"commit_lsn": self.lsn, "baseline_id": baseline_id}
        out = [self._batch(spb.BATCH_KIND_BASELINE_BEGIN, **common).SerializeToString()]
        for chunk, start in enumerate(range(0, len(rows), chunk_rows)):
            changes = [spb.Change(action=spb.ACTION_INSERT, ordinal=BASELINE_ORDINAL_BASE + start + i,
                                  new_tuple=tuple_of(row, self.columns))
                       for i, row in enumerate(rows[start:start + chunk_rows])]
            out.append(self._batch(spb.BATCH_KIND_BASELINE_ROWS, chunk=chunk, changes=changes,
                                   **common).SerializeToString())
        out.append(self._batch(spb.BATCH_KIND_BASELINE_END, baseline_row_count=len(rows), last_chunk=True,
                               **common).SerializeToString())
        return out

    def transaction(self, *changes: spb.Change, commit_time_unix_us: int = 1_700_000_000_000_000) -> bytes:
        self.lsn += 0x100
        self.xid += 1
        for ordinal, change in enumerate(changes):
            change.ordinal = ordinal
        return self._batch(spb.BATCH_KIND_TRANSACTION, commit_lsn=self.lsn, end_lsn=self.lsn + 0x30, xid=self.xid,
                           commit_time_unix_us=commit_time_unix_us, last_chunk=True,
                           changes=list(changes)).SerializeToString()

    def control(self, kind: int, reason: str = "") -> bytes:
        self.lsn += 0x100
        return self._batch(kind, commit_lsn=self.lsn, reason=reason).SerializeToString()

    def insert(self, row: Mapping[str, Any]) -> spb.Change:
        return spb.Change(action=spb.ACTION_INSERT, new_tuple=tuple_of(row, self.columns))

    def update(self, row: Mapping[str, Any], old_key: Mapping[str, Any] | None = None) -> spb.Change:
        change = spb.Change(action=spb.ACTION_UPDATE, new_tuple=tuple_of(row, self.columns))
        if old_key is not None:
            change.old_tuple = tuple_of(old_key, self.columns, key_only=True)
            change.old_is_key_only = True
        return change

    def delete(self, key: Mapping[str, Any]) -> spb.Change:
        return spb.Change(action=spb.ACTION_DELETE, old_tuple=tuple_of(key, self.columns, key_only=True),
                          old_is_key_only=True)


def truncate() -> spb.Change:
    return spb.Change(action=spb.ACTION_TRUNCATE)
