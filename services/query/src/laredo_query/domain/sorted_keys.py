"""Primary keys in sorted order, for keyset pagination: a list of sorted chunks (add/discard in O(log n)).

Keys of one table normally compare naturally (ints, strings, decimals, or tuples of them). When they do
not (NULLs in a key without a primary key, JSON documents, a column whose type changed), the structure
switches itself to `total_order`, a deterministic order over any mix of values, and keeps working.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable, Iterable, Iterator
from decimal import Decimal
from typing import Any

_INCOMPARABLE = (TypeError, ArithmeticError)  # ArithmeticError: comparing Decimal NaN


def total_order(value: Any) -> tuple[Any, ...]:
    """A sort key that orders any mix of None, bools, numbers, strings, bytes and tuples of them."""
    if value is None:
        return (0,)
    if isinstance(value, bool):
        return (1, value)
    if isinstance(value, int | float | Decimal):
        if value != value or (isinstance(value, Decimal) and value.is_nan()):
            return (3,)  # NaN: after every number
        return (2, value)
    if isinstance(value, str):
        return (4, value)
    if isinstance(value, bytes):
        return (5, value)
    if isinstance(value, tuple):
        return (6, tuple(total_order(v) for v in value))
    return (7, type(value).__name__, repr(value))


class SortedKeys:
    """A sorted set of keys; `after(key)` iterates the keys greater than `key` in order. The caller adds only
    absent keys and discards only present ones (the table's row dict decides)."""

    def __init__(self, keys: Iterable[Any] = (), *, chunk_size: int = 512) -> None:
        self._chunk_size = chunk_size
        self._order: Callable[[Any], Any] | None = None
        self._chunks: list[list[Any]] = []
        self._maxes: list[Any] = []
        self._len = 0
        self._rebuild(list(keys))

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[Any]:
        for chunk in self._chunks:
            yield from chunk

    @property
    def natural(self) -> bool:
        """Whether keys are compared as they are (False: total_order)."""
        return self._order is None

    def add(self, key: Any) -> None:
        try:
            self._add(key)
        except _INCOMPARABLE:
            if self._order is not None:
                raise
            self._switch_to_total_order()
            self._add(key)

    def discard(self, key: Any) -> None:
        try:
            self._discard(key)
        except _INCOMPARABLE:
            if self._order is not None:
                raise
            self._switch_to_total_order()
            self._discard(key)

    def after(self, key: Any = None, *, start: bool = False) -> Iterator[Any]:
        """Keys strictly greater than `key`, in order; with start=True every key from the first."""
        if start:
            yield from self
            return
        try:
            chunk_index, position = self._locate_after(key)
        except _INCOMPARABLE:
            if self._order is not None:
                raise
            self._switch_to_total_order()
            chunk_index, position = self._locate_after(key)
        for index in range(chunk_index, len(self._chunks)):
            chunk = self._chunks[index]
            yield from chunk[position:] if position else chunk
            position = 0

    def _sort_key(self, key: Any) -> Any:
        return key if self._order is None else self._order(key)

    def _locate_after(self, key: Any) -> tuple[int, int]:
        probe = self._sort_key(key)
        index = bisect_right(self._maxes, probe)
        if index == len(self._chunks):
            return index, 0
        return index, bisect_right(self._chunks[index], probe, key=self._order)

    def _add(self, key: Any) -> None:
        probe = self._sort_key(key)
        if not self._chunks:
            self._chunks, self._maxes = [[key]], [probe]
        else:
            index = bisect_left(self._maxes, probe)
            if index == len(self._chunks):
                index -= 1
                self._chunks[index].append(key)
                self._maxes[index] = probe
            else:
                insort(self._chunks[index], key, key=self._order)
            if len(self._chunks[index]) > 2 * self._chunk_size:
                self._split(index)
        self._len += 1

    def _discard(self, key: Any) -> None:
        probe = self._sort_key(key)
        index = bisect_left(self._maxes, probe)
        if index == len(self._chunks):
            return
        chunk = self._chunks[index]
        position = bisect_left(chunk, probe, key=self._order)
        if position == len(chunk) or chunk[position] != key:
            return
        del chunk[position]
        self._len -= 1
        if not chunk:
            del self._chunks[index], self._maxes[index]
        elif position == len(chunk):
            self._maxes[index] = self._sort_key(chunk[-1])

    def _split(self, index: int) -> None:
        chunk = self._chunks[index]
        half = len(chunk) // 2
        self._chunks[index:index + 1] = [chunk[:half], chunk[half:]]
        self._maxes[index:index + 1] = [self._sort_key(chunk[half - 1]), self._sort_key(chunk[-1])]

    def _switch_to_total_order(self) -> None:
        self._order = total_order
        self._rebuild(list(self))

    def _rebuild(self, keys: list[Any]) -> None:
        try:
            keys.sort(key=self._order)
        except _INCOMPARABLE:
            self._order = total_order
            keys.sort(key=total_order)
        size = self._chunk_size
        self._chunks = [keys[i:i + size] for i in range(0, len(keys), size)]
        self._maxes = [self._sort_key(chunk[-1]) for chunk in self._chunks]
        self._len = len(keys)
