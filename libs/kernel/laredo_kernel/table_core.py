"""The rules for applying changes to one table's rows, written once for every copy of a table (pure).

Fan-out (the journal's source), query (indexes and subscriptions) and the others are sinks over a TableCore:
they choose how a key is read from a row (KeyRule) and what a stored row holds besides its key and position
(the row factory: fan-out keeps only its wire form and reads values from it, see values_of and same_row), and
react to the effects it returns.

Invariants:
- a stored row is never mutated: a change builds a new row, so a snapshot is a list copy;
- applying the same change twice has the effect of applying it once (idempotent by key); which positions to
  apply at all is the caller's business;
- an unchanged TOASTed value (UNCHANGED) keeps the stored value of that column;
- an UPDATE whose old key differs from its new key moves the row; a different row it overwrites at the new
  key is reported as `displaced`;
- a baseline generation (begin, rows, end) removes at its end every row it did not contain.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from laredo_kernel.changes import Action, RowChange
from laredo_kernel.position import Position
from laredo_kernel.rows import hashable, merge_unchanged, values_match
from laredo_kernel.tuples import UNCHANGED


class KeyRule(Protocol):
    """How a row's primary key is read: `of_row` raises the sink's own error for a row that has none."""

    fields: tuple[str, ...]

    def of_row(self, values: Mapping[str, Any]) -> Any: ...

    def has_all(self, partial: Mapping[str, Any]) -> bool: ...


class StoredRow(Protocol):
    """What the core needs of a stored row; sinks add their own slots (and the row's values, see values_of)."""

    key: Any
    position: Position | None


Row = TypeVar("Row", bound=StoredRow)
#: Makes a stored row from its key, values and the position of the change that wrote it.
RowFactory = Callable[[Any, Mapping[str, Any], "Position | None"], Row]
_UNKNOWN: Any = object()


@dataclass(slots=True, eq=False)
class PlainRow:
    """A stored row with nothing but what the core needs (a sink with nothing of its own to keep)."""

    key: Any
    values: Mapping[str, Any]
    position: Position | None


class MissingKeyValue(LookupError):
    """A row lacks the value of key column `column`: absent, or an unchanged TOASTed value sent without the old
    key. Sinks turn it into their own error (ColumnsKey's `refuse`)."""

    def __init__(self, column: str, columns: tuple[str, ...]) -> None:
        super().__init__(f"the row lacks the value of key column {column!r} (key: {', '.join(columns)})")
        self.column, self.columns = column, columns


def key_values(values: Mapping[str, Any], columns: tuple[str, ...]) -> tuple[Any, ...]:
    """The key as the tuple of `columns`' values (every column's, for a table without a key), made hashable
    when it holds arrays or JSON; MissingKeyValue when one is absent or UNCHANGED."""
    columns = columns or tuple(values)
    try:
        key = tuple([values[c] for c in columns])
    except KeyError as exc:
        raise MissingKeyValue(exc.args[0], columns) from None
    if UNCHANGED in key:
        raise MissingKeyValue(next(c for c, v in zip(columns, key) if v is UNCHANGED), columns)
    try:
        hash(key)
    except TypeError:  # arrays or JSON in the key: rare, so checked only on failure
        key = tuple(hashable(v) for v in key)
    return key


class ColumnsKey:
    """The key rule of key_values; `refuse` turns a MissingKeyValue into the sink's own error."""

    __slots__ = ("fields", "_refuse")

    def __init__(self, fields: tuple[str, ...],
                 refuse: Callable[[MissingKeyValue], Exception] | None = None) -> None:
        self.fields, self._refuse = fields, refuse

    def has_all(self, partial: Mapping[str, Any]) -> bool:
        return all(c in partial for c in self.fields)

    def of_row(self, values: Mapping[str, Any]) -> tuple[Any, ...]:
        try:
            return key_values(values, self.fields)
        except MissingKeyValue as exc:
            if self._refuse is None:
                raise
            raise self._refuse(exc) from None


@dataclass(slots=True, repr=False)
class RowEffect(Generic[Row]):
    """What one change did: the row before and after it (None = absent); TRUNCATE has neither. `action` is
    the change's own (a baseline row is an INSERT); `displaced` is another row a moved row overwrote.

    Read-only by convention, not frozen: one is made for every change applied, and a frozen dataclass costs
    three times as much to make."""

    action: Action
    old: Row | None
    new: Row | None
    displaced: Row | None = None

    def __repr__(self) -> str:
        return f"RowEffect({self.action.name}, old={self.old!r}, new={self.new!r}, displaced={self.displaced!r})"


class TableCore(Generic[Row]):
    """Rows of one table by primary key, plus the baseline generation being loaded."""

    def __init__(self, key: KeyRule, make_row: RowFactory[Row]) -> None:
        self._key = key
        self._make_row = make_row
        self._rows: dict[Any, Row] = {}
        self._baseline_id: str | None = None
        self._baseline_seen: set[Any] = set()

    @property
    def key_rule(self) -> KeyRule:
        return self._key

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, key: Any) -> bool:
        return key in self._rows

    def get(self, key: Any) -> Row | None:
        return self._rows.get(key)

    def rows(self) -> list[Row]:
        """A point-in-time copy: later changes replace rows in the table, never in this list."""
        return list(self._rows.values())

    def keys(self) -> Iterable[Any]:
        return self._rows.keys()

    @property
    def baseline_in_progress(self) -> bool:
        """Between a baseline's begin and end: its generation is open."""
        return self._baseline_id is not None

    def key_of(self, values: Mapping[str, Any]) -> Any:
        return self._key.of_row(values)

    def restore(self, rows: Iterable[Mapping[str, Any]], position: Position | None = None,
                key: KeyRule | None = None) -> None:
        """Replace every row by `rows` (e.g. from a snapshot), each written at `position`, keyed by `key` (by
        default: as before)."""
        self._key = key or self._key
        self._baseline_id, self._baseline_seen = None, set()
        self._rows = {}
        for values in rows:
            key = self._key.of_row(values)
            self._rows[key] = self._make_row(key, values, position)

    def insert_new(self, values: dict[str, Any], position: Position | None) -> Row | None:
        """Add the row `values` (complete: no UNCHANGED value) written at `position` when no row holds its key, as
        its INSERT would; None, and nothing added, when one does (apply the INSERT then). For loading many rows."""
        key = self._key.of_row(values)
        if key in self._rows:
            return None
        row = self._rows[key] = self._make_row(key, values, position)
        return row

    def rekey(self, key: KeyRule) -> None:
        """Key rows by another primary key (a schema change); rows keep their values and positions."""
        self._key = key
        rows, self._rows = list(self._rows.values()), {}
        for row in rows:
            values = self.values_of(row)
            new_key = key.of_row(values)
            self._rows[new_key] = row if new_key == row.key else self._make_row(new_key, values, row.position)
        self._baseline_seen = set()

    def apply(self, change: RowChange) -> RowEffect[Row] | None:
        """Apply one streamed change; None when it changed nothing (e.g. a replay)."""
        if change.action is Action.TRUNCATE:
            self._rows = {}
            return RowEffect(Action.TRUNCATE, None, None)
        if change.action is Action.DELETE:
            key = self.find_key(change.old or {})
            previous = self._rows.pop(key, None) if key is not None else None
            return RowEffect(Action.DELETE, previous, None) if previous is not None else None
        old_key = self.find_key(change.old) if change.old else None
        return self._put(change.action, change.new or {}, old_key, change.position)

    def begin_baseline(self, baseline_id: str) -> None:
        """Start a baseline generation: rows it does not contain are removed at its end."""
        self._baseline_id = baseline_id
        self._baseline_seen = set()

    def apply_baseline_row(self, baseline_id: str, change: RowChange) -> RowEffect[Row] | None:
        if baseline_id != self._baseline_id:
            # rows of a baseline whose begin was not seen (the stream was trimmed): they start the generation
            self.begin_baseline(baseline_id)
        values = change.new or {}
        key = self._key.of_row(values)
        self._baseline_seen.add(key)
        return self._put(Action.INSERT, values, None, change.position, key)

    def end_baseline(self, baseline_id: str) -> list[RowEffect[Row]]:
        """Remove every row the generation did not contain; one DELETE effect per removed row."""
        if baseline_id != self._baseline_id:
            self.begin_baseline(baseline_id)  # an empty baseline: nothing seen, every row goes
        seen, self._baseline_seen, self._baseline_id = self._baseline_seen, set(), None
        stale = [key for key in self._rows if key not in seen]
        return [RowEffect(Action.DELETE, self._rows.pop(key), None) for key in stale]

    def find_key(self, partial: Mapping[str, Any]) -> Any | None:
        """The key of the stored row an old tuple (a key or a full row) names; None when no row matches.
        A scan when the tuple lacks key columns (REPLICA IDENTITY FULL without a primary key)."""
        if self._key.has_all(partial):
            return self._key.of_row(partial)
        items = partial.items()
        return next((row.key for row in self._rows.values() if values_match(self.values_of(row), items)), None)

    def values_of(self, row: Row) -> Mapping[str, Any]:
        """A stored row's values (a sink that keeps them in another form reads them from it)."""
        return row.values  # type: ignore[attr-defined, no-any-return]

    def same_row(self, stored: Row, new: Row) -> bool:
        """Whether a new version of a stored row holds the same values (then the change did nothing)."""
        return self.values_of(stored) == self.values_of(new)

    def _put(self, action: Action, new_values: Mapping[str, Any], old_key: Any, position: Position,
             key: Any = _UNKNOWN) -> RowEffect[Row] | None:
        if key is _UNKNOWN:
            key = self._key.of_row(new_values)
        source_key = key if old_key is None else old_key
        previous = self._rows.get(source_key)
        moves = previous is not None and source_key != key  # the primary key changed: the row moves
        if previous is None and source_key != key:
            previous = self._rows.get(key)  # a replayed move: the row already sits at its new key
        if previous is not None and not moves:
            key = previous.key  # the stored key object: the table holds one per row, not one per version
        if UNCHANGED in new_values.values():  # the stored values are read only when needed
            new_values = merge_unchanged(new_values, self.values_of(previous) if previous is not None else None)
        elif type(new_values) is not dict:
            new_values = dict(new_values)
        row = self._make_row(key, new_values, position)
        displaced = None
        if moves:
            del self._rows[source_key]
            displaced = self._rows.get(key)
        elif previous is not None and self.same_row(previous, row):
            return None
        self._rows[key] = row
        return RowEffect(action, previous, row, displaced)
