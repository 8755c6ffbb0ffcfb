"""Unique indexes reject what would break them: a change that gives a row a unique key another row holds.

Such a change is not applied (the table keeps its rows and indexes as they were) and becomes a dead letter:
the source's data does not fit the index (lookup fields that are not unique there, or a constraint the source
checks only at commit). A NULL component never conflicts (unique indexes leave NULL keys out, as SQL does).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from laredo_kernel.changes import Action, RowChange
from laredo_kernel.rows import merge_unchanged
from laredo_kernel.tuples import UNCHANGED

from laredo_query.domain.errors import RowWithoutKey, UniqueIndexViolation
from laredo_query.domain.indexes import LOOKUP, Index
from laredo_query.domain.row_store import RowStore


def check_unique(table: str, store: RowStore, indexes: Iterable[Index], change: RowChange) -> None:
    """Raise UniqueIndexViolation if applying `change` would make two rows share a unique index key."""
    new = change.new
    if new is None or change.action is Action.DELETE or change.action is Action.TRUNCATE:
        return
    merged: Mapping[str, Any] | None = None
    for index in indexes:
        if not index.unique:
            continue
        fields = index.spec.fields
        values = new
        if any(new.get(f) is UNCHANGED for f in fields):
            merged = merged if merged is not None else _merged(store, change)
            values = merged
        owner = index.find_first(index.spec.of_row(values))
        if owner is None:
            continue
        key = store.key_of(new)
        if owner == key or (change.old is not None and owner == store.find_key(change.old)):
            continue  # the row keeps its own key (or moves with it)
        what = "lookup_fields" if index.definition.name == LOOKUP else f"unique index {index.definition.name!r}"
        shown = ", ".join(f"{f}={values.get(f)!r}" for f in fields)
        raise UniqueIndexViolation(
            f"{table}: {what} ({', '.join(fields)}) already holds {shown} for the row with primary key "
            f"{_key_text(store, owner)}; the {change.action.value} of the row with primary key "
            f"{_key_text(store, key)} would give it the same value, so it is not applied. Make the values unique in "
            "the source (or set unique = false), then ReplayDeadLetters", key)


def _merged(store: RowStore, change: RowChange) -> Mapping[str, Any]:
    """The new values with unchanged TOASTed ones taken from the stored row (as applying would)."""
    source = store.find_key(change.old) if change.old else None
    previous = store.get(source) if source is not None else None
    if previous is None:
        try:
            previous = store.get(store.key_of(change.new or {}))
        except RowWithoutKey:
            previous = None
    return merge_unchanged(change.new or {}, store.values_of(previous) if previous is not None else None)


def _key_text(store: RowStore, key: Any) -> str:
    components = store.spec.components(key)
    return ", ".join(f"{f}={v!r}" for f, v in zip(store.spec.fields, components))
