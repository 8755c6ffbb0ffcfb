"""A table whose rows are held as their wire form (pure): the compact storage of fan-out's and query's tables.

Each row version holds its key, the bytes readers are sent (made once, when the version is created, and shared
by every reader) and the position of the change that wrote it; its values are read back from the bytes when a
rule needs them (an unchanged TOASTed value, a table without a key, a re-key, an index, a filter), which keeps
a table near the size of its rows on the wire. Values are JSON-compatible (laredo_kernel.jsonvalue's form: what
clients see and what snapshots store), so a table restored from a snapshot holds exactly the bytes a table built
from the stream holds.

Invariants (besides laredo_kernel.table_core's):
- decoding a row's bytes gives the values they were made from (up to a float's whole value reading as the same
  int); values_of gives those values, or the very values a row was just made from;
- a row knows the position of the change that last wrote it (a reference to the change's own Position, nothing
  allocated per row); rows restored from a snapshot share the table's `restored_position` instead, and the rows
  of one baseline share the position of its first row (they are all of one snapshot: no dead letter falls
  between them, so a replay decides the same).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from laredo_kernel.position import BASELINE_ORDINAL_BASE, Position
from laredo_kernel.table_core import KeyRule, TableCore

#: Builds the wire form of a row from its values.
RowEncoder = Callable[[Mapping[str, Any]], bytes]
#: The values a row's wire form was made from.
RowDecoder = Callable[[bytes], dict[str, Any]]
#: Rows whose values were read recently: the clients of one filter, or one change's indexes, read a row in turn.
_DECODED_ROWS = 1024


@dataclass(slots=True, eq=False, repr=False)
class EncodedRow:
    """One version of one row, never modified: `encoded` is its wire form, shared by every reader; `position`:
    of the change that wrote it (None: restored from a snapshot, see EncodedTable.written_at). Its values are
    EncodedTable.values_of(row). Equal by identity: a version is one object."""

    key: Any
    encoded: bytes
    position: Position | None = None

    def __repr__(self) -> str:
        return f"EncodedRow({self.key!r}, {len(self.encoded)} bytes, at {self.position})"


class EncodedTable(TableCore[EncodedRow]):
    """Rows of one table by primary key, each held as its wire form, plus the baseline generation being loaded."""

    def __init__(self, key: KeyRule, encode: RowEncoder, decode: RowDecoder,
                 row_type: type[EncodedRow] = EncodedRow, *, read_new_rows: bool = False) -> None:
        """`read_new_rows`: the sink reads every new row's values (query's indexes), so the values a row is
        made from are kept for values_of instead of being decoded back."""
        self._encode, self._decode, self._row_type = encode, decode, row_type
        self._read_new_rows = read_new_rows
        self._decoded: dict[EncodedRow, Mapping[str, Any]] = {}
        super().__init__(key, self._row)
        #: The position of the snapshot the rows without a position of their own were restored from.
        self.restored_position: Position | None = None
        self._baseline_at: Position | None = None  # the first row's of the latest baseline

    def _row(self, key: Any, values: Mapping[str, Any], position: Position | None) -> EncodedRow:
        if position is not None and BASELINE_ORDINAL_BASE <= position.ordinal < 0:  # a baseline row
            shared = self._baseline_at
            if shared is not None and shared.lsn == position.lsn and shared.epoch == position.epoch:
                position = shared
            else:
                self._baseline_at = position
        row = self._row_type(key, self._encode(values), position)
        if self._read_new_rows:
            self._remember(row, values)
        return row

    def _remember(self, row: EncodedRow, values: Mapping[str, Any]) -> None:
        decoded = self._decoded
        if len(decoded) >= _DECODED_ROWS:
            decoded.clear()
        decoded[row] = values

    def values_of(self, row: EncodedRow) -> Mapping[str, Any]:
        """The row's values, read from its wire form; shared with other readers of the row: never modify them."""
        values = self._decoded.get(row)
        if values is None:
            values = self._decode(row.encoded)
            self._remember(row, values)
        return values

    def decode(self, row: EncodedRow) -> dict[str, Any]:
        """The row's values read afresh, past the cache of values_of: for reading many rows at once (a snapshot),
        in any thread."""
        return self._decode(row.encoded)

    def same_row(self, stored: EncodedRow, new: EncodedRow) -> bool:
        return stored.encoded == new.encoded

    def written_at(self, row: EncodedRow) -> Position | None:
        """The position of the change that last wrote `row` (the snapshot's for a restored row; None: unknown)."""
        return row.position if row.position is not None else self.restored_position

    def restore_snapshot_rows(self, rows: Iterable[Mapping[str, Any]], key: KeyRule | None = None) -> None:
        """Replace every row by `rows` (JSON-compatible values, e.g. from a snapshot), keyed by `key` (by default
        as before); the caller sets `restored_position` to the snapshot's position."""
        self.restored_position = None
        self.restore(rows, key=key)
