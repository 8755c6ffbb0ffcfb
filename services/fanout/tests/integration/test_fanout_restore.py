"""A fan-out instance that (re)starts restores its newest snapshot and consumes only the stream after it."""

from __future__ import annotations

from pathlib import Path

import pytest
from laredo_testing.eventually import eventually

from laredo.replication.v1 import replication_pb2 as rpb
from laredo_fanout.adapters.memory import RecordingObserver
from services.fanout.tests.fanout_testkit import Batches, as_client_rows, delete, insert, row, update
from services.fanout.tests.integration.fanout_cluster import Stream, fanout_instance, follow

pytestmark = pytest.mark.integration


async def test_restart_restores_the_newest_snapshot_plus_the_stream_tail(
        stream: Stream, nats_url: str, unique_name: str, tmp_path: Path) -> None:
    batches = Batches()
    await stream.publish(batches.baseline([row(i) for i in range(1, 101)], chunk_rows=25))  # 6 messages
    await stream.publish([batches.transaction(update(row(i, f"v{i}"))) for i in range(1, 11)])
    store = f'snapshot {{ interval = 0, store = local, store_config {{ path = "{tmp_path / "snapshots"}" }} }}'
    async with fanout_instance(tmp_path, nats_url, unique_name, target=store, name="first") as first:
        replica = first.app.targets.replicas[0]
        await eventually(lambda: replica.ready and replica.journal.current_sequence == 110, what="first caught up")
        manifest = await first.app.targets.snapshots[replica.table].take()
        assert manifest is not None and manifest.stream_sequence == 16 and manifest.journal_sequence == 110
        tail = await stream.publish(batches.transaction(insert(row(200)), delete({"id": 5})),
                                    batches.transaction(update(row(7, "seven"))))
        await eventually(lambda: replica.journal.current_sequence == 113, what="first applied the tail")
        client = follow(first.channel, client_id="app")
        await eventually(lambda: client.replica.snapshot_done, what="the client's snapshot from the first instance")
        client.cancel()

        observer = RecordingObserver()
        async with fanout_instance(tmp_path, nats_url, unique_name, target=store, name="restarted",
                                   observer=observer) as restarted:
            again = restarted.app.targets.replicas[0]
            await eventually(lambda: again.ready and again.journal.current_sequence == 113, what="restored + tail")
            assert [m.stream_sequence for m in observer.applied] == tail  # not one message before the snapshot
            assert {r.key: r.encoded for r in again.state.rows()} == {r.key: r.encoded for r in replica.state.rows()}
            assert again.journal.oldest_sequence == 111  # the journal continues the snapshot's numbering
            # The restarted journal continues the snapshot's numbering but under a new epoch: the client resumes by
            # the source position its snapshot reflects (a sequence from the first instance would not count).
            end = next(m.snapshot_end for m in client.replica.messages if m.WhichOneof("message") == "snapshot_end")
            resumed = follow(restarted.channel, client_id="app", last_known_source_position=end.source_position)
            await stream.publish(batches.transaction(insert(row(201))))
            await eventually(lambda: resumed.replica.sequences == [114], what="live entries on the restarted one")
            assert resumed.replica.handshake.mode == rpb.SYNC_MODE_DELTA  # type: ignore[union-attr]
            resumed.cancel()

    async with fanout_instance(tmp_path, nats_url, unique_name, target=store, name="after-stop",
                               observer=(observer := RecordingObserver())) as later:
        replica = later.app.targets.replicas[0]
        await eventually(lambda: replica.ready, what="ready from the shutdown snapshots")
        assert observer.applied == [] and replica.journal.current_sequence == 114  # the final snapshot at stop
        fresh = follow(later.channel)
        await eventually(lambda: fresh.replica.snapshot_done, what="a snapshot from the restored state")
        model = {i: row(i, f"v{i}" if i <= 10 else None) for i in range(1, 101)}
        model.update({7: row(7, "seven"), 200: row(200), 201: row(201)})
        del model[5]
        assert fresh.replica.rows == as_client_rows(list(model.values()))
        fresh.cancel()
