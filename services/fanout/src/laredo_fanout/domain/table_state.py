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

from laredo_kernel.changes import RowChange
from laredo_kernel.position import Position
from laredo_kernel.rows import hashable
from laredo_kernel.table_core import RowEffect as CoreEffect
from laredo_kernel.table_core import TableCore
from laredo_kernel.tuples import UNCHANGED

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


class ColumnsKey:
    """The key as the tuple of the key columns' values (every column's, for a table without a key)."""

    __slots__ = ("fields",)

    def __init__(self, fields: tuple[str, ...]) -> None:
        self.fields = fields

    def has_all(self, partial: Mapping[str, Any]) -> bool:
        return all(c in partial for c in self.fields)

    def of_row(self, values: Mapping[str, Any]) -> RowKey:
        columns = self.fields or tuple(values)
        try:
            key = tuple([values[c] for c in columns])
        except KeyError as exc:
            raise RowWithoutKey(_no_key(columns, exc.args[0])) from None
        if UNCHANGED in key:
            raise RowWithoutKey(_no_key(columns, next(c for c, v in zip(columns, key) if v is UNCHANGED)))
        try:
            hash(key)
        except TypeError:  # arrays or JSON in the key: rare, so checked only on failure
            key = tuple(hashable(v) for v in key)
        return key


class TableState:
    """Rows of one table by primary-key tuple, plus the baseline generation being loaded."""

    def __init__(self, key_columns: tuple[str, ...], encode: RowEncoder) -> None:
        self._encode = encode
        self._core: TableCore[StoredRow] = TableCore(ColumnsKey(key_columns), self._row)
        #: The position of the snapshot the rows without a position of their own were restored from.
        self.restored_position: Position | None = None

    def _row(self, key: RowKey, values: Mapping[str, Any], position: Position | None) -> StoredRow:
        return StoredRow(key, values, self._encode(values), position)

    @property
    def key_columns(self) -> tuple[str, ...]:
        return self._core.key_rule.fields

    def __len__(self) -> int:
        return len(self._core)

    def get(self, key: RowKey) -> StoredRow | None:
        return self._core.get(key)

    def written_at(self, row: StoredRow) -> Position | None:
        """The position of the change that last wrote `row` (the snapshot's for a restored row; None: unknown)."""
        return row.position if row.position is not None else self.restored_position

    @property
    def baseline_in_progress(self) -> bool:
        """Between a baseline's BEGIN and END: the rows seen so far exist only in memory, not in a snapshot."""
        return self._core.baseline_in_progress

    def restore(self, key_columns: tuple[str, ...], rows: Iterable[dict[str, Any]]) -> None:
        """Replace every row by `rows` (JSON-compatible values, e.g. from a snapshot); the caller sets
        `restored_position` to the snapshot's position."""
        self._core = TableCore(ColumnsKey(key_columns), self._row)
        self.restored_position = None
        self._core.restore(rows)

    def rows(self) -> list[StoredRow]:
        """A point-in-time copy: later changes replace rows in the table, never in this list."""
        return self._core.rows()

    def key_of(self, values: Mapping[str, Any]) -> RowKey:
        return self._core.key_of(values)

    def rekey(self, key_columns: tuple[str, ...]) -> None:
        """Switch to another primary key (schema change); rows keep their values."""
        if key_columns != self.key_columns:
            self._core.rekey(ColumnsKey(key_columns))

    def apply(self, change: RowChange) -> RowEffect | None:
        """Apply one streamed change; None when it changed nothing (e.g. a replay)."""
        return self._core.apply(change)

    def begin_baseline(self, baseline_id: str) -> None:
        """Start a baseline generation: rows it does not contain are removed at its end."""
        self._core.begin_baseline(baseline_id)

    def apply_baseline_row(self, baseline_id: str, change: RowChange) -> RowEffect | None:
        return self._core.apply_baseline_row(baseline_id, change)

    def end_baseline(self, baseline_id: str) -> list[RowEffect]:
        """Remove every row the generation did not contain; returns one DELETE effect per removed row."""
        return self._core.end_baseline(baseline_id)

    def find_key(self, partial: Mapping[str, Any]) -> RowKey | None:
        """The key of the row an old tuple (a key or a full row) names, None when no row matches."""
        return self._core.find_key(partial)


def _no_key(columns: tuple[str, ...], missing: str) -> str:
    return (f"the row lacks the value of key column {missing!r} (key: {', '.join(columns)}; absent, or an unchanged "
            "TOASTed value sent without the old key), so it cannot be placed; give the table a primary key (or "
            "REPLICA IDENTITY FULL) in the source, then replay the dead letters or reload the table")
