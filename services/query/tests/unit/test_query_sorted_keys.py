"""SortedKeys: a sorted set with O(log n) changes; the keyset order pages walk."""

from __future__ import annotations

import random
from decimal import Decimal

from laredo_query.domain.sorted_keys import SortedKeys, total_order


def test_random_adds_and_discards_keep_sorted_order_and_after_is_exclusive() -> None:
    rnd = random.Random(5)
    keys = SortedKeys(chunk_size=4)
    model: set[int] = set()
    for _ in range(3000):
        key = rnd.randrange(500)
        if key in model:
            keys.discard(key)
            model.discard(key)
        else:
            keys.add(key)
            model.add(key)
    assert list(keys) == sorted(model) and len(keys) == len(model)
    for probe in (-1, 0, 250, 499, 1000):
        assert list(keys.after(probe)) == [k for k in sorted(model) if k > probe]
    assert list(keys.after(start=True)) == sorted(model)


def test_discarding_an_absent_key_changes_nothing() -> None:
    keys = SortedKeys([3, 1, 2])
    keys.discard(7)
    keys.discard(0)
    assert list(keys) == [1, 2, 3]


def test_composite_keys_order_by_their_components() -> None:
    keys = SortedKeys([("b", 1), ("a", 2), ("a", 10)])
    assert list(keys) == [("a", 2), ("a", 10), ("b", 1)]
    assert list(keys.after(("a", 5))) == [("a", 10), ("b", 1)]


def test_incomparable_keys_switch_to_the_total_order_and_keep_working() -> None:
    keys = SortedKeys([(1, "x"), (2, "y")])
    assert keys.natural
    keys.add((None, "z"))  # a NULL in a key without a primary key
    assert not keys.natural
    assert list(keys) == [(None, "z"), (1, "x"), (2, "y")]
    keys.add(("text", 1))
    assert list(keys.after((1, "x"))) == [(2, "y"), ("text", 1)]
    keys.discard((None, "z"))
    assert len(keys) == 3


def test_total_order_ranks_every_kind_of_value() -> None:
    values = ["b", 2, None, True, Decimal("1.5"), b"x", (1,), float("nan")]
    ordered = sorted(values, key=total_order)
    assert ordered[:3] == [None, True, Decimal("1.5")] and ordered[3] == 2
    assert ordered[5:] == ["b", b"x", (1,)]
