"""The change-stream domain: tables, columns and row changes, independent of any wire format."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from laredo_kernel.position import Position


class Action(enum.Enum):
    INSERT = "INSERT"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    TRUNCATE = "TRUNCATE"


class BatchKind(enum.Enum):
    TRANSACTION = "TRANSACTION"
    BASELINE_BEGIN = "BASELINE_BEGIN"
    BASELINE_ROWS = "BASELINE_ROWS"
    BASELINE_END = "BASELINE_END"
    SCHEMA_CHANGE = "SCHEMA_CHANGE"
    RESYNC_REQUIRED = "RESYNC_REQUIRED"


@dataclass(frozen=True, slots=True)
class TableId:
    schema: str
    name: str

    @classmethod
    def parse(cls, text: str) -> TableId:
        schema, sep, name = text.partition(".")
        if not sep or not schema or not name:
            raise ValueError(f"invalid table {text!r}: expected 'schema.table', e.g. 'public.users'")
        return cls(schema, name)

    def __str__(self) -> str:
        return f"{self.schema}.{self.name}"


@dataclass(frozen=True, slots=True)
class ColumnInfo:
    name: str
    type_oid: int
    type_name: str = ""
    type_modifier: int = -1
    is_identity_key: bool = False
    not_null: bool = False
    primary_key_ordinal: int = 0
    base_type_oid: int = 0


@dataclass(frozen=True, slots=True)
class RowChange:
    """One applied-ready change: typed rows keyed by column name. `new` may hold UNCHANGED (laredo_kernel.tuples)
    for unchanged TOASTed values: the consumer keeps its stored value for those columns. `old` holds the replica
    identity key (old_is_key_only) or the full old row, or is None."""

    position: Position
    action: Action
    old: dict[str, Any] | None
    new: dict[str, Any] | None
    old_is_key_only: bool = False


@dataclass(frozen=True, slots=True)
class ChangeBatchInfo:
    """Everything a consumer needs to apply one stream message, with typed changes."""

    source_id: str
    kind: BatchKind
    table: TableId
    columns: tuple[ColumnInfo, ...]
    commit_lsn: int
    end_lsn: int
    xid: int
    commit_time_unix_us: int
    chunk: int
    last_chunk: bool
    changes: list[RowChange] = field(default_factory=list)
    baseline_id: str = ""
    baseline_row_count: int = 0
    old_columns: tuple[ColumnInfo, ...] = ()
    reason: str = ""
    epoch: int = 0  # the source's WAL epoch (laredo_kernel.position.Position.epoch)

    def position(self, ordinal: int) -> Position:
        """A position of this message's transaction or baseline (control batches: BASELINE_BEGIN's, END's)."""
        return Position(self.commit_lsn, ordinal, self.epoch)

    @property
    def key_columns(self) -> tuple[str, ...]:
        """Primary-key columns in key order; the replica identity key if there is no primary key."""
        pk = sorted((c for c in self.columns if c.primary_key_ordinal), key=lambda c: c.primary_key_ordinal)
        if pk:
            return tuple(c.name for c in pk)
        return tuple(c.name for c in self.columns if c.is_identity_key)
