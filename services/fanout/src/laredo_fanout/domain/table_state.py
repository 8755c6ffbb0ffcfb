"""Fan-out's rows of one table: the shared table core (laredo_kernel.table_core), keyed by the tuple of the
primary-key columns' values, each row holding its wire form.

Values are JSON-compatible (the form laredo_kernel.jsonvalue gives: what clients see in a Struct and what
snapshots store as JSON lines), so a state restored from a snapshot serves exactly the bytes a state built
from the stream serves; no Python-typed value is needed after the stream codec converted it.

Invariants (besides the core's):
- a stored row's `encoded` is made once, when the row version is created, and shared by every reader;
- a stored row knows the position of the change that last wrote it (a reference to the change's own Position,
  nothing allocated per row); rows restored from a snapshot share the state's `restored_position` instead.
  A dead-letter replay decides by these positions (laredo_core.deadletters.supersede), as query does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from laredo_kernel.position import Position
from laredo_kernel.table_core import RowEffect as CoreEffect
from laredo_kernel.table_core import ColumnsKey, MissingKeyValue, TableCore

from laredo_fanout.domain.errors import RowWithoutKey

RowKey = tuple[Any, ...]
#: Builds the wire form of a row once, when the row version is created (see ports.SyncEncoder.encode_row).
RowEncoder = Callable[[Mapping[str, Any]], bytes]


@dataclass(frozen=True, slots=True)
class StoredRow:
    """One version of one row. `values` is never modified; `encoded` is its wire form, shared by every reader;
    `position`: of the change that wrote it (None: restored from a snapshot, see TableState.written_at)."""

    key: RowKey
    values: Mapping[str, Any]
    encoded: bytes
    position: Position | None = None


RowEffect = CoreEffect[StoredRow]


def _refused(missing: MissingKeyValue) -> RowWithoutKey:
    return RowWithoutKey(f"{missing}; absent, or an unchanged TOASTed value sent without the old key, so it cannot "
                         "be placed; give the table a primary key (or REPLICA IDENTITY FULL) in the source, then "
                         "replay the dead letters or reload the table")


class TableState(TableCore[StoredRow]):
    """Rows of one table by primary-key tuple, plus the baseline generation being loaded."""

    def __init__(self, key_columns: tuple[str, ...], encode: RowEncoder) -> None:
        self._encode = encode
        super().__init__(ColumnsKey(key_columns, _refused), self._row)
        #: The position of the snapshot the rows without a position of their own were restored from.
        self.restored_position: Position | None = None

    def _row(self, key: RowKey, values: Mapping[str, Any], position: Position | None) -> StoredRow:
        return StoredRow(key, values, self._encode(values), position)

    @property
    def key_columns(self) -> tuple[str, ...]:
        return self.key_rule.fields

    def written_at(self, row: StoredRow) -> Position | None:
        """The position of the change that last wrote `row` (the snapshot's for a restored row; None: unknown)."""
        return row.position if row.position is not None else self.restored_position

    def restore_rows(self, key_columns: tuple[str, ...], rows: Iterable[dict[str, Any]]) -> None:
        """Replace every row by `rows` (JSON-compatible values, e.g. from a snapshot); the caller sets
        `restored_position` to the snapshot's position."""
        self.restored_position = None
        self.restore(rows, key=ColumnsKey(key_columns, _refused))

    def rekey_columns(self, key_columns: tuple[str, ...]) -> None:
        """Switch to another primary key (schema change); rows keep their values."""
        if key_columns != self.key_columns:
            self.rekey(ColumnsKey(key_columns, _refused))

