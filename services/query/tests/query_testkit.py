"""Test helpers for the query service: ChangeBatch messages as ingest publishes them, and row builders."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from laredo.stream.v1 import change_stream_pb2 as spb
from laredo_core.changes import ColumnInfo, TableId
from laredo_core.position import BASELINE_ORDINAL_BASE
from laredo_core.stream.codec import columns_to_proto
from laredo_core.tuples import UNCHANGED, encode_tuple

TABLE = TableId("public", "items")
SOURCE = "pg"
COLUMNS = (
    ColumnInfo("id", 20, "int8", is_identity_key=True, not_null=True, primary_key_ordinal=1),
    ColumnInfo("email", 25, "text"),
    ColumnInfo("status", 25, "text"),
    ColumnInfo("qty", 23, "int4"),
    ColumnInfo("doc", 25, "text"),
)


def raw(value: Any) -> Any:
    """A typed test value as pgoutput text form (None, UNCHANGED kept)."""
    if value is None or value is UNCHANGED:
        return value
    if isinstance(value, bool):
        return b"t" if value else b"f"
    return str(value).encode()


def tuple_of(row: Mapping[str, Any], columns: Sequence[ColumnInfo] = COLUMNS, *, key_only: bool = False) -> bytes:
    return encode_tuple([
        raw(row.get(c.name)) if (not key_only or c.is_identity_key) else None for c in columns
    ])


@dataclass
class Batches:
    """Builds serialized ChangeBatch messages for one table; LSNs grow on every transaction."""

    table: TableId = TABLE
    columns: tuple[ColumnInfo, ...] = COLUMNS
    source_id: str = SOURCE
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


def insert(row: Mapping[str, Any]) -> spb.Change:
    return Batches().insert(row)


def update(row: Mapping[str, Any], old_key: Mapping[str, Any] | None = None) -> spb.Change:
    return Batches().update(row, old_key)


def delete(key: Mapping[str, Any]) -> spb.Change:
    return Batches().delete(key)


def truncate() -> spb.Change:
    return spb.Change(action=spb.ACTION_TRUNCATE)


def row(i: int, status: str = "new", qty: int | None = None, doc: Any = "d",
        email: str | None = None) -> dict[str, Any]:
    return {"id": i, "email": email if email is not None else f"u{i}@example.com", "status": status,
            "qty": i % 7 if qty is None else qty, "doc": doc}


def client_row(values: Mapping[str, Any]) -> dict[str, Any]:
    """A typed row as a client sees it through Struct (numbers are doubles)."""
    return {k: (float(v) if isinstance(v, int) and not isinstance(v, bool) else v) for k, v in values.items()}
