"""Snapshots fan-out did not write itself: the snapshot service's (producer laredo-snapshot, journal sequence 0) and
another instance's. Restored at start-up, listed, fetched, and resumed from by their source position."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

from google.protobuf.json_format import MessageToDict
from laredo_testing.eventually import eventually

from laredo.replication.v1 import replication_pb2 as rpb
from laredo_core.snapshots.format import Checksum, SnapshotManifest, encode_part, new_snapshot_id
from laredo_fanout.adapters.memory import MemorySnapshotStore
from laredo_fanout.application.snapshots import SnapshotPolicy
from services.fanout.tests.conftest import World, build_world
from services.fanout.tests.fanout_testkit import SyncReplica, delete, insert, row, update

MakeWorld = Callable[..., World]
SNAPSHOT_SERVICE = "laredo-snapshot"


async def written_elsewhere(store: MemorySnapshotStore, world: World, *, journal_sequence: int = 0,
                            producer: str = SNAPSHOT_SERVICE, created_at: float = 1_700_000_100.0,
                            part_rows: int = 2) -> SnapshotManifest:
    """A snapshot of `world`'s table as it stands, written with the format functions by another producer."""
    replica = world.replica
    rows = [replica.state.values_of(r) for r in replica.state.rows()]
    checksum, parts = Checksum(), []
    snapshot_id = new_snapshot_id(created_at, journal_sequence, secrets.token_hex(3))
    for index, start in enumerate(range(0, max(len(rows), 1), part_rows)):
        part, data = encode_part(index, rows[start:start + part_rows])
        checksum.update(data)
        await store.write_part(replica.table, snapshot_id, part.name, data)
        parts.append(part)
    manifest = SnapshotManifest(snapshot_id, replica.table, replica.columns, replica.state.key_columns, len(rows),
                                str(replica.applied_position), replica.stream_sequence, journal_sequence, created_at,
                                tuple(parts), checksum.value, source_id="pg", producer=producer)
    await store.write_manifest(manifest)
    return manifest


async def loaded(make_world: MakeWorld, store: MemorySnapshotStore, **options: Any) -> World:
    """A world reading a baseline of five rows and one transaction, with `store` as its snapshot store."""
    world = make_world(snapshot_store=store, snapshot_policy=SnapshotPolicy(interval=0), **options)
    world.publish(world.batches.baseline([row(i) for i in range(1, 6)]))
    world.publish(world.batches.transaction(update(row(1, "one")), delete({"id": 2})))
    world.start()
    await eventually(lambda: world.replica.ready and world.replica.journal.current_sequence == 7,
                     what="the baseline and the transaction applied")
    return world


async def fetched(world: World, manifest: SnapshotManifest) -> list[rpb.FetchSnapshotResponse]:
    return [rpb.FetchSnapshotResponse.FromString(m) async for m in world.targets.snapshot_messages(
        *await world.targets.find_snapshot(manifest.snapshot_id))]


def seeded(responses: list[rpb.FetchSnapshotResponse]) -> SyncReplica:
    """A client holding the fetched snapshot's rows, about to Sync with its id."""
    client = SyncReplica()
    for response in responses:
        if response.WhichOneof("chunk") == "row":
            values = MessageToDict(response.row.row)
            client.rows[values["id"]] = values
    return client


async def test_a_fresh_instance_restores_a_snapshot_service_snapshot_and_serves_it(make_world: MakeWorld) -> None:
    store = MemorySnapshotStore()
    writer = await loaded(make_world, store)
    manifest = await written_elsewhere(store, writer)
    writer.publish(writer.batches.transaction(insert(row(6)), update(row(3, "three"))))
    writer.publish(writer.batches.transaction(delete({"id": 4})))
    await eventually(lambda: writer.replica.journal.current_sequence == 10, what="the writer applied the tail")

    fresh = build_world(snapshot_store=store, snapshot_policy=SnapshotPolicy(interval=0), feed=writer.feed)
    fresh.tasks = writer.tasks
    assert await fresh.targets.snapshots[fresh.replica.table].restore_newest() == manifest
    assert fresh.replica.journal.current_sequence == 0 and fresh.replica.latest_snapshot == manifest
    fresh.start(start_after_sequence=manifest.stream_sequence)
    await eventually(lambda: fresh.replica.ready and fresh.replica.journal.current_sequence == 3,
                     what="the tail after the snapshot, numbered from 1")
    assert [m.stream_sequence for m in fresh.observer.applied] == [manifest.stream_sequence + 1,
                                                                   manifest.stream_sequence + 2]
    assert {r.key: r.encoded for r in fresh.replica.state.rows()} == {
        r.key: r.encoded for r in writer.replica.state.rows()}

    listed = await fresh.targets.list_snapshots("public", "items")
    assert [(m.snapshot_id, m.producer, m.journal_sequence) for m in listed] == [
        (manifest.snapshot_id, SNAPSHOT_SERVICE, 0)]
    responses = await fetched(fresh, manifest)
    assert [r.WhichOneof("chunk") for r in responses] == ["begin", *["row"] * 4, "end"]
    assert (responses[0].begin.sequence, responses[0].begin.row_count, responses[-1].end.rows_sent) == (0, 4, 4)

    client = seeded(responses)
    fresh.sync(client, last_snapshot_id=manifest.snapshot_id)
    await eventually(lambda: client.sequences == [1, 2, 3], what="every entry after the snapshot")
    assert client.handshake is not None and client.handshake.mode == rpb.SYNC_MODE_DELTA_FROM_SNAPSHOT
    assert (client.handshake.snapshot_id, client.handshake.resume_from_sequence) == (manifest.snapshot_id, 0)
    full, _ = fresh.sync()
    await eventually(lambda: full.snapshot_done, what="a full snapshot")
    assert client.rows == full.rows


async def test_an_instance_with_its_own_journal_resolves_foreign_snapshots_by_position(make_world: MakeWorld) -> None:
    store = MemorySnapshotStore()
    world = await loaded(make_world, store)
    here = world.replica.journal.current_sequence
    service = await written_elsewhere(store, world)
    other_instance = await written_elsewhere(store, world, journal_sequence=900, producer="laredo-fanout",
                                             created_at=1_700_000_200.0)
    world.publish(world.batches.transaction(insert(row(6)), update(row(3, "three"))))
    await eventually(lambda: world.replica.journal.current_sequence == here + 2, what="two entries after them")

    listed = {m.snapshot_id: world.targets.advertised_sequence(m)
              for m in await world.targets.list_snapshots("public", "items")}
    assert listed == {service.snapshot_id: here, other_instance.snapshot_id: here}
    for manifest in (service, other_instance):
        responses = await fetched(world, manifest)
        assert (responses[0].begin.sequence, responses[-1].end.sequence) == (here, here)
        client = seeded(responses)
        world.sync(client, last_snapshot_id=manifest.snapshot_id)
        await eventually(lambda c=client: c.sequences == [here + 1, here + 2], what="the entries after it")
        assert client.handshake is not None and client.handshake.mode == rpb.SYNC_MODE_DELTA_FROM_SNAPSHOT
        assert client.handshake.resume_from_sequence == here
        full, _ = world.sync()
        await eventually(lambda f=full: f.snapshot_done, what="a full snapshot")
        assert client.rows == full.rows


async def test_a_foreign_snapshot_the_journal_no_longer_covers_gets_a_full_snapshot(make_world: MakeWorld) -> None:
    store = MemorySnapshotStore()
    world = await loaded(make_world, store, journal_max_entries=2)
    manifest = await written_elsewhere(store, world, journal_sequence=6, producer="laredo-fanout")
    world.publish(world.batches.transaction(insert(row(6)), insert(row(7)), insert(row(8))))
    await eventually(lambda: world.replica.journal.current_sequence == 10, what="three entries, two retained")
    assert world.targets.advertised_sequence(manifest) == 0
    assert (await fetched(world, manifest))[0].begin.sequence == 0
    client, _ = world.sync(last_snapshot_id=manifest.snapshot_id)
    await eventually(lambda: client.snapshot_done, what="a full snapshot instead")
    assert client.handshake is not None and client.handshake.mode == rpb.SYNC_MODE_FULL_SNAPSHOT
    assert [m.snapshot_id for m in await world.targets.list_snapshots("public", "items")] == [manifest.snapshot_id]
    status = world.targets.status("public", "items")
    assert status.latest_snapshot == manifest and status.latest_snapshot_sequence == 0
