"""The rows of one table by canonical primary key; every change replaces whole immutable row versions.

Invariants:
- a stored row version is never mutated (its cached wire form aside), so a snapshot is a list copy;
- applying a change twice has the effect of applying it once (idempotent by key; positions are the
  caller's business);
- an unchanged TOASTed value (UNCHANGED) keeps the stored value of that column;
- an UPDATE whose old key differs from its new key moves the row; a row it displaces is reported.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from laredo_kernel.changes import Action, RowChange
from laredo_kernel.position import Position
from laredo_kernel.rows import merge_unchanged, values_match
from laredo_kernel.tuples import UNCHANGED

from laredo_query.domain.errors import RowWithoutKey
from laredo_query.domain.keys import Key, KeySpec


_UNKNOWN: Any = object()


class StoredRow:
    """One version of one row: its canonical key, typed values (read-only by convention) and the
    position of the change that wrote it. `wire` caches the row's serialized form for readers."""

    __slots__ = ("key", "values", "position", "wire")

    def __init__(self, key: Key, values: dict[str, Any], position: Position | None) -> None:
        self.key = key
        self.values = values
        self.position = position
        self.wire: bytes | None = None

    def __repr__(self) -> str:
        return f"StoredRow({self.key!r}, {self.values!r})"


@dataclass(frozen=True, slots=True)
class RowEffect:
    """What one change did: the row before and after (None = absent); TRUNCATE has neither.

    `displaced` is a different row that sat at the new key of a moved row and was overwritten.
    """

    action: Action
    old: StoredRow | None
    new: StoredRow | None
    displaced: StoredRow | None = None


class RowStore:
    """Rows by primary key, plus the baseline generation being loaded."""

    def __init__(self, spec: KeySpec) -> None:
        self.spec = spec
        self._rows: dict[Key, StoredRow] = {}
        self._baseline_id: str | None = None
        self._baseline_seen: set[Key] = set()

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, key: Key) -> bool:
        return key in self._rows

    def get(self, key: Key) -> StoredRow | None:
        return self._rows.get(key)

    def rows(self) -> list[StoredRow]:
        """A point-in-time copy: later changes replace rows in the store, never in this list."""
        return list(self._rows.values())

    def keys(self) -> Iterable[Key]:
        return self._rows.keys()

    @property
    def baseline_in_progress(self) -> bool:
        """Between a baseline's BEGIN and END (its generation is open)."""
        return self._baseline_id is not None

    def rekey(self, spec: KeySpec) -> None:
        """Key rows by another primary key (or another kind of key column); rows keep their values."""
        self.spec = spec
        rows, self._rows = list(self._rows.values()), {}
        for row in rows:
            key = spec.of_row(row.values)
            self._rows[key] = StoredRow(key, row.values, row.position)
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
        return self._put(change.new or {}, old_key, change.position)

    def begin_baseline(self, baseline_id: str) -> None:
        """Start a baseline generation: rows it does not contain are removed at its end."""
        self._baseline_id = baseline_id
        self._baseline_seen = set()

    def apply_baseline_row(self, baseline_id: str, change: RowChange) -> RowEffect | None:
        if baseline_id != self._baseline_id:
            # Rows of a baseline whose BEGIN we never saw (stream trimmed): they start the generation.
            self.begin_baseline(baseline_id)
        values = change.new or {}
        key = self._key_of(values)
        self._baseline_seen.add(key)
        return self._put(values, None, change.position, key)

    def end_baseline(self, baseline_id: str) -> list[RowEffect]:
        """Remove every row the generation did not contain; one DELETE effect per removed row."""
        if baseline_id != self._baseline_id:
            self.begin_baseline(baseline_id)  # an empty baseline: nothing seen, every row goes
        seen, self._baseline_seen, self._baseline_id = self._baseline_seen, set(), None
        stale = [key for key in self._rows if key not in seen]
        return [RowEffect(Action.DELETE, self._rows.pop(key), None) for key in stale]

    def key_of(self, values: Mapping[str, Any]) -> Key:
        """The primary key of a row's values; RowWithoutKey when a key value is absent or UNCHANGED."""
        return self._key_of(values)

    def find_key(self, partial: Mapping[str, Any]) -> Key | None:
        """The key of the stored row an old tuple (key or full row) names, None if no row matches."""
        return self._find_key(partial)

    def _key_of(self, values: Mapping[str, Any]) -> Key:
        fields = self.spec.fields
        for field in fields:
            if values.get(field, UNCHANGED) is UNCHANGED:
                break
        else:
            return self.spec.of_row(values)
        missing = [f for f in fields if values.get(f, UNCHANGED) is UNCHANGED]
        raise RowWithoutKey(f"the row lacks the value of key column(s) {', '.join(missing)} (absent, or an "
                            f"unchanged TOASTed value with no old key sent; key: {', '.join(fields)}), so it "
                            "cannot be placed")

    def _put(self, new_values: Mapping[str, Any], old_key: Key | None, position: Position,
             key: Key = _UNKNOWN) -> RowEffect | None:
        if key is _UNKNOWN:
            key = self._key_of(new_values)
        source_key = key if old_key is None else old_key
        previous = self._rows.get(source_key)
        moves = source_key != key and previous is not None  # the primary key changed: the row moves
        if source_key != key and previous is None:
            previous = self._rows.get(key)  # a replayed move: the row already sits at its new key
        values = merge_unchanged(new_values, previous.values if previous is not None else None)
        displaced = None
        if moves:
            del self._rows[source_key]
            displaced = self._rows.get(key)
        elif previous is not None and previous.values == values:
            return None
        row = StoredRow(key, values, position)
        self._rows[key] = row
        # What happened to this table's copy: a baseline row replacing a stored one is an UPDATE here.
        return RowEffect(Action.INSERT if previous is None else Action.UPDATE, previous, row, displaced)

    def _find_key(self, partial: Mapping[str, Any]) -> Key | None:
        """The key of the row an old tuple names; a scan when it lacks key columns."""
        if self.spec.has_all(partial):
            return self.spec.of_row(partial)
        match = [r.key for r in self._rows.values() if values_match(r.values, partial.items())]
        return match[0] if match else None
