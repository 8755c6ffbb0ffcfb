"""GoAway handoff against scripted streams: one server plays the draining instance and the new one in turn
(the new one with its own sequence numbers), the way a load balancer routes a re-dial."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from laredo_testing.eventually import eventually

from laredo_client import BackoffPolicy, LaredoClient
from libs.client.tests.scripted_server import (
    Mark,
    ScriptedReplicationServer,
    entry,
    go_away,
    handshake,
    hold,
    pos,
    row,
    snapshot,
)

MakeClient = Callable[..., LaredoClient]


def recorder(client: LaredoClient) -> list[tuple[Any, Any]]:
    events: list[tuple[Any, Any]] = []
    client.listen(lambda old, new: events.append((old, new)))
    return events


async def test_old_stream_applies_until_the_new_one_caught_up_and_each_change_lands_once(
        scripted_server: ScriptedReplicationServer, make_client: MakeClient) -> None:
    old_gate, new_gate, old_replayed = asyncio.Event(), asyncio.Event(), asyncio.Event()
    old = scripted_server.serve(
        handshake("FULL_SNAPSHOT", current=10, resume=10),
        snapshot([row(1), row(2), row(3)], sequence=10, position=pos(10)),
        entry(11, pos(11), "UPDATE", new=row(1, "x")), go_away(), old_gate,
        entry(12, pos(12), "INSERT", new=row(4)), entry(13, pos(13), "UPDATE", new=row(2, "y")),
        Mark(old_replayed), hold())
    new = scripted_server.serve(
        handshake("DELTA", current=103, resume=100),
        entry(101, pos(12), "INSERT", new=row(4)), entry(102, pos(13), "UPDATE", new=row(2, "y")), new_gate,
        entry(103, pos(14), "DELETE", old={"id": 3}), hold())
    client = make_client()
    events = recorder(client)
    await client.start()
    await eventually(lambda: client.get(2) == row(2, "y"), what="the new stream applied 101-102 first")
    assert new.request.last_known_sequence == 0 and new.request.last_known_source_position == pos(11)
    assert new.request.last_snapshot_id == "snap-1"
    old_gate.set()  # the draining instance, behind the new one, now sends the same changes
    await eventually(old_replayed.is_set, what="the old stream sent 12-13")
    await eventually(lambda: client.stats.entries_skipped == 2, what="the old stream's replays skipped")
    assert not old.closed_by_client.is_set(), "the old stream stays open until the new one caught up"
    new_gate.set()
    await eventually(old.closed_by_client.is_set, what="the old stream closed once the new one caught up")
    assert events == [(row(1), row(1, "x")), (None, row(4)), (row(2), row(2, "y")), (row(3), None)]
    assert sorted(r["id"] for r in client.all()) == [1, 2, 4]
    assert client.last_sequence == 103 and client.last_source_position == pos(14)
    assert (client.stats.handoffs, client.stats.reconnects, client.full_resyncs) == (1, 0, 0)
    assert len(scripted_server.calls) == 2


async def test_when_the_old_stream_ends_first_the_new_one_carries_on(scripted_server: ScriptedReplicationServer,
                                                                     make_client: MakeClient) -> None:
    gate = asyncio.Event()
    old = scripted_server.serve(handshake("FULL_SNAPSHOT", current=5, resume=5),
                                snapshot([row(1)], sequence=5, position=pos(5)), go_away(deadline_ms=1))
    new = scripted_server.serve(handshake("DELTA", current=102, resume=100), gate,
                                entry(101, pos(6), "INSERT", new=row(6)), entry(102, pos(7), "INSERT", new=row(7)),
                                hold())
    old.steps.append(new.started)  # the draining server ends its stream only after the re-dial arrived
    client = make_client()
    await client.start()
    await eventually(old.finished.is_set, what="the draining server ended the old stream")
    gate.set()
    await eventually(lambda: client.get(7) is not None, what="the new stream's entries")
    assert (client.stats.handoffs, client.stats.reconnects, len(scripted_server.calls)) == (1, 0, 2)
    assert client.last_sequence == 102


async def test_a_new_stream_that_needs_a_full_snapshot_is_staged_while_the_old_one_applies(
        scripted_server: ScriptedReplicationServer, make_client: MakeClient) -> None:
    old_gate, new_gate = asyncio.Event(), asyncio.Event()
    old = scripted_server.serve(handshake("FULL_SNAPSHOT", current=10, resume=10),
                                snapshot([row(1), row(2)], sequence=10, position=pos(10)), go_away(), old_gate,
                                entry(11, pos(11), "UPDATE", new=row(1, "x")), hold())
    staged = snapshot([row(1, "x"), row(2), row(5)], sequence=50, position=pos(12), snapshot_id="snap-b")
    scripted_server.serve(handshake("FULL_SNAPSHOT", current=50, resume=50), staged[:-1], new_gate, staged[-1],
                          hold())
    client = make_client()
    events = recorder(client)
    await client.start()
    await eventually(lambda: len(scripted_server.calls) == 2, what="the re-dial")
    old_gate.set()
    await eventually(lambda: client.get(1) == row(1, "x"), what="the old stream applying during the staging")
    assert client.get(5) is None, "a staged snapshot is invisible until its end"
    new_gate.set()
    await eventually(old.closed_by_client.is_set, what="the handoff after the new snapshot")
    assert client.get(5) == row(5) and client.snapshot_id == "snap-b"
    assert events == [(row(1), row(1, "x")), (None, row(5))]
    assert client.full_resyncs == 1 and client.stats.handoffs == 1


async def test_a_new_stream_landing_on_a_draining_server_is_retried_while_the_old_one_streams(
        scripted_server: ScriptedReplicationServer, make_client: MakeClient) -> None:
    old = scripted_server.serve(handshake("FULL_SNAPSHOT", current=10, resume=10),
                                snapshot([row(1)], sequence=10, position=pos(10)), go_away(), hold())
    draining_too = scripted_server.serve(handshake("DELTA", current=12, resume=10), go_away(), hold())
    healthy = scripted_server.serve(handshake("DELTA", current=10, resume=10), hold())
    client = make_client()
    await client.start()
    await eventually(old.closed_by_client.is_set, what="the handoff to the healthy server")
    assert draining_too.closed_by_client.is_set() and not healthy.finished.is_set()
    assert (client.stats.handoffs, client.stats.reconnects, len(scripted_server.calls)) == (1, 0, 3)
    assert healthy.request.last_known_source_position == pos(10)


async def test_goaways_right_after_a_handoff_are_paced_by_backoff(scripted_server: ScriptedReplicationServer,
                                                                  make_client: MakeClient) -> None:
    """A single draining instance: each re-dial catches up at once and is told to go away again."""
    scripted_server.serve(handshake("FULL_SNAPSHOT", current=10, resume=10),
                          snapshot([row(1)], sequence=10, position=pos(10)), go_away(), hold())
    draining = scripted_server.serve(handshake("DELTA", current=10, resume=10), go_away(), hold())
    client = make_client(backoff=BackoffPolicy(initial=0.3, maximum=5, jitter=0))
    await client.start()
    await eventually(lambda: "the new server is draining too" in client.status, what="a paced second handoff")
    assert len(scripted_server.calls) == 2, "no re-dial before the backoff delay"
    healthy = scripted_server.serve(handshake("DELTA", current=10, resume=10), hold())
    await eventually(draining.closed_by_client.is_set, what="the handoff to the healthy server")
    assert healthy.started.is_set() and client.stats.handoffs == 2 and client.full_resyncs == 0
