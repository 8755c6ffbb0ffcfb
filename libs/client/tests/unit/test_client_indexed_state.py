"""IndexedRows: primary key, lookup index, unique and non-unique secondary indexes, composite keys."""

from __future__ import annotations

import pytest

from laredo_client import Index
from laredo_client.indexed_state import PRIMARY_LOOKUP, IndexedRows


def doc(instance: str, key: str, version: int, owner: str | None = "ops", pk: int | None = None) -> dict:
    return {"pk": pk if pk is not None else hash((instance, key)) % 10_000, "instance_id": instance, "key": key,
            "version": version, "owner": owner}


@pytest.fixture
def rows() -> IndexedRows:
    state = IndexedRows(("instance_id", "key"), [Index("by_instance", "instance_id"),
                                                  Index("by_owner_version", ("owner", "version"), unique=True)])
    state.set_key_columns(("pk",))
    return state


def test_lookup_fields_form_a_unique_composite_index(rows: IndexedRows) -> None:
    rows.upsert(doc("i1", "a", 1, pk=1))
    rows.upsert(doc("i1", "b", 2, pk=2))
    assert rows.lookup_all(PRIMARY_LOOKUP, ("i1", "b")) == [doc("i1", "b", 2, pk=2)]
    assert rows.lookup_all(PRIMARY_LOOKUP, ("i2", "b")) == []
    assert rows.get((1,)) == doc("i1", "a", 1, pk=1)


def test_non_unique_index_follows_updates_and_deletes(rows: IndexedRows) -> None:
    for pk, instance in ((1, "i1"), (2, "i1"), (3, "i2")):
        rows.upsert(doc(instance, f"k{pk}", pk, pk=pk))
    assert [r["pk"] for r in rows.lookup_all("by_instance", ("i1",))] == [1, 2]
    previous = rows.upsert(doc("i2", "k2", 20, pk=2))  # row 2 moves to instance i2
    assert previous is not None and previous["instance_id"] == "i1"
    assert [r["pk"] for r in rows.lookup_all("by_instance", ("i1",))] == [1]
    assert sorted(r["pk"] for r in rows.lookup_all("by_instance", ("i2",))) == [2, 3]
    assert rows.lookup_all(PRIMARY_LOOKUP, ("i1", "k2")) == []  # the old lookup key is gone
    rows.remove((3,))
    assert [r["pk"] for r in rows.lookup_all("by_instance", ("i2",))] == [2]
    assert len(rows) == 2


def test_unique_index_skips_nulls_and_a_stale_owner_does_not_remove_the_new_one(rows: IndexedRows) -> None:
    rows.upsert(doc("i1", "a", 1, owner=None, pk=1))
    rows.upsert(doc("i1", "b", 1, owner=None, pk=2))
    assert rows.lookup_all("by_owner_version", (None, 1)) == []  # NULLs are not indexed by unique indexes
    rows.upsert(doc("i1", "c", 7, owner="x", pk=3))
    rows.upsert(doc("i1", "d", 7, owner="x", pk=4))  # a transient duplicate: the last writer wins
    rows.remove((3,))  # removing the earlier holder must not drop the current one
    assert [r["pk"] for r in rows.lookup_all("by_owner_version", ("x", 7))] == [4]


def test_primary_key_update_replaces_the_row_under_its_old_key(rows: IndexedRows) -> None:
    rows.upsert(doc("i1", "a", 1, pk=1))
    previous = rows.upsert(doc("i1", "a", 2, pk=9), replacing=(1,))
    assert previous == doc("i1", "a", 1, pk=1)
    assert rows.get((1,)) is None and rows.get((9,))["version"] == 2
    assert [r["pk"] for r in rows.lookup_all(PRIMARY_LOOKUP, ("i1", "a"))] == [9]


def test_numbers_match_across_int_and_float_and_json_values_are_indexable() -> None:
    rows = IndexedRows((), [Index("by_tags", "tags")])
    rows.set_key_columns(("id",))
    rows.upsert({"id": 1, "tags": ["a", "b"]})
    assert rows.get((1.0,)) == {"id": 1, "tags": ["a", "b"]}
    assert rows.lookup_all("by_tags", (["a", "b"],)) == [{"id": 1, "tags": ["a", "b"]}]
    assert rows.lookup_all(PRIMARY_LOOKUP, (1,)) == [{"id": 1, "tags": ["a", "b"]}]  # no lookup fields: the PK


def test_rekeying_rebuilds_every_index(rows: IndexedRows) -> None:
    rows.upsert(doc("i1", "a", 1, pk=1))
    rows.upsert(doc("i2", "b", 2, pk=2))
    rows.set_key_columns(("instance_id", "key"))
    assert rows.get(("i2", "b"))["pk"] == 2
    assert len(rows.lookup_all("by_instance", ("i1",))) == 1


def test_replace_all_returns_the_previous_rows_and_replacing_with_none_empties_every_index(rows: IndexedRows) -> None:
    rows.upsert(doc("i1", "a", 1, pk=1))
    before = rows.replace_all([doc("i3", "z", 5, pk=5)])
    assert list(before) == [(1,)]
    assert rows.lookup_all("by_instance", ("i1",)) == []
    rows.replace_all(())
    assert len(rows) == 0 and rows.lookup_all("by_instance", ("i3",)) == []


def test_unknown_index_and_wrong_arity_are_named(rows: IndexedRows) -> None:
    with pytest.raises(KeyError, match="no index named 'nope'.*by_instance"):
        rows.lookup_all("nope", ("x",))
    with pytest.raises(ValueError, match="2 field"):
        rows.lookup_all(PRIMARY_LOOKUP, ("only-one",))
