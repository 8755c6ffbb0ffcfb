"""Subscription filters: a client receives only the rows whose fields match every predicate (AND).

Rules: `equals` compares one value, `prefix` matches string values that start with it, `in` matches any of a list.
Numbers compare by value whatever their form (int, double, or the decimal string a numeric column's value travels as);
booleans never equal numbers; a missing or NULL field never matches. INSERT is tested on the new row, DELETE on the
old one (the full stored row, not just the key the source sent), TRUNCATE always passes. An UPDATE that takes a row
out of the filter reaches the client as a DELETE of the old row, one that brings a row in as an INSERT of the new one,
so a filtered replica never keeps a row that left its partition.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from laredo_kernel.changes import Action
from laredo_kernel.rows import hashable

from laredo_fanout.domain.errors import InvalidSyncRequest


class MatchKind(enum.Enum):
    EQUALS = "equals"
    PREFIX = "prefix"
    IN = "in"


class EntryRoute(enum.Enum):
    """How a journal entry reaches a filtered client."""

    SEND = "send"
    SKIP = "skip"
    AS_DELETE = "as_delete"  # the row left the client's partition
    AS_INSERT = "as_insert"  # the row entered it


@dataclass(frozen=True, slots=True)
class FieldPredicate:
    """`value`: a JSON value (EQUALS), a string (PREFIX) or a sequence of JSON values (IN)."""

    field: str
    kind: MatchKind | None
    value: Any = None


_MISSING = object()


def _normal(value: Any, numeric: bool) -> Any:
    """A comparable form: numbers as floats, booleans tagged (True must not equal 1), the rest hashable."""
    kind = type(value)
    if kind is bool:
        return ("bool", value)
    if kind is int or kind is float:
        return float(value)
    if numeric and kind is str:
        try:
            return float(value)
        except ValueError:
            return value
    return hashable(value)


class SubscriptionFilter:
    """Compiled predicates; `numeric_columns` are the columns whose string values are decimal numbers."""

    def __init__(self, predicates: Sequence[FieldPredicate], numeric_columns: Iterable[str] = ()) -> None:
        self._numeric = frozenset(numeric_columns)
        self._tests = tuple(self._compile(p) for p in predicates)

    def _compile(self, predicate: FieldPredicate) -> tuple[str, MatchKind, Any]:
        if not predicate.field:
            raise InvalidSyncRequest("filter predicate without a field: set FieldPredicate.field to a column name")
        if predicate.kind is None:
            raise InvalidSyncRequest(f"filter predicate on {predicate.field!r} sets none of equals, prefix, in")
        numeric = predicate.field in self._numeric
        if predicate.kind is MatchKind.PREFIX:
            if not isinstance(predicate.value, str):
                raise InvalidSyncRequest(f"filter prefix on {predicate.field!r} must be a string")
            return predicate.field, MatchKind.PREFIX, predicate.value
        if predicate.kind is MatchKind.IN:
            return predicate.field, MatchKind.IN, frozenset(_normal(v, numeric) for v in predicate.value
                                                             if v is not None)
        return predicate.field, MatchKind.EQUALS, _normal(predicate.value, numeric)

    def matches(self, values: Mapping[str, Any] | None) -> bool:
        if values is None:
            return False
        for field, kind, expected in self._tests:
            value = values.get(field, _MISSING)
            if value is _MISSING or value is None:
                return False
            if kind is MatchKind.PREFIX:
                if not (isinstance(value, str) and value.startswith(expected)):
                    return False
                continue
            normal = _normal(value, field in self._numeric)
            if kind is MatchKind.EQUALS:
                if normal != expected:
                    return False
            elif normal not in expected:
                return False
        return True

    def route(self, action: Action, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> EntryRoute:
        if action is Action.TRUNCATE:
            return EntryRoute.SEND
        if action is Action.INSERT:
            return EntryRoute.SEND if self.matches(new) else EntryRoute.SKIP
        if action is Action.DELETE:
            return EntryRoute.SEND if self.matches(old) else EntryRoute.SKIP
        was, now = self.matches(old), self.matches(new)
        if was and now:
            return EntryRoute.SEND
        if was:
            return EntryRoute.AS_DELETE
        return EntryRoute.AS_INSERT if now else EntryRoute.SKIP
