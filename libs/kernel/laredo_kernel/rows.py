"""Pure helpers for applying streamed row changes to stored rows: TOAST merge, matching, hashable keys."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from laredo_kernel.tuples import UNCHANGED


def merge_unchanged(new_values: Mapping[str, Any], stored: Mapping[str, Any] | None) -> dict[str, Any]:
    """New values with UNCHANGED (an unchanged TOASTed value) replaced by the stored ones; such a column
    is dropped when nothing is stored."""
    if UNCHANGED not in new_values.values():  # identity first, so no value's __eq__ is needed
        return new_values if type(new_values) is dict else dict(new_values)  # decoded rows are fresh dicts
    stored = stored if stored is not None else {}
    return {
        name: (stored[name] if value is UNCHANGED else value)
        for name, value in new_values.items()
        if value is not UNCHANGED or name in stored
    }


def values_match(values: Mapping[str, Any], expected: Iterable[tuple[str, Any]]) -> bool:
    """Whether a row holds every expected (column, value) pair (an old tuple naming a row)."""
    return all(name in values and values[name] == value for name, value in expected)


def hashable(value: Any) -> Any:
    """JSON values made hashable (for keys): lists become tuples, objects tuples of sorted (key, value) pairs."""
    if isinstance(value, list | tuple):
        return tuple(hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((str(k), hashable(v)) for k, v in value.items()))
    return value
