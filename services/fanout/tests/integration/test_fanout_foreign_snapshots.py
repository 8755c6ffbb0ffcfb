"""A snapshot written by the snapshot service (producer laredo-snapshot, journal sequence 0) on real NATS and gRPC:
a fresh instance restores it, every instance lists and serves it, and clients resume from it by its position."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest
from google.protobuf.json_format import MessageToDict
from laredo_testing.eventually import eventually

from laredo.replication.v1 import replication_pb2 as rpb
from laredo_core.snapshots.format import Checksum, SnapshotManifest, encode_part, new_snapshot_id
from laredo_core.snapshots.local_store import LocalSnapshotStore
from laredo_fanout.adapters.memory import RecordingObserver
from laredo_fanout.application.table_replica import TableReplica
from services.fanout.tests.fanout_testkit import Batches, delete, insert, row, update
from services.fanout.tests.integration.fanout_cluster import Instance, Stream, fanout_instance, follow

pytestmark = pytest.mark.integration

FROM_SNAPSHOT = rpb.SYNC_MODE_DELTA_FROM_SNAPSHOT


async def service_snapshot(store: LocalSnapshotStore, replica: TableReplica) -> SnapshotManifest:
    """What the snapshot service writes for the table as `replica` holds it (parts of 40 rows, manifest last)."""
    rows = [replica.state.values_of(r) for r in replica.state.rows()]
    created = 1_700_000_000.0
    snapshot_id, checksum, parts = new_snapshot_id(created, 0, secrets.token_hex(3)), Checksum(), []
    for index, start in enumerate(range(0, len(rows), 40)):
        part, data = encode_part(index, rows[start:start + 40])
        checksum.update(data)
        await store.write_part(replica.table, snapshot_id, part.name, data)
        parts.append(part)
    manifest = SnapshotManifest(snapshot_id, replica.table, replica.columns, replica.state.key_columns, len(rows),
                                str(replica.applied_position), replica.stream_sequence, 0, created, tuple(parts),
                                checksum.value, source_id="pg", producer="laredo-snapshot")
    await store.write_manifest(manifest)
    return manifest


def store_target(path: Path, *, restore: bool) -> str:
    return (f'snapshot {{ interval = 0, store = local, store_config {{ path = "{path}" }}, '
            f'restore_on_start = {"true" if restore else "false"} }}')


async def fetch(instance: Instance, snapshot_id: str) -> tuple[int, dict[float, dict[str, object]]]:
    """FetchSnapshot: the sequence its begin message gives and the rows."""
    sequence, rows = -1, {}
    async for response in instance.stub.FetchSnapshot(rpb.FetchSnapshotRequest(snapshot_id=snapshot_id)):
        if response.WhichOneof("chunk") == "begin":
            sequence = response.begin.sequence
        elif response.WhichOneof("chunk") == "row":
            values = MessageToDict(response.row.row)
            rows[values["id"]] = values
    return sequence, rows


async def resume_from(instance: Instance, snapshot_id: str, entries: int) -> tuple[rpb.SyncHandshake, dict]:
    """Fetch the snapshot, Sync with its id, apply `entries` journal entries: the handshake and the rows."""
    _, rows = await fetch(instance, snapshot_id)
    client = follow(instance.channel, last_snapshot_id=snapshot_id)
    client.replica.rows.update(rows)
    await eventually(lambda: len(client.replica.sequences) == entries, what=f"{entries} entries after the snapshot")
    client.cancel()
    assert client.replica.handshake is not None
    return client.replica.handshake, client.replica.rows


async def test_snapshot_service_snapshots_are_restored_listed_fetched_and_resumed_from(
        stream: Stream, nats_url: str, unique_name: str, tmp_path: Path) -> None:
    batches = Batches()
    await stream.publish(batches.baseline([row(i) for i in range(1, 101)], chunk_rows=30))
    await stream.publish(batches.transaction(update(row(1, "one")), delete({"id": 2})))
    path = tmp_path / "snapshots"
    async with fanout_instance(tmp_path, nats_url, unique_name, target=store_target(path, restore=False),
                               name="old") as old:
        replica = old.app.targets.replicas[0]
        await eventually(lambda: replica.ready and replica.journal.current_sequence == 102, what="old caught up")
        manifest = await service_snapshot(LocalSnapshotStore(str(path)), replica)
        tail = await stream.publish(batches.transaction(insert(row(200)), update(row(3, "three"))),
                                    batches.transaction(delete({"id": 4})))
        await eventually(lambda: replica.journal.current_sequence == 105, what="old applied the tail")

        observer = RecordingObserver()
        async with fanout_instance(tmp_path, nats_url, unique_name, target=store_target(path, restore=True),
                                   name="fresh", observer=observer) as fresh:
            restored = fresh.app.targets.replicas[0]
            await eventually(lambda: restored.ready and restored.journal.current_sequence == 3,
                             what="fresh restored the snapshot and applied the tail")
            assert restored.latest_snapshot == manifest
            assert [m.stream_sequence for m in observer.applied] == tail  # nothing before the snapshot
            assert {r.key: r.encoded for r in restored.state.rows()} == {r.key: r.encoded for r in replica.state.rows()}

            for instance, sequence in ((fresh, 0), (old, 102)):
                listed = await instance.stub.ListSnapshots(rpb.ListSnapshotsRequest(schema="public", table="items"))
                info = next(s for s in listed.snapshots if s.snapshot_id == manifest.snapshot_id)
                assert (info.sequence, info.row_count, info.source_position) == (
                    sequence, 99, manifest.source_position)
                fetched_sequence, rows = await fetch(instance, manifest.snapshot_id)
                assert fetched_sequence == sequence and len(rows) == 99
                handshake, resumed = await resume_from(instance, manifest.snapshot_id, 3)
                assert (handshake.mode, handshake.snapshot_id, handshake.resume_from_sequence) == (
                    FROM_SNAPSHOT, manifest.snapshot_id, sequence)
                full = follow(instance.channel)
                await eventually(lambda f=full: f.replica.snapshot_done, what="a full snapshot to compare with")
                full.cancel()
                assert resumed == full.replica.rows and len(resumed) == 99
