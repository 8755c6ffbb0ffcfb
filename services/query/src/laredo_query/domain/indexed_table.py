"""One indexed-memory table: rows by primary key, secondary indexes kept in step, and keyset pages.

Invariants:
- after every applied change, each index maps exactly the keys of the stored rows (unique indexes: the
  owner rule of domain.indexes);
- the key order used by pages exists only once a page was asked for, and from then on follows every
  change (so tables nobody pages through pay nothing for it);
- an index whose fields are not columns of the table is reported as a problem and answers
  IndexUnavailable; the rest of the table keeps working;
- a change that would make two rows share a unique index key is rejected before anything changes
  (domain.unique_guard); rows that already share one (an index built over existing rows) follow the owner rule
  of domain.indexes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from laredo_kernel.changes import Action, ColumnInfo, RowChange
from laredo_kernel.position import Position

from laredo_query.domain.errors import ChangeRejected, IndexNotFound, IndexUnavailable, RowWithoutKey
from laredo_query.domain.indexes import LOOKUP, PRIMARY, Index, IndexDefinition, build_index
from laredo_query.domain.keys import Key, KeySpec
from laredo_query.domain.row_store import RowEffect, RowStore, StoredRow
from laredo_query.domain.sorted_keys import SortedKeys, total_order
from laredo_query.domain.unique_guard import check_unique


class IndexedTable:
    def __init__(self, name: str, definitions: Sequence[IndexDefinition] = ()) -> None:
        self.name = name
        self.columns: tuple[ColumnInfo, ...] = ()
        self.key_columns: tuple[str, ...] = ()  # the primary key, else the replica identity (none: every column)
        self._definitions = {d.name: d for d in definitions}
        self._store = RowStore(KeySpec((), ()))
        self._indexes: dict[str, Index] = {}
        self._problems: dict[str, str] = {}
        self._order: SortedKeys | None = None

    def __len__(self) -> int:
        return len(self._store)

    @property
    def store(self) -> RowStore:
        """The rows by primary key (read it; change rows through this table so indexes follow)."""
        return self._store

    @property
    def key_spec(self) -> KeySpec:
        return self._store.spec

    @property
    def index_names(self) -> list[str]:
        return [PRIMARY, *self._definitions]

    @property
    def default_index(self) -> str:
        """The index Lookup uses without an index name: lookup_fields when configured, else the primary key."""
        return LOOKUP if LOOKUP in self._definitions else PRIMARY

    @property
    def problems(self) -> list[str]:
        return list(self._problems.values())

    def index_stats(self) -> dict[str, dict[str, Any]]:
        return {name: {"fields": list(index.spec.fields), "unique": index.unique, "keys": len(index),
                       "shared_keys": index.shared_keys}
                for name, index in self._indexes.items()}

    def set_columns(self, columns: tuple[ColumnInfo, ...], key_columns: tuple[str, ...]) -> None:
        """Adopt the table's columns: re-key rows and rebuild indexes whose columns or kinds changed."""
        by_name = {c.name: c for c in columns}
        self.columns, self.key_columns = columns, key_columns
        key_spec = KeySpec.for_columns(key_columns or tuple(by_name), by_name)
        rebuild_all = key_spec != self._store.spec
        if rebuild_all:
            self._store.rekey_spec(key_spec)
            self._order = None
        self._problems = {}
        for definition in self._definitions.values():
            missing = [f for f in definition.fields if f not in by_name]
            if missing:
                self._indexes.pop(definition.name, None)
                self._problems[definition.name] = _missing_fields(self.name, definition, missing, by_name)
                continue
            spec = KeySpec.for_columns(definition.fields, by_name)
            current = self._indexes.get(definition.name)
            if rebuild_all or current is None or current.spec != spec:
                self._indexes[definition.name] = self._built(definition, spec)

    def apply(self, change: RowChange) -> RowEffect | None:
        """Apply one change; ChangeRejected (nothing changed) when it lacks its key or breaks a unique index."""
        check_unique(self.name, self._store, self._indexes.values(), change)
        effect = self._store.apply(change)
        if effect is not None:
            self._follow(effect)
        return effect

    def load(self, rows: Iterable[dict[str, Any]], position: Position) -> list[ChangeRejected]:
        """Apply each row (complete values, e.g. a snapshot's) as an INSERT at `position` would, and return what
        was rejected (those rows are left out); RowWithoutKey ends the load. A row whose key is new and that no
        unique index refuses is added without a change of its own: a snapshot's load is mostly such rows."""
        insert_new = self._store.insert_new
        indexes = [(index, index.spec.of_row, index.find_first if index.unique else None)
                   for index in self._indexes.values()]
        rejected: list[ChangeRejected] = []
        for values in rows:
            keys = [of_row(values) for _, of_row, _ in indexes]
            taken = any(find is not None and find(key) is not None for (_, _, find), key in zip(indexes, keys))
            row = None if taken else insert_new(values, position)
            if row is None:  # the key is held or a unique index key is taken: as the change would go
                try:
                    self.apply(RowChange(position, Action.INSERT, None, values))
                except RowWithoutKey:
                    raise
                except ChangeRejected as exc:
                    rejected.append(exc)
                continue
            for (index, _, _), key in zip(indexes, keys):
                index.add(key, row.key)
            if self._order is not None:
                self._order.add(row.key)
        return rejected

    @property
    def baseline_in_progress(self) -> bool:
        return self._store.baseline_in_progress

    def begin_baseline(self, baseline_id: str) -> None:
        self._store.begin_baseline(baseline_id)

    def apply_baseline_row(self, baseline_id: str, change: RowChange) -> RowEffect | None:
        check_unique(self.name, self._store, self._indexes.values(), change)
        effect = self._store.apply_baseline_row(baseline_id, change)
        if effect is not None:
            self._follow(effect)
        return effect

    def end_baseline(self, baseline_id: str) -> list[RowEffect]:
        effects = self._store.end_baseline(baseline_id)
        for effect in effects:
            self._follow(effect)
        return effects

    def get(self, key: Key) -> StoredRow | None:
        return self._store.get(key)

    def rows(self) -> list[StoredRow]:
        return self._store.rows()

    def lookup(self, index_name: str, values: Sequence[Any]) -> list[StoredRow]:
        """Rows whose index key equals `values` (request JSON values), in primary key order."""
        if index_name == PRIMARY:
            row = self._store.get(self._store.spec.from_request(values, f"the primary key of {self.name}"))
            return [] if row is None else [row]
        index = self.index(index_name)
        key = index.spec.from_request(values, f"index {index_name!r} of {self.name}")
        rows = [row for row in map(self._store.get, index.find(key)) if row is not None]
        return rows if len(rows) < 2 else in_key_order(rows)

    def lookup_first(self, index_name: str, values: Sequence[Any]) -> StoredRow | None:
        """One row whose index key equals `values`: for a non-unique index the one indexed first, without
        collecting every match."""
        if index_name == PRIMARY:
            return self._store.get(self._store.spec.from_request(values, f"the primary key of {self.name}"))
        index = self.index(index_name)
        pk = index.find_first(index.spec.from_request(values, f"index {index_name!r} of {self.name}"))
        return None if pk is None else self._store.get(pk)

    def index(self, name: str) -> Index:
        if name in self._problems:
            raise IndexUnavailable(self._problems[name])
        if name not in self._definitions:
            raise IndexNotFound(self.name, name, self.index_names)
        index = self._indexes.get(name)
        if index is None:
            raise IndexUnavailable(f"index {name!r} of {self.name} is not built yet: the table's columns "
                                   "are not known until its first change batch arrives")
        return index

    def page(self, after: Key | None, limit: int, *, start: bool) -> tuple[list[StoredRow], bool]:
        """Up to `limit` rows with keys after `after` (or from the first with start=True) in key order,
        and whether more follow."""
        if self._order is None:
            self._order = SortedKeys(self._store.keys())
        rows: list[StoredRow] = []
        for key in self._order.after(after, start=start):
            if len(rows) == limit:
                return rows, True
            row = self._store.get(key)
            if row is not None:
                rows.append(row)
        return rows, False

    def _built(self, definition: IndexDefinition, spec: KeySpec) -> Index:
        index = build_index(definition, spec)
        values_of = self._store.values_of
        for row in self._store.rows():
            index.add(spec.of_row(values_of(row)), row.key)
        return index

    def _follow(self, effect: RowEffect) -> None:
        """Bring the indexes and the key order in line with one effect."""
        if effect.action is Action.TRUNCATE:
            for index in self._indexes.values():
                index.clear()
            self._order = None
            return
        old, new, displaced = effect.old, effect.new, effect.displaced
        values_of = self._store.values_of
        if old is None and displaced is None and new is not None:  # an insert: the common case
            values = values_of(new)
            for index in self._indexes.values():
                index.add(index.spec.of_row(values), new.key)
            if self._order is not None:
                self._order.add(new.key)
            return
        same_key = old is not None and new is not None and old.key == new.key
        for index in self._indexes.values():
            of_row = index.spec.of_row
            old_key = of_row(values_of(old)) if old is not None else None
            new_key = of_row(values_of(new)) if new is not None else None
            if same_key and old_key == new_key:
                continue
            if old is not None:
                index.remove(old_key, old.key)
            if displaced is not None:
                index.remove(of_row(values_of(displaced)), displaced.key)
            if new is not None:
                index.add(new_key, new.key)
        if self._order is not None and not same_key:
            if old is not None:
                self._order.discard(old.key)
            if new is not None and displaced is None:
                self._order.add(new.key)


def in_key_order(rows: Iterable[StoredRow]) -> list[StoredRow]:
    rows = list(rows)
    try:
        return sorted(rows, key=lambda r: r.key)
    except (TypeError, ArithmeticError):
        return sorted(rows, key=lambda r: total_order(r.key))


def _missing_fields(table: str, definition: IndexDefinition, missing: list[str],
                    columns: Mapping[str, ColumnInfo]) -> str:
    what = "lookup_fields" if definition.name == LOOKUP else f"index {definition.name!r}"
    return (f"{table}: {what} names column(s) {', '.join(missing)}, which the table does not have "
            f"(columns: {', '.join(columns)}); fix the fields in the table's indexed-memory target")
