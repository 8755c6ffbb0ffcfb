"""ClientReplica: idempotent apply by primary key, the applied-position watermark, listeners, re-sync diffs."""

from __future__ import annotations

from typing import Any

import pytest

from laredo_client.client_replica import Action, ClientReplica, Cursor
from laredo_client.values import Column

COLUMNS = [Column("id", "int4", True, 1), Column("name", "text")]


@pytest.fixture
def replica() -> ClientReplica:
    replica = ClientReplica()
    replica.set_columns(COLUMNS)
    return replica


def record(replica: ClientReplica) -> list[tuple[Any, Any]]:
    events: list[tuple[Any, Any]] = []
    replica.listen(lambda old, new: events.append((old, new)))
    return events


def test_listener_events_follow_the_rows_held_not_the_wire(replica: ClientReplica) -> None:
    events = record(replica)
    replica.apply_change(Action.INSERT, None, {"id": 1, "name": "a"}, "0/10")
    replica.apply_change(Action.UPDATE, {"id": 1}, {"id": 1, "name": "b"}, "0/11")  # key-only old values
    replica.apply_change(Action.UPDATE, None, {"id": 2, "name": "new"}, "0/12")  # unknown row: an insert
    replica.apply_change(Action.DELETE, {"id": 1}, None, "0/13")
    replica.apply_change(Action.DELETE, {"id": 99}, None, "0/14")  # nothing to delete: no event
    replica.apply_change(Action.TRUNCATE, None, None, "0/15")
    assert events == [
        (None, {"id": 1, "name": "a"}),
        ({"id": 1, "name": "a"}, {"id": 1, "name": "b"}),
        (None, {"id": 2, "name": "new"}),
        ({"id": 1, "name": "b"}, None),
        (None, None),
    ]
    assert replica.rows.rows() == [] and replica.cursor.source_position == "0/15"


def test_applying_twice_is_harmless_and_the_watermark_says_what_is_in(replica: ClientReplica) -> None:
    for _ in range(2):
        replica.apply_change(Action.INSERT, None, {"id": 1, "name": "a"}, "0/10:0")
    assert replica.rows.rows() == [{"id": 1, "name": "a"}]
    assert replica.already_applied("0/10:0") and replica.already_applied("0/F:3")
    assert not replica.already_applied("0/10:1") and not replica.already_applied("0/11")
    assert not replica.already_applied("not-a-position") and not replica.already_applied("")


def test_unparseable_positions_disable_the_watermark(replica: ClientReplica) -> None:
    replica.apply_change(Action.INSERT, None, {"id": 1}, "kafka:3:17")
    assert replica.cursor.source_position == "kafka:3:17"
    assert not replica.already_applied("0/1") and not replica.already_applied("kafka:3:17")


def test_primary_key_update_moves_the_row(replica: ClientReplica) -> None:
    events = record(replica)
    replica.apply_change(Action.INSERT, None, {"id": 1, "name": "a"}, "0/10")
    replica.apply_change(Action.UPDATE, {"id": 1}, {"id": 2, "name": "a"}, "0/11")
    assert replica.rows.rows() == [{"id": 2, "name": "a"}]
    assert events[-1] == ({"id": 1, "name": "a"}, {"id": 2, "name": "a"})


def test_a_failing_listener_does_not_stop_the_others(replica: ClientReplica) -> None:
    def broken(old: Any, new: Any) -> None:
        raise RuntimeError("listener bug")

    replica.listen(broken)
    events = record(replica)
    replica.apply_change(Action.INSERT, None, {"id": 1}, "0/10")
    assert events == [(None, {"id": 1})] and replica.rows.get((1,)) == {"id": 1}


def test_unsubscribe_stops_events_and_is_idempotent(replica: ClientReplica) -> None:
    events: list[Any] = []
    unsubscribe = replica.listen(lambda old, new: events.append(new))
    replica.apply_change(Action.INSERT, None, {"id": 1}, "0/10")
    unsubscribe()
    unsubscribe()
    replica.apply_change(Action.INSERT, None, {"id": 2}, "0/11")
    assert events == [{"id": 1}]


def test_first_snapshot_is_silent_and_a_resync_reports_its_differences(replica: ClientReplica) -> None:
    events = record(replica)
    replica.install_snapshot([{"id": 1, "name": "a"}, {"id": 2, "name": "b"}], position="0/20", snapshot_id="s1")
    assert events == [] and replica.initialized and replica.cursor.snapshot_id == "s1"
    replica.install_snapshot([{"id": 1, "name": "a"}, {"id": 2, "name": "B"}, {"id": 3, "name": "c"}],
                             position="0/18", snapshot_id="s2")
    assert events == [({"id": 2, "name": "b"}, {"id": 2, "name": "B"}), (None, {"id": 3, "name": "c"})]
    events.clear()
    replica.install_snapshot([{"id": 3, "name": "c"}], position="0/30", snapshot_id="s3")
    assert sorted(events, key=str) == sorted([({"id": 1, "name": "a"}, None), ({"id": 2, "name": "B"}, None)],
                                             key=str)
    assert replica.cursor.source_position == "0/30" and not replica.already_applied("0/31")


def test_restore_loads_rows_columns_and_cursor() -> None:
    replica = ClientReplica(lookup_fields=("name",))
    replica.restore([{"id": 1, "name": "a"}], COLUMNS, Cursor(7, "0/40", "s9", "fanout-a"))
    assert replica.initialized and replica.rows.key_columns == ("id",)
    assert replica.cursor == Cursor(7, "0/40", "s9", "fanout-a")
    assert replica.already_applied("0/40") and not replica.already_applied("0/41")
