"""Test helpers for the query service: ChangeBatch messages as ingest publishes them, and row builders."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from laredo_testing import stream
from laredo_testing.stream import truncate as truncate

from laredo_kernel.changes import ColumnInfo, TableId

TABLE = TableId("public", "items")
SOURCE = "pg"
COLUMNS = (
    ColumnInfo("id", 20, "int8", is_identity_key=True, not_null=True, primary_key_ordinal=1),
    ColumnInfo("email", 25, "text"),
    ColumnInfo("status", 25, "text"),
    ColumnInfo("qty", 23, "int4"),
    ColumnInfo("doc", 25, "text"),
)


@dataclass
class Batches(stream.Batches):
    """Serialized ChangeBatch messages for TABLE (or another table) as ingest publishes them."""

    table: TableId = TABLE
    columns: tuple[ColumnInfo, ...] = COLUMNS


# Changes of TABLE's rows (the builders only read the columns, so one instance serves every call).
insert, update, delete = Batches().insert, Batches().update, Batches().delete


def row(i: int, status: str = "new", qty: int | None = None, doc: Any = "d",
        email: str | None = None) -> dict[str, Any]:
    return {"id": i, "email": email if email is not None else f"u{i}@example.com", "status": status,
            "qty": i % 7 if qty is None else qty, "doc": doc}


def client_row(values: Mapping[str, Any]) -> dict[str, Any]:
    """A typed row as a client sees it through Struct (numbers are doubles)."""
    return {k: (float(v) if isinstance(v, int) and not isinstance(v, bool) else v) for k, v in values.items()}
