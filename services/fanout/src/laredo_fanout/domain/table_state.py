"""Fan-out's rows of one table: the shared table core (laredo_kernel.table_core), keyed by the primary-key
columns' values (the value itself for a one-column key, a tuple otherwise), each row holding only its wire
form: its values are read back from it when a rule needs them (an unchanged TOASTed value, a table without a
key, a re-key, a filtered client, a snapshot), which keeps the state near the size of the rows on the wire.

Values are JSON-compatible (the form laredo_kernel.jsonvalue gives: what clients see in a Struct and what
snapshots store as JSON lines), so a state restored from a snapshot serves exactly the bytes a state built
from the stream serves; no Python-typed value is needed after the stream codec converted it.

Invariants (besides the core's):
- a stored row's `encoded` is made once, when the row version is created, and shared by every reader;
  decoding it gives the values it was made from (ports.SyncEncoder.decode_row);
- a stored row knows the position of the change that last wrote it (a reference to the change's own Position,
  nothing allocated per row); rows restored from a snapshot share the state's `restored_position` instead, and
  the rows of one baseline share the position of its first row (they are all of one snapshot: no dead letter
  falls between them, so a replay decides the same).
  A dead-letter replay decides by these positions (laredo_core.deadletters.supersede), as query does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from laredo_kernel.position import BASELINE_ORDINAL_BASE, Position
from laredo_kernel.table_core import RowEffect as CoreEffect
from laredo_kernel.table_core import ColumnsKey, MissingKeyValue, TableCore

from laredo_fanout.domain.errors import RowWithoutKey

#: A row's key: its key column's value, or the tuple of its key columns' values (see _Key).
RowKey = Any
#: Builds the wire form of a row once, when the row version is created (see ports.SyncEncoder.encode_row).
RowEncoder = Callable[[Mapping[str, Any]], bytes]
#: The values a row's wire form was made from (see ports.SyncEncoder.decode_row).
RowDecoder = Callable[[bytes], dict[str, Any]]
#: Rows whose values were read recently: the clients of one filter read each new row in turn.
_DECODED_ROWS = 1024


class StoredRow:
    """One version of one row, never modified: `encoded` is its wire form, shared by every reader; `position`:
    of the change that wrote it (None: restored from a snapshot, see TableState.written_at). Its values are
    TableState.values_of(row). Equal by identity: a version is one object."""

    __slots__ = ("key", "encoded", "position")

    def __init__(self, key: RowKey, encoded: bytes, position: Position | None = None) -> None:
        self.key, self.encoded, self.position = key, encoded, position

    def __repr__(self) -> str:
        return f"StoredRow({self.key!r}, {len(self.encoded)} bytes, at {self.position})"


RowEffect = CoreEffect[StoredRow]


class _Key(ColumnsKey):
    """The key rule of laredo_kernel.table_core.key_values, a one-column key as the value itself: a 1-tuple per
    row would cost 48 bytes."""

    __slots__ = ()

    def __init__(self, fields: tuple[str, ...]) -> None:
        super().__init__(fields, _refused)

    def of_row(self, values: Mapping[str, Any]) -> RowKey:
        key = ColumnsKey.of_row(self, values)
        return key[0] if len(key) == 1 else key


def _refused(missing: MissingKeyValue) -> RowWithoutKey:
    return RowWithoutKey(f"{missing}; absent, or an unchanged TOASTed value sent without the old key, so it cannot "
                         "be placed; give the table a primary key (or REPLICA IDENTITY FULL) in the source, then "
                         "replay the dead letters or reload the table")


class TableState(TableCore[StoredRow]):
    """Rows of one table by primary key, plus the baseline generation being loaded."""

    def __init__(self, key_columns: tuple[str, ...], encode: RowEncoder, decode: RowDecoder) -> None:
        self._encode, self._decode = encode, decode
        self._decoded: dict[StoredRow, dict[str, Any]] = {}
        super().__init__(_Key(key_columns), self._row)
        #: The position of the snapshot the rows without a position of their own were restored from.
        self.restored_position: Position | None = None
        self._baseline_at: Position | None = None  # the first row's of the latest baseline

    def _row(self, key: RowKey, values: Mapping[str, Any], position: Position | None) -> StoredRow:
        if position is not None and BASELINE_ORDINAL_BASE <= position.ordinal < 0:  # a baseline row
            shared = self._baseline_at
            if shared is not None and shared.lsn == position.lsn and shared.epoch == position.epoch:
                position = shared
            else:
                self._baseline_at = position
        return StoredRow(key, self._encode(values), position)

    def values_of(self, row: StoredRow) -> dict[str, Any]:
        """The row's values, read from its wire form; shared with other readers of the row: never modify them."""
        values = self._decoded.get(row)
        if values is None:
            if len(self._decoded) >= _DECODED_ROWS:
                self._decoded.clear()
            values = self._decoded[row] = self._decode(row.encoded)
        return values

    def decode(self, row: StoredRow) -> dict[str, Any]:
        """The row's values read afresh, past the cache of values_of: for reading many rows at once (a snapshot),
        in any thread."""
        return self._decode(row.encoded)

    def same_row(self, stored: StoredRow, new: StoredRow) -> bool:
        return stored.encoded == new.encoded

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
        self.restore(rows, key=_Key(key_columns))

    def rekey_columns(self, key_columns: tuple[str, ...]) -> None:
        """Switch to another primary key (schema change); rows keep their values."""
        if key_columns != self.key_columns:
            self.rekey(_Key(key_columns))

