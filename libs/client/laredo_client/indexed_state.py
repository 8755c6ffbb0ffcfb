"""Rows keyed by primary key, with a primary lookup index and named unique and non-unique secondary indexes.

Invariants: every index holds exactly the rows of the table (rows with a NULL in a unique index's fields are
not in that index, as in SQL); a row is replaced whole, never mutated, so a row handed out stays consistent.
Every method takes the state's lock, so a thread may read while the event loop applies changes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

Row = dict[str, Any]
Key = tuple[Any, ...]
PRIMARY_LOOKUP = "lookup"  # the index lookup() reads: lookup_fields, or the primary key when none are set


def freeze(value: Any) -> Any:
    """A hashable stand-in for a row value (JSON lists and objects become tuples)."""
    if isinstance(value, list):
        return tuple(freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, freeze(v)) for k, v in value.items()))
    return value


class _Index:
    def __init__(self, fields: Sequence[str], unique: bool) -> None:
        self.fields, self.unique = tuple(fields), unique
        self.unique_map: dict[Key, Key] = {}
        self.multi_map: dict[Key, dict[Key, None]] = {}  # value -> primary keys, in insertion order

    def value_of(self, row: Mapping[str, Any]) -> Key:
        return tuple(freeze(row.get(f)) for f in self.fields)

    def add(self, row: Mapping[str, Any], pk: Key) -> None:
        value = self.value_of(row)
        if not self.unique:
            self.multi_map.setdefault(value, {})[pk] = None
        elif None not in value:
            self.unique_map[value] = pk  # a transient duplicate (deferred constraint): the last writer wins

    def remove(self, row: Mapping[str, Any], pk: Key) -> None:
        value = self.value_of(row)
        if not self.unique:
            members = self.multi_map.get(value)
            if members is not None:
                members.pop(pk, None)
                if not members:
                    del self.multi_map[value]
        elif self.unique_map.get(value) == pk:
            del self.unique_map[value]

    def keys_for(self, values: Sequence[Any]) -> list[Key]:
        value = tuple(freeze(v) for v in values)
        if self.unique:
            pk = self.unique_map.get(value)
            return [] if pk is None else [pk]
        return list(self.multi_map.get(value, ()))

    def clear(self) -> None:
        self.unique_map.clear()
        self.multi_map.clear()


class IndexedRows:
    """The rows of one table and their indexes."""

    def __init__(self, lookup_fields: Sequence[str] = (), indexes: Iterable[Any] = ()) -> None:
        self.lock = threading.RLock()
        self._lookup_fields = tuple(lookup_fields)
        self._index_specs = [(i.name, tuple(i.fields), bool(i.unique)) for i in indexes]
        self._key_columns: tuple[str, ...] = ()
        self._rows: dict[Key, Row] = {}
        self._indexes: dict[str, _Index] = {}
        self._build_indexes()

    @property
    def key_columns(self) -> tuple[str, ...]:
        return self._key_columns

    def set_key_columns(self, columns: Sequence[str]) -> None:
        """Key rows by these columns; falls back to the lookup fields, then to an `id` column."""
        key = tuple(columns) or self._lookup_fields or ("id",)
        with self.lock:
            if key == self._key_columns:
                return
            self._key_columns = key
            rows = list(self._rows.values())
            self._rows.clear()
            self._build_indexes()
            for row in rows:
                self.upsert(row)

    def _build_indexes(self) -> None:
        lookup = self._lookup_fields or self._key_columns
        self._indexes = {PRIMARY_LOOKUP: _Index(lookup, unique=True)}
        for name, fields, unique in self._index_specs:
            self._indexes[name] = _Index(fields, unique)

    def key_of(self, row: Mapping[str, Any]) -> Key:
        return tuple(freeze(row.get(c)) for c in self._key_columns)

    # -- changes ------------------------------------------------------------------------------------------

    def upsert(self, row: Row, *, replacing: Key | None = None) -> Row | None:
        """Insert or replace `row`; `replacing` is the key it had before (a primary key update).
        Returns the row it replaced, if any."""
        pk = self.key_of(row)
        with self.lock:
            previous = self.remove(replacing) if replacing is not None and replacing != pk else None
            current = self._rows.get(pk)
            if current is not None:
                self._unindex(current, pk)
            self._rows[pk] = row
            for index in self._indexes.values():
                index.add(row, pk)
            return current if current is not None else previous

    def remove(self, pk: Key) -> Row | None:
        with self.lock:
            row = self._rows.pop(pk, None)
            if row is not None:
                self._unindex(row, pk)
            return row

    def _unindex(self, row: Row, pk: Key) -> None:
        for index in self._indexes.values():
            index.remove(row, pk)

    def clear(self) -> None:
        with self.lock:
            self._rows.clear()
            for index in self._indexes.values():
                index.clear()

    def replace_all(self, rows: Iterable[Row]) -> dict[Key, Row]:
        """Swap in a whole new set of rows; returns the rows held before, by key."""
        with self.lock:
            before = self._rows
            self._rows = {}
            for index in self._indexes.values():
                index.clear()
            for row in rows:
                self.upsert(row)
            return before

    # -- reads ----------------------------------------------------------------------------------------------

    def get(self, pk: Key) -> Row | None:
        with self.lock:
            return self._rows.get(tuple(freeze(v) for v in pk))

    def lookup_all(self, index_name: str, values: Sequence[Any]) -> list[Row]:
        with self.lock:
            index = self._indexes.get(index_name)
            if index is None:
                known = ", ".join(sorted(self._indexes))
                raise KeyError(f"no index named {index_name!r}; this client has: {known}")
            if len(values) != len(index.fields):
                raise ValueError(f"index {index_name!r} is over {len(index.fields)} field(s) "
                                 f"{list(index.fields)}; got {len(values)} value(s)")
            return [self._rows[pk] for pk in index.keys_for(values)]

    def rows(self) -> list[Row]:
        with self.lock:
            return list(self._rows.values())

    def items(self) -> Iterator[tuple[Key, Row]]:
        """A consistent copy of (key, row) pairs."""
        with self.lock:
            return iter(list(self._rows.items()))

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, pk: object) -> bool:
        return pk in self._rows
