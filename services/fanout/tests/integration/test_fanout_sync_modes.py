"""Each Sync mode on real components (JetStream, gRPC, S3 on moto), including resume on another instance."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest
from google.protobuf import struct_pb2
from laredo_testing.eventually import eventually
from laredo_testing.servers import S3Endpoint

from laredo.replication.v1 import replication_pb2 as rpb
from laredo_kernel.position import Position
from services.fanout.tests.fanout_testkit import Batches, as_client_rows, delete, insert, row, update
from services.fanout.tests.integration.fanout_cluster import Stream, fanout_instance, follow

pytestmark = pytest.mark.integration

FULL, DELTA, FROM_SNAPSHOT = rpb.SYNC_MODE_FULL_SNAPSHOT, rpb.SYNC_MODE_DELTA, rpb.SYNC_MODE_DELTA_FROM_SNAPSHOT


async def test_full_then_delta_by_sequence_then_delta_by_position_on_another_instance(
        stream: Stream, nats_url: str, unique_name: str, tmp_path: Path) -> None:
    batches = Batches()
    await stream.publish(batches.baseline([row(i) for i in range(1, 21)], chunk_rows=8))
    async with fanout_instance(tmp_path, nats_url, unique_name, name="a") as a, \
            fanout_instance(tmp_path, nats_url, unique_name, name="b") as b:
        fresh = follow(a.channel, client_id="app-1", identify_instance=True)
        await eventually(lambda: fresh.replica.snapshot_done, what="the fresh client's snapshot")
        assert fresh.replica.handshake is not None and fresh.replica.handshake.mode == FULL
        issued_by = {"last_known_instance_id": fresh.replica.handshake.instance_id,
                     "last_known_journal_epoch": fresh.replica.handshake.journal_epoch}
        assert all(issued_by.values()), "instance a names itself and its journal epoch"
        await stream.publish(batches.transaction(update(row(1, "one")), insert(row(21))))
        await eventually(lambda: fresh.replica.sequences == [21, 22], what="two live entries")
        fresh.cancel()
        last_sequence = fresh.replica.sequences[-1]
        entries = [m.journal_entry for m in fresh.replica.messages if m.WhichOneof("message") == "journal_entry"]
        last_position = entries[-1].source_position

        await stream.publish(batches.transaction(delete({"id": 2}), update(row(3, "three"))))
        again = follow(a.channel, client_id="app-1", last_known_sequence=last_sequence, **issued_by)
        await eventually(lambda: again.replica.sequences == [23, 24], what="the delta after the last sequence")
        assert again.replica.handshake.mode == DELTA and again.replica.snapshot_rows == 0  # type: ignore[union-attr]

        await eventually(lambda: b.app.targets.replicas[0].journal.current_sequence == 24, what="b caught up")
        moved = follow(b.channel, client_id="app-1", last_known_source_position=last_position)
        await eventually(lambda: len(moved.replica.sequences) == 2, what="the delta on instance b")
        handshake = moved.replica.handshake
        assert handshake is not None and handshake.mode == DELTA and moved.replica.snapshot_rows == 0
        resumed = [m.journal_entry for m in moved.replica.messages if m.WhichOneof("message") == "journal_entry"]
        assert Position.parse(resumed[0].source_position) > Position.parse(last_position)  # strictly after
        assert [e.action for e in resumed] == ["DELETE", "UPDATE"]
        model = {i: row(i) for i in range(1, 22)}
        model[1], model[3] = row(1, "one"), row(3, "three")
        del model[2]
        carried = fresh.replica  # the client's rows from instance a, with instance b's delta applied on top
        carried.handshake, carried.sequences = moved.replica.handshake, []
        for message in moved.replica.messages[1:]:
            carried.apply(message)
        assert carried.rows == as_client_rows(list(model.values()))
        for follower in (again, moved):
            follower.cancel()


async def test_a_pruned_position_gets_a_full_snapshot(stream: Stream, nats_url: str, unique_name: str,
                                                      tmp_path: Path) -> None:
    batches = Batches()
    await stream.publish(batches.baseline([row(i) for i in range(1, 4)]))
    await stream.publish([batches.transaction(insert(row(i))) for i in range(10, 20)])
    async with fanout_instance(tmp_path, nats_url, unique_name, target="journal { max_entries = 5 }") as a:
        await eventually(lambda: a.app.targets.replicas[0].journal.current_sequence == 13, what="every change")
        first = a.app.targets.replicas[0].journal.first_retained_sequence
        assert first == 9
        stale = follow(a.channel, last_known_source_position="0/1000100:0", last_known_sequence=2)
        await eventually(lambda: stale.replica.snapshot_done, what="the full snapshot")
        assert stale.replica.handshake.mode == FULL  # type: ignore[union-attr]
        assert stale.replica.rows == as_client_rows([row(i) for i in (1, 2, 3, *range(10, 20))])
        stale.cancel()


async def test_a_retained_snapshot_id_gets_a_delta_from_snapshot(
        stream: Stream, nats_url: str, unique_name: str, tmp_path: Path, s3_endpoint: S3Endpoint) -> None:
    batches = Batches()
    await stream.publish(batches.baseline([row(i) for i in range(1, 6)]))
    store = f"""snapshot {{ interval = 0, store = s3, store_config {{ bucket = {unique_name}, prefix = fanout,
        endpoint = "http://{s3_endpoint.endpoint}", access_key = {s3_endpoint.access_key},
        secret_key = {s3_endpoint.secret_key}, region = {s3_endpoint.region} }} }}"""
    async with fanout_instance(tmp_path, nats_url, unique_name, target=store) as a:
        replica = a.app.targets.replicas[0]
        await eventually(lambda: replica.ready, what="the table ready")
        manifest = await a.app.targets.snapshots[replica.table].take()
        assert manifest is not None
        listed = await a.stub.ListSnapshots(rpb.ListSnapshotsRequest(schema="public", table="items"))
        (info,) = listed.snapshots
        assert (info.snapshot_id, info.sequence, info.row_count) == (manifest.snapshot_id, 5, 5)
        assert info.source_position == manifest.source_position and info.size_bytes > 0 and info.created_at.seconds

        fetched = [c async for c in a.stub.FetchSnapshot(rpb.FetchSnapshotRequest(snapshot_id=info.snapshot_id))]
        assert [c.WhichOneof("chunk") for c in fetched] == ["begin", *["row"] * 5, "end"]
        with pytest.raises(grpc.aio.AioRpcError) as missing:
            async for _ in a.stub.FetchSnapshot(rpb.FetchSnapshotRequest(snapshot_id="no-such-snapshot")):
                pass
        assert missing.value.code() == grpc.StatusCode.NOT_FOUND

        await stream.publish(batches.transaction(insert(row(6)), update(row(1, "one"))))
        await eventually(lambda: replica.journal.current_sequence == 7, what="the changes after the snapshot")
        client = follow(a.channel, last_snapshot_id=info.snapshot_id)
        await eventually(lambda: client.replica.sequences == [6, 7], what="the entries after the snapshot")
        handshake = client.replica.handshake
        assert handshake is not None and handshake.mode == FROM_SNAPSHOT and handshake.snapshot_id == info.snapshot_id
        assert handshake.resume_from_sequence == 5 and client.replica.snapshot_rows == 0
        status = await a.status()
        assert status.latest_snapshot.snapshot_id == info.snapshot_id
        client.cancel()


async def test_max_clients_status_detail_and_filters_over_grpc(stream: Stream, nats_url: str, unique_name: str,
                                                               tmp_path: Path) -> None:
    batches = Batches()
    await stream.publish(batches.baseline([row(i, "even" if i % 2 == 0 else "odd") for i in range(1, 7)]))
    async with fanout_instance(tmp_path, nats_url, unique_name, target="grpc { max_clients = 2 }") as a:
        predicate = rpb.FieldPredicate(field="name", equals=struct_pb2.Value(string_value="even"))
        filtered = follow(a.channel, client_id="evens", gaps_allowed=True, filters=[predicate], max_batch_size=10)
        plain = follow(a.channel, client_id="all")
        await eventually(lambda: filtered.replica.snapshot_done and plain.replica.snapshot_done, what="snapshots")
        assert set(filtered.replica.rows) == {2.0, 4.0, 6.0}
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            async for _ in a.stub.Sync(rpb.SyncRequest(schema="public", table="items", client_id="third")):
                pass
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "max clients reached (2)" in (refused.value.details() or "")

        await stream.publish(batches.transaction(update(row(2, "odd")), insert(row(8, "even"))))
        await eventually(lambda: set(filtered.replica.rows) == {4.0, 6.0, 8.0}, what="2 left, 8 joined the filter")
        await eventually(lambda: plain.replica.sequences[-1:] == [8], what="the unfiltered client")
        status = await a.status()
        clients = {c.client_id: c for c in status.clients}
        assert set(clients) == {"evens", "all"} and status.connected_clients == 2
        for client in clients.values():
            assert (client.current_sequence, client.behind_count, client.buffer_depth, client.state) == (
                8, 0, 0, "live")
            assert client.connected_at.seconds > 0
        for follower in (filtered, plain):
            follower.cancel()
        await asyncio.gather(filtered.task, plain.task)
