"""The rows of one table keyed by primary key; every change replaces whole immutable rows.

Values are JSON-compatible (the form laredo_kernel.jsonvalue gives: what clients see in a Struct and what
snapshots store as JSON lines), so a state restored from a snapshot serves exactly the bytes a state built
from the stream serves; no Python-typed value is needed after the stream codec converted it.

Invariants:
- a stored row is never mutated (its `values` dict is never changed after creation, by convention: a
  plain dict costs less memory than a read-only proxy): a change builds a new StoredRow, so a snapshot
  is a list copy;
- applying the same change twice has the effect of applying it once (idempotent by key);
- an unchanged TOASTed value (UNCHANGED) keeps the stored value of that column;
- a stored row knows the position of the change that last wrote it (a reference to the change's own Position,
  nothing allocated per row); rows restored from a snapshot share the state's `restored_position` instead.
  A dead-letter replay decides by these positions (laredo_core.deadletters.supersede), as query does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from laredo_kernel.changes import Action, RowChange
from laredo_kernel.position import Position
from laredo_kernel.rows import hashable, merge_unchanged, values_match
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


@dataclass(frozen=True, slots=True)
class RowEffect:
    """What one change did: the row before and after it (None = absent). TRUNCATE has neither."""

    action: Action
    old: StoredRow | None
    new: StoredRow | None


class TableState:
    """Rows of one table by primary-key tuple, plus the baseline generation being loaded."""

    def __init__(self, key_columns: tuple[str, ...], encode: RowEncoder) -> None:
        self._key_columns = key_columns
        self._encode = encode
        self._rows: dict[RowKey, StoredRow] = {}
        self._baseline_id: str | None = None
        self._baseline_seen: set[RowKey] = set()
        #: The position of the snapshot the rows without a position of their own were restored from.
        self.restored_position: Position | None = None

    @property
    def key_columns(self) -> tuple[str, ...]:
        return self._key_columns

    def __len__(self) -> int:
        return len(self._rows)

    def get(self, key: RowKey) -> StoredRow | None:
        return self._rows.get(key)

    def written_at(self, row: StoredRow) -> Position | None:
        """The position of the change that last wrote `row` (the snapshot's for a restored row; None: unknown)."""
        return row.position if row.position is not None else self.restored_position

    @property
    def baseline_in_progress(self) -> bool:
        """Between a baseline's BEGIN and END: the rows seen so far exist only in memory, not in a snapshot."""
        return self._baseline_id is not None

    def restore(self, key_columns: tuple[str, ...], rows: Iterable[dict[str, Any]]) -> None:
        """Replace every row by `rows` (JSON-compatible values, e.g. from a snapshot); the caller sets
        `restored_position` to the snapshot's position."""
        self._key_columns = key_columns
        self._baseline_id, self._baseline_seen = None, set()
        self.restored_position = None
        self._rows = {}
        for values in rows:
            key = self.key_of(values)
            self._rows[key] = StoredRow(key, values, self._encode(values))

    def rows(self) -> list[StoredRow]:
        """A point-in-time copy: later changes replace rows in the table, never in this list."""
        return list(self._rows.values())

    def key_of(self, values: Mapping[str, Any]) -> RowKey:
        columns = self._key_columns or tuple(values)
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

    def rekey(self, key_columns: tuple[str, ...]) -> None:
        """Switch to another primary key (schema change); rows keep their values."""
        if key_columns == self._key_columns:
            return
        self._key_columns = key_columns
        rows = list(self._rows.values())
        self._rows = {}
        for row in rows:
            key = self.key_of(row.values)
            self._rows[key] = StoredRow(key, row.values, row.encoded, row.position)
        self._baseline_seen = set()

    def apply(self, change: RowChange) -> RowEffect | None:
        """Apply one streamed change; None when it changed nothing (e.g. a replay)."""
        if change.action is Action.TRUNCATE:
            self._rows = {}
            return RowEffect(Action.TRUNCATE, None, None)
        if change.action is Action.DELETE:
            key = self._find_key(change.old or {})
            previous = self._rows.pop(key, None) if key is not None else None
            return RowEffect(Action.DELETE, previous, None) if previous is not None else None
        old_key = self._find_key(change.old) if change.old else None
        return self._put(change.action, change.new or {}, old_key, change.position)

    def begin_baseline(self, baseline_id: str) -> None:
        """Start a baseline generation: rows it does not contain are removed at its end."""
        self._baseline_id = baseline_id
        self._baseline_seen = set()

    def apply_baseline_row(self, baseline_id: str, change: RowChange) -> RowEffect | None:
        if baseline_id != self._baseline_id:
            # Rows of a baseline whose BEGIN we never saw (stream trimmed): they start the generation.
            self.begin_baseline(baseline_id)
        effect = self._put(Action.INSERT, change.new or {}, None, change.position)
        self._baseline_seen.add(effect.new.key if effect is not None and effect.new is not None
                                else self.key_of(change.new or {}))
        return effect

    def end_baseline(self, baseline_id: str) -> list[RowEffect]:
        """Remove every row the generation did not contain; returns one DELETE effect per removed row."""
        if baseline_id != self._baseline_id:
            self.begin_baseline(baseline_id)  # an empty baseline: nothing seen, every row goes
        seen, self._baseline_seen, self._baseline_id = self._baseline_seen, set(), None
        stale = [key for key in self._rows if key not in seen]
        return [RowEffect(Action.DELETE, self._rows.pop(key), None) for key in stale]

    def _put(self, action: Action, new_values: Mapping[str, Any], old_key: RowKey | None,
             position: Position) -> RowEffect | None:
        key = self.key_of(new_values)
        source_key = key if old_key is None else old_key
        previous = self._rows.get(source_key)
        moves = source_key != key and previous is not None  # the primary key changed: the row moves
        if source_key != key and previous is None:
            previous = self._rows.get(key)  # a replayed move: the row already sits at its new key
        values = merge_unchanged(new_values, previous.values if previous is not None else None)
        if moves:
            del self._rows[source_key]
        elif previous is not None and previous.values == values:
            return None
        row = StoredRow(key, values, self._encode(values), position)
        self._rows[key] = row
        return RowEffect(action, previous, row)

    def find_key(self, partial: Mapping[str, Any]) -> RowKey | None:
        """The key of the row an old tuple (a key or a full row) names, None when no row matches."""
        return self._find_key(partial)

    def _find_key(self, partial: Mapping[str, Any]) -> RowKey | None:
        """The key of the row an old tuple names; a scan when it holds other columns than the key."""
        if all(c in partial for c in self._key_columns):
            return self.key_of(partial)
        match = [r.key for r in self._rows.values() if values_match(r.values, partial.items())]
        return match[0] if match else None


def _no_key(columns: tuple[str, ...], missing: str) -> str:
    return (f"the row lacks the value of key column {missing!r} (key: {', '.join(columns)}; absent, or an unchanged "
            "TOASTed value sent without the old key), so it cannot be placed; give the table a primary key (or "
            "REPLICA IDENTITY FULL) in the source, then replay the dead letters or reload the table")
