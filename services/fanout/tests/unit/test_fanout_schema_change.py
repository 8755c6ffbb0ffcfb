"""SchemaChangeNotification: sent in order when a batch's columns differ, to live and delta clients."""

from __future__ import annotations

from collections.abc import Callable

from laredo_testing.eventually import eventually

from laredo.replication.v1 import replication_pb2 as rpb
from laredo.stream.v1 import change_stream_pb2 as spb
from laredo_kernel.changes import ColumnInfo
from laredo_core.stream.codec import columns_to_proto
from services.fanout.tests.conftest import World
from services.fanout.tests.fanout_testkit import COLUMNS, TABLE, insert, row, tuple_of

WIDER = (*COLUMNS, ColumnInfo("extra", 25, "text"))


def kinds(messages: list[rpb.SyncResponse]) -> list[str]:
    return [m.WhichOneof("message") for m in messages if m.WhichOneof("message") != "heartbeat"]


async def test_column_change_on_an_ordinary_batch_and_a_schema_change_batch(make_world: Callable[..., World]) -> None:
    world = make_world()
    world.publish(world.batches.baseline([row(1)]))
    world.start()
    live, _ = world.sync(client_id="live")
    await eventually(lambda: live.snapshot_done, what="the live client's snapshot")
    world.publish(world.batches.transaction(insert(row(2))))
    world.batches.columns = WIDER
    world.publish(world.batches.transaction(spb.Change(action=spb.ACTION_INSERT,
                                                       new_tuple=tuple_of({**row(3), "extra": "x"}, WIDER))))
    await eventually(lambda: live.sequences == [2, 3], what="both entries")
    assert kinds(live.messages)[-3:] == ["journal_entry", "schema_change", "journal_entry"]
    (change,) = live.schema_changes
    assert change.sequence == 2 and [c.column_name for c in change.new_columns] == ["id", "name", "doc", "extra"]
    assert [c.column_name for c in change.old_columns] == ["id", "name", "doc"]

    narrower = spb.ChangeBatch(source_id="pg", kind=spb.BATCH_KIND_SCHEMA_CHANGE, commit_lsn=world.batches.lsn + 0x10,
                               table=spb.TableRef(schema=TABLE.schema, name=TABLE.name),
                               columns=columns_to_proto(COLUMNS), old_columns=columns_to_proto(WIDER),
                               reason="ALTER TABLE items DROP COLUMN extra")
    world.publish(narrower.SerializeToString())
    await eventually(lambda: len(live.schema_changes) == 2, what="the SCHEMA_CHANGE batch's notification")
    assert live.schema_changes[1].sequence == 3 and len(live.schema_changes[1].new_columns) == 3

    delta, _ = world.sync(client_id="delta", last_known_sequence=1, **world.issued_here())
    fresh, _ = world.sync(client_id="fresh")
    await eventually(lambda: delta.sequences == [2, 3] and len(delta.schema_changes) == 2, what="the delta catch-up")
    assert kinds(delta.messages) == ["handshake", "journal_entry", "schema_change", "journal_entry", "schema_change"]
    await eventually(lambda: fresh.snapshot_done, what="the fresh snapshot")
    assert fresh.schema_changes == [] and len(fresh.handshake.columns) == 3  # type: ignore[union-attr]
