"""Snapshot parts as Parquet files (`serializer = "parquet"`): typed columns where a value survives exactly.

A part decodes to exactly the rows a JSON-lines part of the same snapshot holds; a column whose value would not
come back unchanged is stored as JSON text in that part, and the file's `laredo.snapshot` metadata says how each
column is stored. Column types and the absent-columns column: docs/architecture.md, "Snapshot format".
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from laredo_kernel.changes import ColumnInfo
from laredo_core.snapshots.errors import SnapshotCorrupt
from laredo_core.snapshots.parquet_kinds import JSON, KINDS, Kind, NotExact, kind_of

__all__ = ["ABSENT_COLUMN", "METADATA_KEY", "decode_parquet", "encode_parquet", "kind_of"]

METADATA_KEY = b"laredo.snapshot"
ABSENT_COLUMN = "__laredo_absent"


def encode_parquet(rows: Sequence[Mapping[str, Any]], columns: Sequence[ColumnInfo]) -> bytes:
    """One Parquet file holding `rows` (JSON-compatible values); `columns` give the types (the manifest's)."""
    kinds = {c.name: kind_of(c) for c in columns}
    names = list(kinds)
    known = set(names)
    for row in rows:
        if row.keys() - known:
            extra = [name for name in row if name not in known]
            names += extra
            known.update(extra)
            kinds.update(dict.fromkeys(extra, "json"))
    absent_name = ABSENT_COLUMN
    while absent_name in known:
        absent_name += "_"
    fields, arrays, stored = [], [], []
    for name in names:
        kind, array = _column(KINDS[kinds[name]], [row.get(name) for row in rows])
        fields.append(pa.field(name, kind.arrow))
        arrays.append(array)
        stored.append({"name": name, "kind": kind.name})
    absent = [None if row.keys() == known else [n for n in names if n not in row] for row in rows]
    fields.append(pa.field(absent_name, pa.list_(pa.string())))
    arrays.append(pa.array(absent, type=pa.list_(pa.string())))
    metadata = {"version": 1, "columns": stored, "absent_column": absent_name}
    schema = pa.schema(fields, metadata={METADATA_KEY: json.dumps(metadata).encode("utf-8")})
    sink = io.BytesIO()
    pq.write_table(pa.Table.from_arrays(arrays, schema=schema), sink, compression="zstd")
    return sink.getvalue()


def _column(kind: Kind, values: list[Any]) -> tuple[Kind, pa.Array]:
    """The column as `kind` when every value survives it, else as JSON text."""
    try:
        return kind, kind.to_arrow(values)
    except (NotExact, pa.ArrowException, UnicodeEncodeError):
        return JSON, JSON.to_arrow(values)


def decode_parquet(data: bytes, where: str) -> list[dict[str, Any]]:
    """The rows of a Parquet part, exactly as encode_parquet got them; SnapshotCorrupt when it is not one."""
    try:
        table = pq.read_table(io.BytesIO(data))
        document = json.loads((table.schema.metadata or {})[METADATA_KEY])
        stored = [(str(c["name"]), KINDS[c["kind"]]) for c in document["columns"]]
        absent_name = str(document["absent_column"])
        columns = [kind.from_arrow(table.column(name)) for name, kind in stored]
        absent = table.column(absent_name).to_pylist()
    except (pa.ArrowException, OSError) as exc:
        raise SnapshotCorrupt(f"{where}: not a readable Parquet file ({exc})") from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise SnapshotCorrupt(f"{where}: not a laredo Parquet part (metadata {METADATA_KEY.decode()!r}: "
                              f"{type(exc).__name__}: {exc})") from None
    names = [name for name, _ in stored]
    rows = [dict(zip(names, values)) for values in zip(*columns)] if columns else [{} for _ in absent]
    for row, missing in zip(rows, absent):
        for name in missing or ():
            row.pop(name, None)
    return rows

