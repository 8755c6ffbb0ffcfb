"""A client that cancels its Sync stream, in any phase, or closes its channel once the server has dropped it, is
an ordinary end: nothing above INFO in the fan-out's log, no traceback."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import grpc
import pytest
from laredo_testing.eventually import eventually

from laredo.replication.v1 import replication_pb2 as rpb
from laredo.replication.v1 import replication_pb2_grpc as rpb_grpc
from services.fanout.tests.fanout_testkit import TABLE, Batches, insert, row
from services.fanout.tests.integration.fanout_cluster import (
    NO_WINDOW_GROWTH, SMALL_DOOR_WINDOW, Instance, Stream, fanout_instance)

pytestmark = pytest.mark.integration


def sync(fanout: Instance, client_id: str, options: list | None = None, **request: object) -> tuple[
        grpc.aio.Channel, grpc.aio.UnaryStreamCall]:
    channel = fanout.new_channel(options)
    return channel, rpb_grpc.TableSyncReplicationStub(channel).Sync(
        rpb.SyncRequest(schema=TABLE.schema, table=TABLE.name, client_id=client_id, **request))


async def read(call: grpc.aio.UnaryStreamCall, messages: int) -> None:
    for _ in range(messages):
        await call.read()


async def test_clients_that_leave_in_any_phase_leave_no_error_in_the_log(
        stream: Stream, nats_url: str, unique_name: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    batches = Batches()
    await stream.publish(batches.baseline([row(i, doc="x" * 2000) for i in range(1, 1001)]))
    async with fanout_instance(tmp_path, nats_url, unique_name, target="client_buffer { max_size = 20 }",
                               door=SMALL_DOOR_WINDOW) as fanout:
        clients = fanout.app.targets.replicas[0].clients
        in_snapshot = sync(fanout, "in-snapshot", NO_WINDOW_GROWTH)  # stops reading in its snapshot
        await read(in_snapshot[1], 5)
        live = sync(fanout, "live", max_batch_size=10)
        await read(live[1], 120)  # handshake, snapshot begin, 100 messages of rows, snapshot end: live
        stuck = sync(fanout, "stuck", NO_WINDOW_GROWTH)  # will be dropped: too slow
        await read(stuck[1], 1)
        await eventually(lambda: len(clients) == 3, what="three clients connected")
        for i in range(2000, 2030):
            await stream.publish(batches.transaction(insert(row(i))))
        await eventually(lambda: "stuck" not in {c.client_id for c in clients.clients()} and
                         "in-snapshot" not in {c.client_id for c in clients.clients()},
                         what="the clients that stopped reading dropped")
        in_snapshot[1].cancel()
        await stuck[0].close()  # while the status still waits behind the data its transport holds
        live[1].cancel()
        await eventually(lambda: len(clients) == 0, what="every client gone")
        catching_up = sync(fanout, "leaving-in-catch-up", last_known_source_position=str(
            fanout.app.targets.replicas[0].journal.entries_after(1000, 1)[0].position))
        await read(catching_up[1], 1)
        await catching_up[0].close()
        await eventually(lambda: len(clients) == 0, what="the catching-up client gone")
        await asyncio.sleep(0)
    noisy = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert not noisy, "\n".join(f"{r.levelname} {r.name}: {r.getMessage()}" for r in noisy)
