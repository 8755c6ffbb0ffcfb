"""Rows keyed by primary key, with a primary lookup index and named unique and non-unique secondary indexes.

Invariants: every index holds exactly the rows of the table (rows with a NULL in a unique index's fields are
not in that index, as in SQL); a row is replaced whole, never mutated, so a row handed out stays consistent.
Every method takes the state's lock, so a thread may read while the event loop applies changes."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from laredo_kernel.rows import hashable

Row = dict[str, Any]
Key = tuple[Any, ...]
PRIMARY_LOOKUP = "lookup"  # the index lookup() reads: lookup_fields, or the primary key when none are set


class _Index:
    def __init__(self, fields: Sequence[str], unique: bool) -> None:
        self.fields, self.unique = tuple(fields), unique
        self.unique_map: dict[Key, Key] = {}
        self.multi_map: dict[Key, dict[Key, None]] = {}  # value -> primary keys, in insertion order

    def value_of(self, row: Mapping[str, Any]) -> Key:
        return tuple(hashable(row.get(f)) for f in self.fields)

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
        value = tuple(hashable(v) for v in values)
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
        # Without lookup fields, lookup() reads the primary key: the rows themselves, no index to keep.
        self._indexes = {PRIMARY_LOOKUP: _Index(self._lookup_fields, unique=True)} if self._lookup_fields else {}
        for name, fields, unique in self._index_specs:
            self._indexes[name] = _Index(fields, unique)

    @property
    def key_columns(self) -> tuple[str, ...]:
        return self._key_columns

    def set_key_columns(self, columns: Sequence[str]) -> None:
        """Key rows by these columns; falls back to the lookup fields, then to an `id` column."""
        key = tuple(columns) or self._lookup_fields or ("id",)
        with self.lock:
            if key != self._key_columns:
                self._key_columns = key
                self.replace_all(list(self._rows.values()))

    def key_of(self, row: Mapping[str, Any]) -> Key:
        columns = self._key_columns
        if len(columns) == 1:  # the usual single-column key, without a generator
            value = row.get(columns[0])
            return (hashable(value),) if isinstance(value, (list, dict)) else (value,)
        return tuple(hashable(row.get(c)) for c in columns)

    # -- changes ------------------------------------------------------------------------------------------

    def upsert(self, row: Row, *, replacing: Key | None = None, pk: Key | None = None) -> Row | None:
        """Insert or replace `row`; `replacing` is the key it had before (a primary key update); `pk` is its
        key when the caller computed it already. Returns the row it replaced, if any."""
        with self.lock:
            return self.put(row, self.key_of(row) if pk is None else pk, replacing)

    def remove(self, pk: Key) -> Row | None:
        with self.lock:
            return self.pop(pk)

    def put(self, row: Row, pk: Key, replacing: Key | None = None) -> Row | None:
        """upsert() for a caller that holds the lock (a batch of changes applied under one acquisition)."""
        previous = self.pop(replacing) if replacing is not None and replacing != pk else None
        rows = self._rows
        current = rows.get(pk)
        rows[pk] = row
        if self._indexes:
            if current is not None:
                self._unindex(current, pk)
            for index in self._indexes.values():
                index.add(row, pk)
        return current if current is not None else previous

    def pop(self, pk: Key) -> Row | None:
        """remove() for a caller that holds the lock."""
        row = self._rows.pop(pk, None)
        if row is not None and self._indexes:
            self._unindex(row, pk)
        return row

    def _unindex(self, row: Row, pk: Key) -> None:
        for index in self._indexes.values():
            index.remove(row, pk)

    def replace_all(self, rows: Iterable[Row]) -> dict[Key, Row]:
        """Swap in a whole new set of rows; returns the rows held before, by key."""
        with self.lock:
            before = self._rows
            self._rows = {}
            for index in self._indexes.values():
                index.clear()
            put, key_of = self.put, self.key_of
            for row in rows:
                put(row, key_of(row))
            return before

    # -- reads ----------------------------------------------------------------------------------------------

    def get(self, pk: Key) -> Row | None:
        with self.lock:
            return self._rows.get(tuple(hashable(v) for v in pk))

    def lookup_all(self, index_name: str, values: Sequence[Any]) -> list[Row]:
        with self.lock:
            index = self._indexes.get(index_name)
            if index is None and index_name != PRIMARY_LOOKUP:
                known = ", ".join(sorted({PRIMARY_LOOKUP, *self._indexes}))
                raise KeyError(f"no index named {index_name!r}; this client has: {known}")
            fields = index.fields if index is not None else self._key_columns
            if len(values) != len(fields):
                raise ValueError(f"index {index_name!r} is over {len(fields)} field(s) {list(fields)}; "
                                 f"got {len(values)} value(s)")
            if index is not None:
                return [self._rows[pk] for pk in index.keys_for(values)]
            # lookup() by primary key: as a unique index would, a NULL in the values matches nothing.
            key = tuple(hashable(v) for v in values)
            row = None if None in key else self._rows.get(key)
            return [] if row is None else [row]

    def rows(self) -> list[Row]:
        with self.lock:
            return list(self._rows.values())

    def items(self) -> Iterator[tuple[Key, Row]]:
        """A consistent copy of (key, row) pairs."""
        with self.lock:
            return iter(list(self._rows.items()))

    def __len__(self) -> int:
        return len(self._rows)
