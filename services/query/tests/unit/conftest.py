"""An in-memory query world wired like main.build: memory feed, applier, tables, query service."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from laredo_kernel.changes import TableId
from laredo_query.adapters.memory import ManualClock, MemoryChangeFeed
from laredo_query.application.applier import ChangeApplier
from laredo_query.application.queries import QueryService
from laredo_query.application.query_table import QueryTable, ReadinessSignal
from laredo_query.application.subscriptions import OverflowPolicy, SubscriberHub
from laredo_query.domain.indexed_table import IndexedTable
from laredo_query.domain.indexes import LOOKUP, IndexDefinition
from laredo_query.ports import FeedSubscription
from services.query.tests.query_testkit import TABLE, Batches

DEFINITIONS = (IndexDefinition(LOOKUP, ("email",), True), IndexDefinition("by_status", ("status",), False))


@dataclass
class World:
    feed: MemoryChangeFeed
    table: QueryTable
    applier: ChangeApplier
    service: QueryService
    signal: ReadinessSignal
    clock: ManualClock
    batches: Batches = field(default_factory=Batches)
    tasks: list[asyncio.Task[Any]] = field(default_factory=list)

    def publish(self, *messages: bytes | list[bytes]) -> None:
        for message in messages:
            for data in message if isinstance(message, list) else [message]:
                self.feed.publish(self.table.table, data)

    def start(self) -> None:
        self.tasks.append(asyncio.create_task(
            self.feed.run([FeedSubscription("pg", self.table.table)], self.applier)))


def build_world(*, table: TableId = TABLE, definitions: tuple[IndexDefinition, ...] = DEFINITIONS,
                buffer: int = 256, policy: OverflowPolicy = OverflowPolicy.DROP) -> World:
    signal, clock = ReadinessSignal(), ManualClock()
    target = QueryTable("pg", table, IndexedTable(str(table), definitions),
                        SubscriberHub(str(table), buffer, policy), signal)
    applier = ChangeApplier({table: target}, clock)
    return World(MemoryChangeFeed(json_values=True), target, applier, QueryService([target]), signal, clock)


@pytest.fixture
async def make_world() -> AsyncIterator[Callable[..., World]]:
    worlds: list[World] = []

    def make(**options: Any) -> World:
        world = build_world(**options)
        worlds.append(world)
        return world

    yield make
    tasks = [t for w in worlds for t in w.tasks]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
