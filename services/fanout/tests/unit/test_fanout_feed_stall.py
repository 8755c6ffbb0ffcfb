"""A change feed that stands still for a table makes the instance unready, naming the table and why."""

from __future__ import annotations

from collections.abc import Callable

from laredo_testing.eventually import eventually

from services.fanout.tests.conftest import World
from services.fanout.tests.fanout_testkit import TABLE, row


async def test_a_stalled_feed_is_reported_in_readiness(make_world: Callable[..., World]) -> None:
    world = make_world()
    world.targets.feed_stalls = world.feed.stalled
    world.publish(world.batches.baseline([row(1)]))
    world.start()
    await eventually(lambda: world.targets.readiness()[0], what="the instance ready")
    world.feed.stalls[TABLE] = "no message taken for 12s while the stream holds up to sequence 40"
    ready, details = world.targets.readiness()
    assert not ready and details["tables"]["public.items"]["feed_stalled"].startswith("no message taken for 12s")
    del world.feed.stalls[TABLE]
    assert world.targets.readiness()[0]
