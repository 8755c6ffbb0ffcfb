"""Compacting a table with in-memory adapters: first snapshot from the baseline, then base + tail, retention,
damaged snapshots, failures that leave the previous snapshot the newest, passes and commands."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import pytest
from laredo_testing.eventually import eventually
from services.snapshot.tests.snapshot_testkit import TABLE, Batches, by_key, delete, insert, row, stored_rows, update

from laredo_kernel.changes import TableId
from laredo_core.coordination.memory import InMemoryCoordinationStore
from laredo_core.coordination.ports import CommandKind, CommandStatus
from laredo_core.snapshots.config import StoreConfig
from laredo_core.snapshots.memory_store import MemorySnapshotStore
from laredo_core.stream.memory_feed import MemoryChangeFeed
from laredo_core.stream.memory_tail import MemoryStreamTail
from laredo_snapshot.adapters.memory import ManualClock, MemoryStreamBounds, RecordingObserver
from laredo_snapshot.adapters.sequential_compactor import SequentialCompactor
from laredo_snapshot.application.compaction import TableCompaction
from laredo_snapshot.application.coordination import SnapshotCoordinator
from laredo_snapshot.application.service import SnapshotService
from laredo_snapshot.domain.errors import CompactionFailed
from laredo_snapshot.domain.jobs import CompactionJob, CompactionResult, TableJob

STORE = StoreConfig(path="/unused")


class FailingCompactor:
    """Writes one part, then fails: what a crash half-way through looks like to the caller."""

    def __init__(self, store: MemorySnapshotStore) -> None:
        self.store = store
        self.jobs: list[CompactionJob] = []

    async def compact(self, job: CompactionJob) -> CompactionResult | None:
        self.jobs.append(job)
        await self.store.write_part(job.table, job.snapshot_id, "rows-00000.jsonl", b'{"id":1}\n')
        raise CompactionFailed("the Spark job failed: executor lost")


@dataclass
class World:
    feed: MemoryChangeFeed
    store: MemorySnapshotStore
    clock: ManualClock
    observer: RecordingObserver
    compaction: TableCompaction
    batches: Batches

    def publish(self, *messages: bytes | list[bytes]) -> list[int]:
        out = []
        for message in messages:
            for data in message if isinstance(message, list) else [message]:
                out.append(self.feed.publish(TABLE, data))
        return out

    async def rows(self) -> dict[Any, dict[str, Any]]:
        newest = (await self.store.list_snapshots(TABLE))[0]
        return by_key(await stored_rows(self.store, newest))


@pytest.fixture
def world() -> Iterator[World]:
    feed, store, clock, observer = MemoryChangeFeed(json_values=True), MemorySnapshotStore(), ManualClock(), \
        RecordingObserver()
    compactor = SequentialCompactor(MemoryStreamTail(feed, json_values=True), lambda _: store, observer)
    job = TableJob("pg", TABLE, STORE, keep_count=2, part_rows=2)
    yield World(feed, store, clock, observer,
                TableCompaction(job, store, MemoryStreamBounds(feed), compactor, clock, observer), Batches())


async def test_the_first_snapshot_comes_from_the_baseline_then_base_plus_tail(world: World) -> None:
    b = world.batches
    sequences = world.publish(b.baseline([row(i) for i in range(1, 6)], chunk_rows=2))
    first = await world.compaction.run()
    assert first.manifest is not None and first.manifest.stream_sequence == sequences[-1]
    assert first.manifest.producer == "laredo-snapshot" and first.manifest.journal_sequence == 0
    assert first.manifest.created_at == world.clock.now() and "-s" in first.manifest.snapshot_id
    assert await world.rows() == {i: row(i) for i in range(1, 6)}

    world.clock.advance(60)
    assert (await world.compaction.run()).manifest is None  # nothing new

    world.publish(b.transaction(update(row(2, "two")), delete({"id": 5}), insert(row(6))))
    world.clock.advance(60)
    second = await world.compaction.run({"reason": "test"})
    assert second.manifest is not None and second.result is not None
    assert second.result.messages == 1  # only the tail after the first snapshot was read
    assert second.manifest.user_meta == {"reason": "test"}
    assert await world.rows() == {1: row(1), 2: row(2, "two"), 3: row(3), 4: row(4), 6: row(6)}
    names = world.observer.names()
    assert names.count("snapshot.compact") == 3 and "snapshot.manifest" in names and "snapshot.retention" in names
    assert any(name == "rows" for name, _, _ in world.observer.measurements)


async def test_retention_keeps_count_newest(world: World) -> None:
    b = world.batches
    world.publish(b.baseline([row(1)]))
    written = []
    for i in range(4):
        world.clock.advance(10)
        world.publish(b.transaction(insert(row(10 + i))))
        written.append((await world.compaction.run()).manifest.snapshot_id)  # type: ignore[union-attr]
    assert [m.snapshot_id for m in await world.store.list_snapshots(TABLE)] == written[:1:-1]


async def test_a_damaged_newest_snapshot_is_skipped_for_an_older_one(world: World) -> None:
    b = world.batches
    world.publish(b.baseline([row(1), row(2)]))
    older = (await world.compaction.run()).manifest
    world.publish(b.transaction(insert(row(3))))
    world.clock.advance(10)
    newest = (await world.compaction.run()).manifest
    assert older is not None and newest is not None
    await world.store.write_part(TABLE, newest.snapshot_id, newest.parts[0].name, b'{"id":666}\n')  # damaged
    world.publish(b.transaction(insert(row(4))))
    world.clock.advance(10)
    outcome = await world.compaction.run()
    assert outcome.manifest is not None and outcome.result is not None
    assert outcome.result.messages == 2  # folded from the older snapshot: both transactions
    assert await world.rows() == {i: row(i) for i in range(1, 5)}


async def test_a_failed_compaction_leaves_the_previous_snapshot_newest(world: World) -> None:
    b = world.batches
    world.publish(b.baseline([row(1)]))
    previous = (await world.compaction.run()).manifest
    world.publish(b.transaction(insert(row(2))))
    failing = FailingCompactor(world.store)
    broken = TableCompaction(world.compaction.job, world.store, MemoryStreamBounds(world.feed), failing,
                             world.clock, world.observer)
    world.clock.advance(10)
    with pytest.raises(CompactionFailed):
        await broken.run()
    assert [m.snapshot_id for m in await world.store.list_snapshots(TABLE)] == [previous.snapshot_id]  # type: ignore
    with pytest.raises(Exception):  # its part was removed
        await world.store.read_part(TABLE, failing.jobs[0].snapshot_id, "rows-00000.jsonl")
    assert (await world.compaction.run()).manifest is not None  # the next run works


async def test_a_snapshot_of_an_older_stream_is_skipped(world: World) -> None:
    b = world.batches
    world.publish(b.baseline([row(1)]))
    stale = (await world.compaction.run()).manifest
    assert stale is not None
    await world.store.write_manifest(replace(stale, snapshot_id="stale", stream_sequence=999,
                                             created_at=stale.created_at + 5))
    world.publish(b.transaction(insert(row(2))))
    world.clock.advance(10)
    outcome = await world.compaction.run()
    assert outcome.manifest is not None and outcome.manifest.stream_sequence == 4
    assert await world.rows() == {1: row(1), 2: row(2)}


async def test_a_pass_reports_each_table_and_goes_on_after_a_failure(world: World) -> None:
    other = TableId("public", "other")
    bounds = MemoryStreamBounds(world.feed)
    bounds.unavailable = True
    failing = TableCompaction(TableJob("pg", other, STORE), world.store, bounds, world.compaction._compactor,
                              world.clock, world.observer)
    service = SnapshotService([failing, world.compaction], world.clock, world.observer, interval=60)
    world.publish(world.batches.baseline([row(1)]))
    runs = await service.run_pass()
    assert [bool(r.error) for r in runs] == [True, False] and runs[1].snapshot_id
    status = service.status()
    assert "StreamUnavailable" in status["tables"]["public.other"]["error"]
    assert status["tables"]["public.items"]["rows"] == 1
    assert ("failures", 1, {"table": "public.other"}) in world.observer.measurements


async def test_snapshot_commands_compact_and_answer_with_the_snapshot_ids(world: World) -> None:
    world.publish(world.batches.baseline([row(1)]))
    service = SnapshotService([world.compaction], world.clock, world.observer, interval=3600)
    store = InMemoryCoordinationStore()
    coordinator = SnapshotCoordinator(store, "snap-1", service, heartbeat_interval=0.05)
    task = asyncio.create_task(coordinator.run())
    try:
        await asyncio.wait_for(coordinator.joined["snapshot:*"].wait(), 5)
        command_id = await store.send_command("snapshot:*", CommandKind.SNAPSHOT,
                                              {"tables": ["public.items"], "user_meta": {"by": "ops"}})
        result = await store.command_result(command_id, 10)
        assert result is not None and result.status is CommandStatus.SUCCEEDED, result
        snapshot_id = result.details["snapshots"]["public.items"]
        manifest = await world.store.read_manifest(TABLE, snapshot_id)
        assert manifest is not None and manifest.user_meta == {"by": "ops"}
        unknown = await store.command_result(
            await store.send_command("snapshot:snap-1", CommandKind.SNAPSHOT, {"tables": ["public.nope"]}), 10)
        assert unknown is not None and unknown.status is CommandStatus.REJECTED and "public.nope" in unknown.message
        drain = await store.command_result(await store.send_command("snapshot:*", CommandKind.DRAIN), 10)
        assert drain is not None and drain.status is CommandStatus.REJECTED

        async def reported() -> bool:
            (instance,) = await store.instances("snapshot")
            return instance.instance_id == "snap-1" and instance.status["tables"]["public.items"].get(
                "snapshot_id") == snapshot_id

        await eventually(reported, timeout=5, what="the heartbeat reports the snapshot written")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert await store.instances("snapshot") == []  # deregistered on the way out


async def test_phases_become_nested_spans_and_metrics(world: World) -> None:
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from laredo_core.config import TelemetrySettings
    from laredo_core.telemetry import build_meter_provider
    from laredo_snapshot.adapters.otel_observer import OtelObserver

    exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    observer = OtelObserver(provider, build_meter_provider(TelemetrySettings(), "laredo-snapshot", reader=reader))
    compactor = SequentialCompactor(MemoryStreamTail(world.feed, json_values=True), lambda _: world.store, observer)
    compaction = TableCompaction(world.compaction.job, world.store, MemoryStreamBounds(world.feed), compactor,
                                 world.clock, observer)
    world.publish(world.batches.baseline([row(1), row(2)]))
    assert (await compaction.run()).manifest is not None
    spans = {span.name: span for span in exporter.get_finished_spans()}
    root = spans["snapshot.compact"]
    assert root.attributes["laredo.table"] == "public.items" and root.attributes["laredo.snapshot.rows"] == 2
    for name in ("snapshot.read_tail", "snapshot.fold", "snapshot.write", "snapshot.manifest", "snapshot.retention"):
        assert spans[name].parent is not None and spans[name].parent.span_id == root.context.span_id, name
    metrics = reader.get_metrics_data().resource_metrics[0].scope_metrics[0].metrics
    assert {"laredo.snapshot.rows", "laredo.snapshot.duration_seconds"} <= {m.name for m in metrics}
