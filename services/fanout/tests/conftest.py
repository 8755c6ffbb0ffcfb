"""Fixtures for the fan-out tests: an in-memory world (feed, replicator, targets) wired like main.build."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from services.fanout.tests.fanout_testkit import TABLE, Batches, SyncReplica

from laredo_kernel.changes import TableId
from laredo_fanout.adapters.memory import ManualClock, MemoryChangeFeed, MemorySnapshotStore, RecordingObserver
from laredo_fanout.adapters.protobuf_sync_encoder import ProtobufSyncEncoder
from laredo_fanout.application.replicator import Replicator
from laredo_fanout.application.session import SyncRequestInfo
from laredo_fanout.application.snapshots import SnapshotPolicy, TableSnapshots
from laredo_fanout.application.table_replica import ReplicaLimits, TableReplica
from laredo_fanout.application.targets import FanoutTargets
from laredo_fanout.domain.client_buffer import BufferLimits, BufferPolicy
from laredo_fanout.ports import FeedSubscription, Observer, SnapshotStore


class ClientWriter:
    """The client end of a session in memory: applies every message; close() makes it stop reading."""

    def __init__(self, replica: SyncReplica) -> None:
        self.replica = replica
        self.reading = asyncio.Event()
        self.reading.set()

    async def write(self, data: bytes) -> None:
        await self.reading.wait()
        self.replica.apply_bytes(data)

    def stop_reading(self) -> None:
        self.reading.clear()

    def resume_reading(self) -> None:
        self.reading.set()


@dataclass
class World:
    feed: MemoryChangeFeed
    replica: TableReplica
    replicator: Replicator
    targets: FanoutTargets
    observer: Any
    clock: ManualClock
    batches: Batches = field(default_factory=Batches)
    tasks: list[asyncio.Task[Any]] = field(default_factory=list)

    def publish(self, *messages: bytes | list[bytes], headers: dict[str, str] | None = None) -> None:
        for message in messages:
            for data in message if isinstance(message, list) else [message]:
                self.feed.publish(self.replica.table, data, headers)

    def start(self, start_after_sequence: int = 0) -> None:
        self.tasks.append(asyncio.create_task(
            self.feed.run([FeedSubscription("pg", self.replica.table, start_after_sequence)], self.replicator)))

    def issued_here(self) -> dict[str, str]:
        """The request fields that say a sequence was issued by this instance's current journal."""
        return {"last_known_instance_id": self.targets.instance_id,
                "last_known_journal_epoch": self.replica.journal.epoch}

    def sync(self, replica: SyncReplica | None = None, **request: Any) -> tuple[SyncReplica, asyncio.Task[None]]:
        """Start a Sync client that applies every message to a SyncReplica."""
        client, task = self.sync_client(replica, **request)
        return client.replica, task

    def sync_client(self, replica: SyncReplica | None = None, **request: Any) -> tuple[ClientWriter, asyncio.Task[None]]:
        """Start a Sync client whose reading can be paused (ClientWriter.stop_reading)."""
        client = ClientWriter(replica or SyncReplica(gaps_allowed=bool(request.get("filters"))))
        session = self.targets.open_session(SyncRequestInfo(schema=TABLE.schema, table=TABLE.name, **request))
        task = asyncio.create_task(session.serve(client.write))
        self.tasks.append(task)
        return client, task


def build_world(*, table: TableId = TABLE, journal_max_entries: int = 1000, journal_max_age: float = 0.0,
                heartbeat_interval: float = 30.0, max_clients: int = 0, observer: Observer | None = None,
                feed: MemoryChangeFeed | None = None, buffer_max_size: int = 50_000,
                buffer_policy: BufferPolicy = BufferPolicy.DROP_DISCONNECT, snapshot_store: SnapshotStore | None = None,
                snapshot_policy: SnapshotPolicy | None = None, buffer_catch_up_timeout: float = 300.0) -> World:
    encoder, clock = ProtobufSyncEncoder(), ManualClock()
    observer = observer or RecordingObserver()
    limits = ReplicaLimits(journal_max_entries, journal_max_age, heartbeat_interval, max_clients,
                           BufferLimits(buffer_max_size, buffer_policy, buffer_catch_up_timeout))
    replica = TableReplica("pg", table, limits, encoder)
    replicator = Replicator({table: replica}, encoder, clock, observer)
    snapshots = {}
    if snapshot_store is not None or snapshot_policy is not None:
        snapshots[table] = TableSnapshots(replica, snapshot_store or MemorySnapshotStore(),
                                          snapshot_policy or SnapshotPolicy(interval=0), encoder=encoder, clock=clock)
    targets = FanoutTargets([replica], encoder=encoder, clock=clock, observer=observer, snapshots=snapshots,
                            instance_id="fanout-test")
    return World(feed or MemoryChangeFeed(), replica, replicator, targets, observer, clock)


@pytest.fixture
async def make_world() -> AsyncIterator[Callable[..., World]]:
    worlds: list[World] = []

    def make(**options: Any) -> World:
        world = build_world(**options)
        worlds.append(world)
        return world

    yield make
    for world in worlds:
        for task in world.tasks:
            task.cancel()
        await asyncio.gather(*(t for w in worlds for t in w.tasks), return_exceptions=True)
