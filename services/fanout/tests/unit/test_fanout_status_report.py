"""The fan-out instance's status in the coordination store: columns for OAM, reported at once when ready."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from laredo_core.coordination.memory import InMemoryCoordinationStore
from laredo_core.coordination.status_reports import instance_from_event
from laredo_fanout.application.coordination import FanoutCoordinator
from services.fanout.tests.conftest import World
from services.fanout.tests.fanout_testkit import row

MakeWorld = Callable[..., World]


async def test_readiness_is_reported_at_once_with_the_tables_columns(make_world: MakeWorld) -> None:
    world = make_world()
    store = InMemoryCoordinationStore(block=0.05)
    events = store.events()
    await events.join()
    # A 30 s heartbeat: only the poke on readiness can report the baseline this fast.
    coordinator = FanoutCoordinator(store, "fanout-a", world.targets, world.clock, heartbeat_interval=30.0)
    world.tasks.append(asyncio.create_task(coordinator.run()))
    try:
        registered = instance_from_event(await asyncio.wait_for(anext(events), 5))
        assert registered is not None and registered.status["ready"] is False
        assert registered.status["tables"]["public.items"]["columns"] == []
        world.publish(world.batches.baseline([row(1)]))
        world.start()
        ready = instance_from_event(await asyncio.wait_for(anext(events), 5))
        assert ready is not None and ready.status["ready"] is True
        entry = ready.status["tables"]["public.items"]
        assert entry["baseline_complete"] is True and entry["rows"] == 1
        columns = entry["columns"]
        assert columns[0] == {"ordinal_position": 1, "name": "id", "type": world.replica.columns[0].type_name,
                              "type_oid": world.replica.columns[0].type_oid, "not_null": True,
                              "primary_key_ordinal": 1}
        assert [c["name"] for c in columns] == [c.name for c in world.replica.columns]
    finally:
        await events.aclose()
