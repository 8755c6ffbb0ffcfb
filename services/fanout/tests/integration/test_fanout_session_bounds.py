"""A client that stops reading during its snapshot or its catch-up is dropped by client_buffer's policy, the journal
stays within its limits, and the other clients keep being served (real NATS, a real gRPC server)."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from laredo_testing.eventually import eventually

from laredo.replication.v1 import replication_pb2 as rpb
from laredo.replication.v1 import replication_pb2_grpc as rpb_grpc
from services.fanout.tests.fanout_testkit import TABLE, Batches, insert, row
from services.fanout.tests.integration.fanout_cluster import (
    NO_WINDOW_GROWTH, SMALL_DOOR_WINDOW, Instance, Stream, fanout_instance, follow)

pytestmark = pytest.mark.integration

DOC = "x" * 8000  # about 8 KiB per row: what a stuck client's transport holds (its 64 KiB window, and the front
# door's buffer and window towards the service, some 100 KiB more) is full after some 20 rows


async def stuck_sync(fanout: Instance, **request: object) -> grpc.aio.UnaryStreamCall:
    """A Sync call that reads its handshake and nothing after it."""
    call = rpb_grpc.TableSyncReplicationStub(fanout.new_channel(NO_WINDOW_GROWTH)).Sync(
        rpb.SyncRequest(schema=TABLE.schema, table=TABLE.name, client_id="stuck", **request))
    assert (await call.read()).WhichOneof("message") == "handshake"
    return call


async def ended_with(fanout: Instance, call: grpc.aio.UnaryStreamCall) -> grpc.aio.AioRpcError:
    """How the server ended the stuck call: once it did, the client reads what its transport buffered, then the
    status (which waits behind that data)."""
    clients = fanout.app.targets.replicas[0].clients
    await eventually(lambda: "stuck" not in {c.client_id for c in clients.clients()},
                     what="the server to end the stuck client's stream")
    with pytest.raises(grpc.aio.AioRpcError) as ended:
        while await call.read() is not grpc.aio.EOF:
            pass  # what the transport buffered before the server gave up on this client
    return ended.value


async def publish_changes(stream: Stream, batches: Batches, ids: range, doc: str = "d") -> None:
    for i in ids:
        await stream.publish(batches.transaction(insert(row(i, doc=doc))))


async def test_a_client_stuck_in_its_snapshot_is_dropped_and_the_journal_stays_bounded(
        stream: Stream, nats_url: str, unique_name: str, tmp_path: Path) -> None:
    batches = Batches()
    await stream.publish(batches.baseline([row(i, doc=DOC) for i in range(1, 1001)]))  # a 2 MiB snapshot
    target = "journal { max_entries = 5 }, client_buffer { max_size = 50, policy = drop_disconnect }"
    async with fanout_instance(tmp_path, nats_url, unique_name, target=target, door=SMALL_DOOR_WINDOW) as fanout:
        journal = fanout.app.targets.replicas[0].journal
        reader = follow(fanout.channel, client_id="reader", track_rows=False)
        await eventually(lambda: reader.replica.snapshot_done, what="the reader's snapshot")
        stuck = await stuck_sync(fanout)
        status = await fanout.status()
        assert {c.client_id: c.state for c in status.clients}["stuck"] == "catching_up"
        await publish_changes(stream, batches, range(1000, 1200))
        error = await ended_with(fanout, stuck)
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "client stuck is too slow: its send buffer of 50 entries is full during its snapshot" in (
            error.details() or "")
        await eventually(lambda: reader.replica.sequences[-1:] == [1200], what="the reader to get every change")
        assert len(journal) == 5  # held for nobody any more
        assert reader.error is None and reader.replica.sequences == list(range(1001, 1201))
        reader.cancel()


async def test_a_client_stuck_in_its_catch_up_is_dropped(stream: Stream, nats_url: str, unique_name: str,
                                                         tmp_path: Path) -> None:
    batches = Batches()
    await stream.publish(batches.baseline([row(i) for i in range(1, 4)]))
    target = "journal { max_entries = 60 }, client_buffer { max_size = 30, policy = drop_disconnect }"
    async with fanout_instance(tmp_path, nats_url, unique_name, target=target, door=SMALL_DOOR_WINDOW) as fanout:
        journal = fanout.app.targets.replicas[0].journal
        reader = follow(fanout.channel, client_id="reader", track_rows=False)
        await eventually(lambda: reader.replica.snapshot_done, what="the reader's snapshot")
        await publish_changes(stream, batches, range(100, 160), doc=DOC)  # a 480 KiB backlog for the stuck client
        await eventually(lambda: journal.current_sequence == 63, what="the backlog applied")
        stuck = await stuck_sync(fanout, last_known_source_position=str(journal.entries_after(3, 1)[0].position),
                                 max_batch_size=5)
        await publish_changes(stream, batches, range(200, 300))
        error = await ended_with(fanout, stuck)
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "its send buffer of 30 entries is full during its catch-up" in (error.details() or "")
        await eventually(lambda: reader.replica.sequences[-1:] == [163], timeout=30,
                         what="the reader to get every change")
        assert len(journal) == 60
        assert reader.error is None
        reader.cancel()
