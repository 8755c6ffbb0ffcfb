"""IndexedTable: indexes and key order follow every change; lookups, pages and problems."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from typing import Any

import pytest

from laredo_kernel.changes import Action, ColumnInfo, RowChange
from laredo_kernel.position import Position
from laredo_kernel.tuples import UNCHANGED
from laredo_query.domain.errors import (IndexNotFound, IndexUnavailable, InvalidKey, RowWithoutKey,
                                        UniqueIndexViolation)
from laredo_query.domain.indexed_table import IndexedTable
from laredo_query.domain.indexes import LOOKUP, IndexDefinition, UniqueIndex
from laredo_query.domain.keys import KeyKind, KeySpec
from services.query.tests.query_testkit import COLUMNS, row

DEFINITIONS = (IndexDefinition(LOOKUP, ("email",), True), IndexDefinition("by_status", ("status",), False),
               IndexDefinition("by_status_qty", ("status", "qty"), False))
_positions: Iterator[int] = iter(range(1, 10**9))


def at() -> Position:
    return Position(0x100, next(_positions))


def ins(values: dict[str, Any]) -> RowChange:
    return RowChange(at(), Action.INSERT, None, dict(values))


def upd(values: dict[str, Any], old_id: int | None = None) -> RowChange:
    return RowChange(at(), Action.UPDATE, None if old_id is None else {"id": old_id}, dict(values), old_id is not None)


def dele(i: int) -> RowChange:
    return RowChange(at(), Action.DELETE, {"id": i}, None, True)


def new_table(definitions: tuple[IndexDefinition, ...] = DEFINITIONS,
              columns: tuple[ColumnInfo, ...] = COLUMNS) -> IndexedTable:
    table = IndexedTable("public.items", definitions)
    table.set_columns(columns, tuple(c.name for c in columns if c.primary_key_ordinal))
    return table


def ids(rows: list[Any]) -> list[Any]:
    return [r.values["id"] for r in rows]


def assert_indexes_match_rows(table: IndexedTable) -> None:
    """Every index answers exactly what a scan of the rows answers (unique: the row holding the key)."""
    rows = table.rows()
    for definition in DEFINITIONS:
        for candidate in rows:
            key = [candidate.values[f] for f in definition.fields]
            expected = sorted(r.values["id"] for r in rows if [r.values[f] for f in definition.fields] == key)
            found = ids(table.lookup(definition.name, key))
            if definition.unique:
                assert len(found) == 1 and found[0] in expected, (definition.name, key)
            else:
                assert found == expected, (definition.name, key)


def test_insert_update_delete_keep_unique_and_non_unique_indexes_in_step() -> None:
    table = new_table()
    for i in range(1, 6):
        table.apply(ins(row(i, status="a" if i % 2 else "b")))
    assert ids(table.lookup(LOOKUP, ["u3@example.com"])) == [3]
    assert ids(table.lookup("by_status", ["a"])) == [1, 3, 5]
    table.apply(upd(row(3, status="b", email="new3@example.com")))
    assert table.lookup(LOOKUP, ["u3@example.com"]) == []
    assert ids(table.lookup(LOOKUP, ["new3@example.com"])) == [3]
    assert ids(table.lookup("by_status", ["b"])) == [2, 3, 4]
    table.apply(dele(2))
    assert ids(table.lookup("by_status", ["b"])) == [3, 4]
    assert ids(table.lookup("by_status_qty", ["b", 4.0])) == [4]
    assert ids(table.lookup("primary", [4])) == [4] and table.lookup("primary", [2]) == []
    assert_indexes_match_rows(table)


def test_truncate_empties_rows_indexes_and_pages() -> None:
    table = new_table()
    for i in range(1, 4):
        table.apply(ins(row(i)))
    table.page(None, 10, start=True)
    table.apply(RowChange(at(), Action.TRUNCATE, None, None))
    assert len(table) == 0 and table.lookup("by_status", ["new"]) == []
    assert table.page(None, 10, start=True) == ([], False)
    table.apply(ins(row(9)))
    assert ids(table.page(None, 10, start=True)[0]) == [9]
    assert table.index_stats()[LOOKUP]["keys"] == 1
    assert table.index_stats()["by_status"]["fields"] == ["status"]  # OAM's IndexInfo.fields


def test_a_primary_key_change_moves_the_row_with_its_index_entries() -> None:
    table = new_table()
    for i in (1, 2, 3):
        table.apply(ins(row(i)))
    table.page(None, 10, start=True)  # the key order exists from here on
    effect = table.apply(upd(row(10, email="u1@example.com"), old_id=1))
    assert effect is not None and effect.old is not None and effect.old.key == 1 and effect.new.key == 10
    assert table.get(1) is None and table.get(10) is not None
    assert ids(table.lookup(LOOKUP, ["u1@example.com"])) == [10]
    assert ids(table.page(None, 10, start=True)[0]) == [2, 3, 10]
    assert_indexes_match_rows(table)


def test_a_move_onto_an_occupied_key_drops_the_displaced_rows_index_entries() -> None:
    table = new_table()
    table.apply(ins(row(1, status="one")))
    table.apply(ins(row(2, status="two")))
    table.apply(upd(row(2, status="moved", email="m@example.com"), old_id=1))  # a deferred key swap, first half
    assert len(table) == 1 and table.lookup("by_status", ["two"]) == [] and table.lookup("by_status", ["one"]) == []
    assert ids(table.lookup("by_status", ["moved"])) == [2]
    assert table.lookup(LOOKUP, ["u2@example.com"]) == []


def test_unchanged_toasted_values_keep_the_stored_value() -> None:
    table = new_table()
    table.apply(ins(row(1, doc="x" * 5000)))
    table.apply(upd({**row(1, status="paid"), "doc": UNCHANGED}))
    stored = table.get(1)
    assert stored is not None and stored.values["doc"] == "x" * 5000 and stored.values["status"] == "paid"


def test_a_replayed_change_is_a_no_op() -> None:
    table = new_table()
    change = ins(row(1))
    assert table.apply(change) is not None
    assert table.apply(change) is None
    assert table.apply(upd(row(1))) is None


def test_a_new_baseline_generation_removes_rows_it_does_not_contain() -> None:
    table = new_table()
    table.begin_baseline("b1")
    for i in range(1, 5):
        table.apply_baseline_row("b1", ins(row(i)))
    assert table.end_baseline("b1") == []
    table.begin_baseline("b2")
    table.apply_baseline_row("b2", ins(row(2, status="again")))
    table.apply_baseline_row("b2", ins(row(4)))
    removed = table.end_baseline("b2")
    assert sorted(e.old.key for e in removed) == [1, 3] and all(e.action is Action.DELETE for e in removed)
    assert ids(table.rows()) == [2, 4] and ids(table.lookup("by_status", ["again"])) == [2]
    assert_indexes_match_rows(table)


def test_a_change_that_would_share_a_unique_key_is_rejected_and_changes_nothing() -> None:
    table = new_table()
    table.apply(ins(row(1, email="x@example.com")))
    with pytest.raises(UniqueIndexViolation, match=r"lookup_fields \(email\) already holds email='x@example.com' "
                                                   r"for the row with primary key id=1; the INSERT of the row with "
                                                   r"primary key id=2") as caught:
        table.apply(ins(row(2, email="x@example.com")))  # not unique in the source
    assert caught.value.row_key == 2
    assert ids(table.rows()) == [1] and ids(table.lookup(LOOKUP, ["x@example.com"])) == [1]
    table.apply(upd(row(1, email="y@example.com")))  # the key is free now
    table.apply(ins(row(2, email="x@example.com")))
    table.apply(upd(row(2, email="x@example.com", status="s")))  # a row keeps its own key
    table.apply(upd(row(3, email="x@example.com"), old_id=2))  # also when its primary key changes
    assert ids(table.lookup(LOOKUP, ["x@example.com"])) == [3] and ids(table.rows()) == [1, 3]
    assert_indexes_match_rows(table)


def test_rows_sharing_a_key_of_a_rebuilt_unique_index_go_back_to_the_previous_holder() -> None:
    index = UniqueIndex(IndexDefinition(LOOKUP, ("email",), True), KeySpec(("email",), (KeyKind.TEXT,)))
    index.add("x@example.com", 1)
    index.add("x@example.com", 2)  # rows that shared the key before the index existed
    assert index.find("x@example.com") == [2] and index.shared_keys == 1
    index.remove("x@example.com", 2)
    assert index.find("x@example.com") == [1] and index.shared_keys == 0


def test_null_keys_are_left_out_of_unique_indexes_but_found_in_non_unique_ones() -> None:
    table = new_table()
    table.apply(ins({**row(1), "email": None, "status": None}))
    table.apply(ins({**row(2), "email": None, "status": None}))
    assert table.lookup(LOOKUP, [None]) == []
    assert ids(table.lookup("by_status", [None])) == [1, 2]


def test_unknown_index_and_bad_key_values_are_reported() -> None:
    table = new_table()
    with pytest.raises(IndexNotFound, match="no index named 'nope' .*primary, lookup, by_status"):
        table.lookup("nope", ["x"])
    with pytest.raises(InvalidKey, match="index 'by_status_qty' of public.items has 2 column"):
        table.lookup("by_status_qty", ["a"])
    with pytest.raises(InvalidKey, match="integer column 'id'"):
        table.lookup("primary", ["one"])


def test_an_index_on_a_missing_column_is_a_problem_until_the_column_exists() -> None:
    definitions = (IndexDefinition("by_colour", ("colour",), False), *DEFINITIONS)
    table = new_table(definitions)
    table.apply(ins(row(1)))
    assert len(table.problems) == 1 and "colour" in table.problems[0] and "id, email" in table.problems[0]
    with pytest.raises(IndexUnavailable, match="by_colour"):
        table.lookup("by_colour", ["red"])
    assert ids(table.lookup(LOOKUP, ["u1@example.com"])) == [1]  # the rest keeps working
    table.set_columns((*COLUMNS, ColumnInfo("colour", 25, "text")), ("id",))
    assert table.problems == [] and table.lookup("by_colour", ["red"]) == []


def test_a_new_primary_key_rekeys_rows_and_rebuilds_indexes() -> None:
    table = new_table()
    for i in range(1, 4):
        table.apply(ins(row(i)))
    table.page(None, 10, start=True)
    table.set_columns(COLUMNS, ("email",))
    assert ids(table.lookup("primary", ["u2@example.com"])) == [2]
    assert [r.key for r in table.page(None, 10, start=True)[0]] == [f"u{i}@example.com" for i in (1, 2, 3)]
    assert_indexes_match_rows(table)


def test_random_changes_keep_every_index_equal_to_a_scan() -> None:
    rnd = random.Random(11)
    table = new_table()
    live: set[int] = set()
    for step in range(1500):
        op = rnd.random()
        i = rnd.randrange(1, 120)
        values = row(i, status=rnd.choice("abc"), qty=rnd.randrange(3), email=f"e{rnd.randrange(200)}")
        if op < 0.45:
            with contextlib.suppress(UniqueIndexViolation):  # rejected: nothing changed
                table.apply(ins(values) if i not in live else upd(values))
                live.add(i)
        elif op < 0.7 and live:
            old = rnd.choice(sorted(live))
            target = rnd.randrange(1, 120)
            if target not in live or target == old:
                with contextlib.suppress(UniqueIndexViolation):
                    table.apply(upd({**values, "id": target}, old_id=old))
                    live.discard(old)
                    live.add(target)
        elif op < 0.95 and live:
            victim = rnd.choice(sorted(live))
            table.apply(dele(victim))
            live.discard(victim)
        else:
            table.apply(RowChange(at(), Action.TRUNCATE, None, None))
            live.clear()
        if step % 100 == 0:
            table.page(None, 5, start=True)
    assert sorted(ids(table.rows())) == sorted(live)
    assert ids(table.page(None, 1000, start=True)[0]) == sorted(live)
    assert_indexes_match_rows(table)


def test_lookup_first_returns_the_match_indexed_first_without_collecting_all() -> None:
    table = new_table()
    for i in (5, 3, 9):
        table.apply(ins(row(i, status="same")))
    assert table.lookup_first("by_status", ["same"]).key == 5
    table.apply(dele(5))
    assert table.lookup_first("by_status", ["same"]).key == 3
    assert table.lookup_first("by_status", ["other"]) is None
    assert table.lookup_first(LOOKUP, ["u9@example.com"]).key == 9
    assert table.lookup_first("primary", ["3"]).key == 3


def test_loading_rows_equals_applying_their_inserts_and_returns_the_rejected() -> None:
    rows = [row(1), row(2, status="paid"), row(3, email="u1@example.com"), row(2, status="void"),
            row(4, email=None), row(5, email=None)]  # 3 takes 1's email; 2 comes twice; NULL emails never clash
    loaded, applied = new_table(), new_table()
    position = Position(0x200, 0)
    rejected = loaded.load([dict(r) for r in rows], position)
    refused = []
    for values in rows:
        try:
            applied.apply(RowChange(position, Action.INSERT, None, dict(values)))
        except UniqueIndexViolation as exc:
            refused.append(str(exc))
    assert [r.values for r in loaded.rows()] == [r.values for r in applied.rows()]
    assert [(r.key, r.position) for r in loaded.rows()] == [(r.key, r.position) for r in applied.rows()]
    assert loaded.index_stats() == applied.index_stats()
    assert [str(e) for e in rejected] == refused and len(refused) == 1 and "u1@example.com" in refused[0]
    assert_indexes_match_rows(loaded)
    loaded.page(None, 10, start=True)  # the key order exists from here on and follows later loads
    assert loaded.load([row(0)], position) == [] and ids(loaded.page(None, 10, start=True)[0])[0] == 0
    with pytest.raises(RowWithoutKey):
        loaded.load([{"email": "nokey@example.com"}], position)
