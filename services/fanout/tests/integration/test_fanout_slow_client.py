"""A client that never reads is disconnected (drop_disconnect) while 20 others get every change without delay; behind
the front door's default window too."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import grpc
import pytest
from laredo_testing.eventually import eventually

from laredo.replication.v1 import replication_pb2 as rpb
from laredo.replication.v1 import replication_pb2_grpc as rpb_grpc
from laredo_core.frontdoor.settings import FrontDoorSettings
from laredo_kernel.position import Position
from services.fanout.tests.fanout_testkit import TABLE, Batches, as_client_rows, insert, row
from services.fanout.tests.integration.fanout_cluster import (
    NO_WINDOW_GROWTH, SMALL_DOOR_WINDOW, Stream, fanout_instance, follow)

pytestmark = pytest.mark.integration

# 400 changes at 100/s; half the readers take one message per change, half batches (max_batch_size).
READERS, TRANSACTIONS, PER_TRANSACTION, RATE = 20, 400, 1, 100.0
# About 2 KiB per entry: the stuck client's transport (64 KiB window) is full after some 50 entries, its buffer
# of 300 after about 350. The first FIRST_PART transactions therefore fill the stuck client's transport and
# most of its buffer without overflowing it: every reader must get all of them while the stuck client is still
# connected (a reader waiting on the stuck one would not). The rest overflow the buffer and drop it.
DOC = "x" * 2000
BUFFER = 300
FIRST_PART = 250


async def test_a_stuck_client_is_dropped_and_the_others_keep_up(stream: Stream, nats_url: str, unique_name: str,
                                                                tmp_path: Path) -> None:
    batches = Batches()
    await stream.publish(batches.baseline([row(i) for i in range(1, 11)]))
    target = f"client_buffer {{ max_size = {BUFFER}, policy = drop_disconnect }}"
    async with fanout_instance(tmp_path, nats_url, unique_name, target=target, door=SMALL_DOOR_WINDOW) as fanout:
        received: dict[int, list[float]] = {}  # commit LSN -> when each reader got that transaction's last change

        def note(message: rpb.SyncResponse) -> None:
            which = message.WhichOneof("message")
            entries = message.journal_batch.entries if which == "journal_batch" else (
                [message.journal_entry] if which == "journal_entry" else [])
            now = time.monotonic()
            for entry in entries:
                position = Position.parse(entry.source_position)
                if position.ordinal == PER_TRANSACTION - 1 and not position.is_baseline:
                    received.setdefault(position.lsn, []).append(now)

        # Readers share this process with the server: all check the stream's grammar, two also keep the rows.
        readers = [follow(fanout.channel, client_id=f"reader-{i}", on_message=note, max_batch_size=100 * (i % 2),
                          track_rows=i < 2) for i in range(READERS)]
        stuck_channel = fanout.new_channel(NO_WINDOW_GROWTH)
        stuck = rpb_grpc.TableSyncReplicationStub(stuck_channel).Sync(
            rpb.SyncRequest(schema=TABLE.schema, table=TABLE.name, client_id="stuck"))
        assert (await stuck.read()).WhichOneof("message") == "handshake"  # and never reads again
        await eventually(lambda: all(r.replica.snapshot_done for r in readers), what="every reader's snapshot")

        published: dict[int, float] = {}

        async def publish(transactions: range) -> None:
            start = time.monotonic()
            for n, t in enumerate(transactions):
                await asyncio.sleep(max(0.0, start + n / RATE - time.monotonic()))  # a steady source
                data = batches.transaction(*(insert(row(100 + t * PER_TRANSACTION + i, doc=DOC))
                                             for i in range(PER_TRANSACTION)))
                published[batches.lsn] = time.monotonic()
                await stream.publish(data)

        await publish(range(FIRST_PART))
        first_final = 10 + FIRST_PART * PER_TRANSACTION
        await eventually(lambda: all(r.replica.sequences[-1:] == [first_final] for r in readers),
                         what="every reader to get the first part while the stuck client is still connected")
        status = await fanout.status()
        assert "stuck" in {c.client_id for c in status.clients}, "the stuck client was dropped too early to tell"
        await publish(range(FIRST_PART, TRANSACTIONS))

        final = 10 + TRANSACTIONS * PER_TRANSACTION
        await eventually(lambda: all(r.replica.sequences[-1:] == [final] for r in readers), what="every change")

        async def drain() -> None:
            while await stuck.read() is not grpc.aio.EOF:
                pass  # what the transport buffered before the server gave up on this client

        with pytest.raises(grpc.aio.AioRpcError) as dropped:
            await asyncio.wait_for(drain(), 30)  # a client never dropped fails here, not by hanging the run
        assert dropped.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert f"client stuck is too slow: its send buffer of {BUFFER} entries is full" in (dropped.value.details()
                                                                                          or "")

        state = fanout.app.targets.replicas[0].state
        model = as_client_rows([dict(state.values_of(r)) for r in state.rows()])
        delays = sorted(t - published[lsn] for lsn, times in received.items() for t in times)
        assert len(delays) == READERS * TRANSACTIONS
        p50, p99, worst = delays[len(delays) // 2], delays[int(len(delays) * 0.99)], delays[-1]
        # Reported, not asserted: timings depend on the machine's load (bench/fanout.py measures latency).
        print(f"commit-to-reader delay with a stuck client: p50 {p50 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms, "
              f"worst {worst * 1000:.1f} ms")
        for reader in readers:
            assert reader.error is None and reader.replica.sequences == list(range(11, final + 1))
        assert readers[0].replica.rows == readers[1].replica.rows == model
        status = await fanout.status()
        assert {c.client_id for c in status.clients} == {f"reader-{i}" for i in range(READERS)}
        for reader in readers:
            reader.cancel()
        await asyncio.gather(*(r.task for r in readers))


async def test_behind_the_doors_default_window_a_stuck_client_is_still_dropped(stream: Stream, nats_url: str,
                                                                              unique_name: str, tmp_path: Path) -> None:
    """At the door's default window towards the service (1 MiB), a client that stops reading lets the service send
    that much, and the door's buffer for it (1 MiB) fill, before client_buffer sees it fall behind: it is dropped
    all the same, once that much more has gone its way (docs/front-door.md)."""
    door = FrontDoorSettings()
    batches = Batches()
    await stream.publish(batches.baseline([row(i) for i in range(1, 11)]))
    target = f"client_buffer {{ max_size = {BUFFER}, policy = drop_disconnect }}"
    async with fanout_instance(tmp_path, nats_url, unique_name, target=target) as fanout:
        stuck = rpb_grpc.TableSyncReplicationStub(fanout.new_channel(NO_WINDOW_GROWTH)).Sync(
            rpb.SyncRequest(schema=TABLE.schema, table=TABLE.name, client_id="stuck"))
        assert (await stuck.read()).WhichOneof("message") == "handshake"  # and never reads again
        clients, journal = fanout.app.targets.replicas[0].clients, fanout.app.targets.replicas[0].journal
        # what the door and the client's transport may hold, in entries of DOC, and the fan-out's own buffer
        bound = (door.stream_window_bytes + door.connection_buffer_bytes + 64 * 1024) // len(DOC) + BUFFER
        sent = 0
        while "stuck" in {c.client_id for c in clients.clients()}:
            assert sent <= bound * 1.25, f"the stuck client is still served after {sent} entries of {len(DOC)} bytes"
            await stream.publish(batches.transaction(*(insert(row(100_000 + sent + i, doc=DOC)) for i in range(50))))
            sent += 50
            await eventually(lambda: journal.current_sequence == 10 + sent, what=f"{sent} entries applied")
            await asyncio.sleep(0.05)  # the fan-out hands them to the stuck client's session
        assert sent > BUFFER, "dropped before its own buffer could have filled"

        async def drain() -> None:
            while await stuck.read() is not grpc.aio.EOF:
                pass

        with pytest.raises(grpc.aio.AioRpcError) as dropped:
            await asyncio.wait_for(drain(), 30)
        assert dropped.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        print(f"the stuck client was dropped after {sent} entries of {len(DOC)} bytes (bound {bound})")
