"""Fan-out Replication through its front door on every protocol, under both service names: every unary RPC,
the Sync stream (snapshot, then a change fed while it is open), and the same error codes everywhere."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator

import pytest
from laredo.replication.v1 import replication_pb2 as pb
from laredo_testing.eventually import eventually
from laredo_testing.protocols import CallError, Caller

from tests.frontdoor.services import STREAMING, Running, over, row

pytestmark = pytest.mark.integration

SERVICE_NAMES = ("laredo.replication.v1.TableSyncReplication", "laredo.replication.v1.LaredoReplicationService")
TABLE = {"schema": "public", "table": "items"}
BASELINE_ROWS = 5
_live_ids = itertools.count(1000)


@pytest.fixture(scope="module")
async def loaded(fanout_door: Running) -> AsyncIterator[Running]:
    assert fanout_door.batches is not None
    fanout_door.publish(fanout_door.batches.baseline([row(i) for i in range(1, BASELINE_ROWS + 1)]))
    await eventually(lambda: fanout_door.app.targets.readiness()[0], what="the fan-out baseline applied")
    yield fanout_door


@over(SERVICE_NAMES)
async def test_every_unary_rpc_answers(loaded: Running, protocol: str, service: str) -> None:
    caller = Caller(loaded.address, protocol)
    status = await caller.unary(f"/{service}/GetReplicationStatus", pb.GetReplicationStatusRequest(**TABLE))
    assert status.current_sequence >= BASELINE_ROWS
    snapshots = await caller.unary(f"/{service}/ListSnapshots", pb.ListSnapshotsRequest(**TABLE))
    assert list(snapshots.snapshots) == []


@over(SERVICE_NAMES)
async def test_not_found_and_invalid_argument_are_the_same_codes(loaded: Running, protocol: str,
                                                                 service: str) -> None:
    caller = Caller(loaded.address, protocol)
    with pytest.raises(CallError) as missing:
        await caller.unary(f"/{service}/GetReplicationStatus", pb.GetReplicationStatusRequest(schema="public",
                                                                                             table="nope"))
    assert missing.value.code == "NOT_FOUND" and "public.nope" in missing.value.message, missing.value
    if protocol in STREAMING:  # the same codes on a stream
        with pytest.raises(CallError) as unnamed:
            await caller.stream(f"/{service}/Sync", pb.SyncRequest(schema="public"), limit=1)
        assert unnamed.value.code == "INVALID_ARGUMENT" and "required" in unnamed.value.message, unnamed.value
        with pytest.raises(CallError) as no_snapshot:
            await caller.stream(f"/{service}/FetchSnapshot", pb.FetchSnapshotRequest(snapshot_id="snap-none"),
                                limit=1)
        assert no_snapshot.value.code == "NOT_FOUND" and "snap-none" in no_snapshot.value.message, no_snapshot.value


@over(SERVICE_NAMES, STREAMING)
async def test_sync_streams_the_snapshot_then_a_live_change(loaded: Running, protocol: str, service: str) -> None:
    assert loaded.batches is not None
    live_id = next(_live_ids)
    caller = Caller(loaded.address, protocol)
    seen: list[pb.SyncResponse] = []

    def live_entries() -> list[pb.ReplicationJournalEntry]:
        return [e for m in seen for e in ([m.journal_entry] if m.HasField("journal_entry") else
                                          m.journal_batch.entries if m.HasField("journal_batch") else [])]

    async def read() -> None:
        request = pb.SyncRequest(**TABLE, client_id=f"{protocol}-{service}", max_batch_size=10)
        async with contextlib.aclosing(caller.iterate(f"/{service}/Sync", request)) as messages:
            async for message in messages:
                seen.append(message)
                if message.HasField("snapshot_end"):  # live from here: feed the change
                    loaded.publish(loaded.batches.transaction(loaded.batches.insert(row(live_id, "live"))))
                if any(e.new_values.fields["id"].number_value == live_id for e in live_entries()):
                    return

    await asyncio.wait_for(read(), 15)
    assert seen[0].handshake.mode == pb.SYNC_MODE_FULL_SNAPSHOT
    snapshot_ids = {r.row.fields["id"].number_value for m in seen if m.HasField("snapshot_rows")
                    for r in m.snapshot_rows.rows}
    snapshot_ids |= {m.snapshot_row.row.fields["id"].number_value for m in seen if m.HasField("snapshot_row")}
    assert set(range(1, BASELINE_ROWS + 1)) <= snapshot_ids
    live = [e for e in live_entries() if e.new_values.fields["id"].number_value == live_id]
    assert live and live[0].new_values.fields["status"].string_value == "live"
