"""A Sync client that stops reading for a while, behind the front door: what happens to it is the fan-out's
slow-client policy (client_buffer), as with direct gRPC, and never the door cutting the whole connection off.

The client grants a large flow-control window (grpcio grows its window to megabytes), so the door may send
it a lot before TCP pushes back; the stream carries one journal entry per message.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest
from laredo.replication.v1 import replication_pb2 as pb
from laredo_testing.eventually import eventually
from laredo_testing.protocols import Caller

from tests.frontdoor.raw import RawH2, grpc_frame
from tests.frontdoor import services
from tests.frontdoor.services import Running, row

pytestmark = pytest.mark.integration

SYNC = "/laredo.replication.v1.TableSyncReplication/Sync"
DOOR_LOG = "laredo_core.frontdoor.envoy_process"
ENTRIES, PER_TRANSACTION, VALUE_BYTES = 30_000, 1000, 1000


TABLES = services.FANOUT_TABLES.replace("max_entries = 1000", f"max_entries = {2 * ENTRIES}")


@pytest.fixture(scope="module")
async def loaded(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Running]:
    """Fan-out whose journal keeps every entry of the test: only the door or client_buffer may end the stream."""
    from laredo_core.config import load_settings
    from laredo_core.snapshots.memory_store import MemorySnapshotStore
    from laredo_core.stream.memory_feed import MemoryChangeFeed
    from laredo_fanout.main import build

    assert TABLES != services.FANOUT_TABLES
    feed = MemoryChangeFeed(json_values=True)
    settings = load_settings(services.write_config(tmp_path_factory.mktemp("slow-reader"), TABLES), env={})
    async with services.serving(build(settings, feed=feed, snapshot_store=MemorySnapshotStore()), feed=feed,
                                batches=services.Batches()) as running:
        assert running.batches is not None
        running.publish(running.batches.baseline([row(i) for i in range(1, 11)]))
        await eventually(lambda: running.app.targets.readiness()[0], what="the fan-out baseline applied")
        yield running


async def current_sequence(running: Running) -> int:
    status = await Caller(running.address).unary("/laredo.replication.v1.TableSyncReplication/GetReplicationStatus",
                                                 pb.GetReplicationStatusRequest(schema="public", table="items"))
    return status.current_sequence


async def test_a_client_that_stops_reading_is_not_cut_off_as_a_flood(loaded: Running,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=DOOR_LOG)
    batches = loaded.batches
    assert batches is not None
    async with RawH2.connect(loaded.address, window=2**31 - 1) as raw:
        request = pb.SyncRequest(schema="public", table="items", client_id="stops-reading")
        stream_id = await raw.request(SYNC, grpc_frame(request.SerializeToString()))
        outcome = raw.streams[stream_id]
        seen: list[str | None] = []

        def kinds() -> list[str | None]:
            seen.extend(pb.SyncResponse.FromString(m).WhichOneof("message")
                        for m in outcome.messages()[len(seen):])
            return seen

        await raw.wait_for(lambda: "snapshot_end" in kinds(), 10)
        raw.reading.clear()
        start = await current_sequence(loaded)
        big = "x" * VALUE_BYTES
        for first in range(0, ENTRIES, PER_TRANSACTION):
            loaded.publish(batches.transaction(*(batches.update(row(1 + i % 10, f"{big}{first + i}"))
                                                 for i in range(PER_TRANSACTION))))
        target = start + ENTRIES

        async def applied() -> bool:
            return await current_sequence(loaded) >= target

        await eventually(applied, what=f"the fan-out journal at sequence {target}", timeout=60,
                         interval=0.2)
        await asyncio.sleep(2)  # the door has had time to queue what it took from the fan-out
        raw.reading.set()

        def settled() -> bool:
            entries = sum(1 for k in kinds() if k == "journal_entry")
            return raw.closed_by_server or outcome.ended or outcome.reset is not None or entries >= ENTRIES

        await raw.wait_for(settled, 60)
        floods = [r.getMessage() for r in caplog.records if "flood" in r.getMessage()]
        assert not floods, f"the door cut the connection off as a flood: {floods[:1]}"
        assert not raw.closed_by_server, (f"the server closed the connection (GOAWAY {raw.goaway}) after "
                                          f"{kinds().count('journal_entry')} of {ENTRIES} entries")
        assert outcome.reset is None, outcome
        if outcome.ended:  # the fan-out's slow-client policy ended the stream, with a status that says why
            assert outcome.grpc_status not in (None, "0"), outcome.headers
            assert outcome.headers.get("grpc-message"), outcome.headers
        else:  # or it kept the client, which then got every entry, in order
            sequences = [pb.SyncResponse.FromString(m).journal_entry.sequence for m in outcome.messages()
                         if pb.SyncResponse.FromString(m).WhichOneof("message") == "journal_entry"]
            assert sequences == list(range(start + 1, target + 1))
