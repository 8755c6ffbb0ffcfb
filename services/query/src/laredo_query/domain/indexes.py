"""Secondary indexes: canonical index key -> primary key(s), maintained from row effects.

Unique indexes follow SQL for NULL: a key with a NULL component is not indexed. If the source briefly
holds one key in two rows (a deferred constraint, or lookup fields that are not unique in the source),
the most recently written row owns the key and the others wait behind it: when the owner lets go of the
key, the previous holder owns it again, so the index never points at a row that no longer has the key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from laredo_query.domain.keys import Key, KeySpec

#: Reserved index names: the primary key, and the unique index over the target's lookup_fields.
PRIMARY = "primary"
LOOKUP = "lookup"
RESERVED_NAMES = (PRIMARY, LOOKUP)


@dataclass(frozen=True, slots=True)
class IndexDefinition:
    """One configured index: a name, its columns in key order, and whether keys are unique."""

    name: str
    fields: tuple[str, ...]
    unique: bool


def _has_null(spec: KeySpec, key: Key) -> bool:
    return key is None if len(spec.fields) == 1 else any(v is None for v in key)


class UniqueIndex:
    """Index key -> the primary key of the one row that owns it."""

    unique = True

    def __init__(self, definition: IndexDefinition, spec: KeySpec) -> None:
        self.definition = definition
        self.spec = spec
        self._owners: dict[Key, Key] = {}
        self._waiting: dict[Key, list[Key]] = {}

    @property
    def shared_keys(self) -> int:
        """Keys currently held by more than one row (expected 0; more means the fields are not unique)."""
        return len(self._waiting)

    def add(self, key: Key, pk: Key) -> None:
        if _has_null(self.spec, key):
            return
        owner = self._owners.get(key)
        if owner is not None and owner != pk:
            self._waiting.setdefault(key, []).append(owner)
        self._owners[key] = pk

    def remove(self, key: Key, pk: Key) -> None:
        if _has_null(self.spec, key):
            return
        waiting = self._waiting.get(key)
        if self._owners.get(key) == pk:
            if waiting:
                self._owners[key] = waiting.pop()
                if not waiting:
                    del self._waiting[key]
            else:
                self._owners.pop(key, None)
        elif waiting and pk in waiting:
            waiting.remove(pk)
            if not waiting:
                del self._waiting[key]

    def find(self, key: Key) -> list[Key]:
        owner = self._owners.get(key)
        return [] if owner is None else [owner]

    def find_first(self, key: Key) -> Key | None:
        return self._owners.get(key)

    def clear(self) -> None:
        self._owners.clear()
        self._waiting.clear()

    def __len__(self) -> int:
        return len(self._owners)


class MultiIndex:
    """Index key -> primary keys; a key held by one row stores that primary key alone (saves memory)."""

    unique = False

    def __init__(self, definition: IndexDefinition, spec: KeySpec) -> None:
        self.definition = definition
        self.spec = spec
        self._entries: dict[Key, Any] = {}  # pk, or a _Bucket of pks

    shared_keys = 0

    def add(self, key: Key, pk: Key) -> None:
        entry = self._entries.get(key, _ABSENT)
        if entry is _ABSENT:
            self._entries[key] = pk
        elif type(entry) is _Bucket:
            entry[pk] = None
        elif entry != pk:
            self._entries[key] = _Bucket({entry: None, pk: None})

    def remove(self, key: Key, pk: Key) -> None:
        entry = self._entries.get(key, _ABSENT)
        if entry is _ABSENT:
            return
        if type(entry) is _Bucket:
            entry.pop(pk, None)
            if len(entry) == 1:
                self._entries[key] = next(iter(entry))
        elif entry == pk:
            del self._entries[key]

    def find(self, key: Key) -> list[Key]:
        entry = self._entries.get(key, _ABSENT)
        if entry is _ABSENT:
            return []
        return list(entry) if type(entry) is _Bucket else [entry]

    def find_first(self, key: Key) -> Key | None:
        """The primary key indexed first under `key` (cheap even when many rows share the key)."""
        entry = self._entries.get(key, _ABSENT)
        if entry is _ABSENT:
            return None
        return next(iter(entry)) if type(entry) is _Bucket else entry

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


class _Bucket(dict[Key, None]):
    """The primary keys of the rows sharing one index key (an insertion-ordered set)."""

    __slots__ = ()


_ABSENT: Any = object()

Index = UniqueIndex | MultiIndex


def build_index(definition: IndexDefinition, spec: KeySpec) -> Index:
    return UniqueIndex(definition, spec) if definition.unique else MultiIndex(definition, spec)

