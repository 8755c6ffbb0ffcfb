"""A client resumes strictly after the position it sent: an instance behind that position waits until it applied
it (up to resume_wait), then sends only later entries; past resume_wait the client is told to go elsewhere."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable

import pytest
from laredo_testing.eventually import eventually

from laredo.replication.v1 import replication_pb2 as rpb
from laredo_kernel.position import BASELINE_ORDINAL_BASE, END_OF_LSN, Position
from laredo_fanout.domain.errors import InstanceBehind
from laredo_fanout.domain.journal import position_reached
from services.fanout.tests.conftest import World
from services.fanout.tests.fanout_testkit import insert, row

MakeWorld = Callable[..., World]
P = Position(0x500, 3)


@pytest.mark.parametrize(("applied", "wanted", "reached"), [
    (None, P, False),
    (Position(0x500, 2), P, False),
    (P, P, True),
    (Position(0x600, 0), P, True),
    (Position(0x500, 0), Position(0x500), True),  # a bare LSN: a change at it is applied
    (Position(0x400, 9), Position(0x500), False),
    (Position(0x500, BASELINE_ORDINAL_BASE + 7), Position(0x500, BASELINE_ORDINAL_BASE + 8), False),
    (Position(0x100, 0, epoch=1), Position(0x500, END_OF_LSN), True),  # a later epoch is after everything before
    (Position(0x500, 3), Position(0x500, 3, repair=1), False),  # a repair after the change is not applied yet
])
def test_position_reached(applied: Position | None, wanted: Position, reached: bool) -> None:
    assert position_reached(applied, wanted) is reached


def started(make_world: MakeWorld, **options: object) -> World:
    world = make_world(**options)
    world.publish(world.batches.baseline([row(i) for i in range(1, 4)]))
    world.start()
    return world


async def test_a_client_ahead_of_the_instance_waits_and_gets_only_later_entries(make_world: MakeWorld) -> None:
    world = started(make_world)
    await eventually(lambda: world.replica.ready, what="the table ready")
    future = [world.batches.transaction(insert(row(i)), insert(row(i + 1000))) for i in range(10, 20)]
    held = Position(world.batches.lsn - 0x100 * 4, 1)  # the client applied 6 of the 10 transactions
    client, task = world.sync(client_id="ahead", last_known_source_position=str(held))
    await asyncio.sleep(0)
    assert client.handshake is None and not task.done(), "nothing to send before the instance reaches the client"
    world.publish(*future)
    await eventually(lambda: len(client.sequences) == 8, what="the entries of the last 4 transactions")
    assert client.handshake is not None and client.handshake.mode == rpb.SYNC_MODE_DELTA
    first = next(m.journal_entry for m in client.messages if m.WhichOneof("message") == "journal_entry")
    assert Position.parse(first.source_position) > held  # strictly after what the client holds
    assert client.handshake.resume_from_sequence == 3 + 12 and client.sequences == list(range(16, 24))


async def test_an_instance_that_stays_behind_sends_the_client_elsewhere(make_world: MakeWorld) -> None:
    world = make_world()
    world.replica.limits = dataclasses.replace(world.replica.limits, resume_wait=0.05)
    world.publish(world.batches.baseline([row(1)]))
    world.start()
    ahead = Position(world.batches.lsn + 0x1000, 0)
    _, task = world.sync(client_id="ahead", last_known_source_position=str(ahead))
    with pytest.raises(InstanceBehind, match=rf"behind the client's position {ahead}, and did not reach it within "
                                             r"0.05s; connect to another instance or retry later"):
        await asyncio.wait_for(task, 5)
    assert len(world.replica.clients) == 0

