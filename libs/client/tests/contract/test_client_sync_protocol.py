"""LaredoClient against a real grpc.aio server playing scripted Sync streams: readiness, reads, listeners,
reconnects (clean end, silence, gaps, errors), resume requests, and fatal statuses."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import grpc
import pytest
from laredo_testing.eventually import eventually

from laredo_client import ClientFailed, Filter, Index, LaredoClient
from libs.client.tests.scripted_server import (
    Abort,
    Mark,
    Pause,
    ScriptedReplicationServer,
    entry,
    handshake,
    heartbeat,
    hold,
    pos,
    row,
    snapshot,
)

MakeClient = Callable[..., LaredoClient]


async def next_call(server: ScriptedReplicationServer, index: int) -> Any:
    await eventually(lambda: len(server.calls) > index, timeout=10, what=f"Sync call #{index + 1}")
    return server.calls[index]


async def test_fresh_client_gets_a_snapshot_then_live_changes(scripted_server: ScriptedReplicationServer,
                                                              make_client: MakeClient) -> None:
    release = asyncio.Event()
    scripted_server.serve(
        handshake("FULL_SNAPSHOT", current=3, resume=3),
        snapshot([row(1, team="a"), row(2, team="b"), row(3, team="a")], sequence=3, position=pos(3)),
        release,
        entry(4, pos(4), "INSERT", new=row(4, team="b")),
        entry(5, pos(5), "UPDATE", old={"id": 1}, new=row(1, "one", team="b")),
        entry(6, pos(6), "DELETE", old={"id": 2}),
        heartbeat(6), hold())
    client = make_client(lookup_fields=("name",), indexes=[Index("by_team", "team")], client_id="c1")
    events: list[tuple[Any, Any]] = []
    client.listen(lambda old, new: events.append((old, new)))
    await client.start()
    await client.await_ready(5)
    assert client.count() == 3 and events == [], "snapshot rows do not fire listeners"
    assert [c.name for c in client.columns] == ["id", "name", "team"]
    release.set()
    await eventually(lambda: client.last_sequence == 6, what="the live entries applied")
    assert client.get(1) == {"id": 1, "name": "one", "team": "b"} and client.get(2) is None
    assert isinstance(client.get(4)["id"], int)
    assert client.lookup("one")["id"] == 1 and client.lookup("n2") is None
    assert sorted(r["id"] for r in client.lookup_all("by_team", "b")) == [1, 4]
    assert sorted(r["id"] for r in client.all()) == [1, 3, 4]
    assert client.last_source_position == pos(6)
    assert events == [(None, row(4, team="b")), (row(1, team="a"), row(1, "one", team="b")), (row(2, team="b"), None)]
    request = scripted_server.calls[0].request
    assert (request.client_id, request.last_known_sequence, request.last_known_source_position) == ("c1", 0, "")
    assert client.stats.modes == ["FULL_SNAPSHOT"] and client.full_resyncs == 0


async def test_reads_return_copies(scripted_server: ScriptedReplicationServer, make_client: MakeClient) -> None:
    scripted_server.serve(handshake("FULL_SNAPSHOT", current=1, resume=1),
                          snapshot([row(1)], sequence=1, position=pos(1)), hold())
    client = make_client()
    await client.start()
    await client.await_ready(5)
    client.get(1)["name"] = "scribbled"
    client.all()[0]["name"] = "scribbled"
    assert client.get(1) == row(1)


async def test_a_catching_up_resume_is_ready_only_at_the_handshake_sequence(
        scripted_server: ScriptedReplicationServer, make_client: MakeClient) -> None:
    gate = asyncio.Event()
    first = scripted_server.serve(handshake("FULL_SNAPSHOT", current=2, resume=2),
                                  snapshot([row(1)], sequence=2, position=pos(2)))  # then a clean end
    second = scripted_server.serve(handshake("DELTA", current=5, resume=2),
                                   entry(3, pos(3), "INSERT", new=row(3)), entry(4, pos(4), "INSERT", new=row(4)),
                                   gate, entry(5, pos(5), "INSERT", new=row(5)), hold())
    client = make_client()
    await client.start()
    await client.await_ready(5)
    await eventually(lambda: client.get(4) is not None, what="the resumed stream's first entries")
    assert first.finished.is_set()
    assert second.request.last_known_source_position == pos(2) and second.request.last_known_sequence == 0
    assert second.request.last_snapshot_id == "snap-1"
    assert client.stats.reconnects == 1


async def test_a_resume_with_nothing_new_is_ready_at_once(scripted_server: ScriptedReplicationServer,
                                                          make_client: MakeClient) -> None:
    scripted_server.serve(handshake("FULL_SNAPSHOT", current=2, resume=2),
                          snapshot([row(1)], sequence=2, position=pos(2)), Abort(grpc.StatusCode.UNAVAILABLE))
    scripted_server.serve(handshake("DELTA", current=2, resume=2), hold())
    client = make_client()
    await client.start()
    second = await next_call(scripted_server, 1)
    await eventually(lambda: client.stats.modes == ["FULL_SNAPSHOT", "DELTA"], what="the DELTA handshake")
    assert client.ready and second.request.last_known_source_position == pos(2)


async def test_first_readiness_waits_for_a_catching_up_delta(tmp_path: Any, scripted_server: ScriptedReplicationServer,
                                                              make_client: MakeClient) -> None:
    """Restored from a local snapshot: not ready until the DELTA reached the handshake's sequence."""
    seed = make_client(local_snapshot_path=tmp_path / "items.json")
    scripted_server.serve(handshake("FULL_SNAPSHOT", current=2, resume=2),
                          snapshot([row(1)], sequence=2, position=pos(2)), hold())
    await seed.start()
    await seed.await_ready(5)
    await seed.stop()
    gate = asyncio.Event()
    scripted_server.serve(handshake("DELTA", current=4, resume=2), entry(3, pos(3), "INSERT", new=row(3)), gate,
                          entry(4, pos(4), "INSERT", new=row(4)), hold())
    client = make_client(local_snapshot_path=tmp_path / "items.json")
    await client.start()
    assert client.get(1) == row(1), "restored rows are readable before the first stream"
    await eventually(lambda: client.get(3) is not None, what="entry 3 applied")
    with pytest.raises(TimeoutError, match="not ready after 0.2s"):
        await client.await_ready(0.2)
    gate.set()
    await client.await_ready(5)
    assert client.stats.modes == ["DELTA"] and client.full_resyncs == 0


async def test_heartbeats_keep_a_quiet_stream_alive_and_silence_kills_it(
        scripted_server: ScriptedReplicationServer, make_client: MakeClient) -> None:
    beats = [step for _ in range(25) for step in (heartbeat(1), Pause(0.1))]
    beaten = asyncio.Event()
    quiet = scripted_server.serve(handshake("FULL_SNAPSHOT", current=1, resume=1),
                                  snapshot([row(1)], sequence=1, position=pos(1)), *beats, Mark(beaten), hold())
    client = make_client(heartbeat_timeout=1.0)  # well above the beat interval: a busy machine stalls a little
    await client.start()
    await eventually(beaten.is_set, timeout=10, what="2.5 s of heartbeats every 0.1 s")
    assert len(scripted_server.calls) == 1, "heartbeats count as messages"
    scripted_server.serve(handshake("DELTA", current=1, resume=1), hold())
    await next_call(scripted_server, 1)
    await eventually(lambda: quiet.closed_by_client.is_set(), what="the silent stream closed by the client")
    await eventually(lambda: client.stats.modes[-1:] == ["DELTA"], what="the new stream's DELTA handshake")
    assert client.stats.silent_streams == 1


async def test_silence_before_the_handshake_also_reconnects(scripted_server: ScriptedReplicationServer,
                                                            make_client: MakeClient) -> None:
    stuck = scripted_server.serve(hold())
    scripted_server.serve(handshake("FULL_SNAPSHOT", current=1, resume=1),
                          snapshot([row(1)], sequence=1, position=pos(1)), hold())
    client = make_client(heartbeat_timeout=0.5)
    await client.start()
    await client.await_ready(5)
    assert stuck.closed_by_client.is_set()


async def test_a_sequence_gap_reconnects_by_position_without_applying_past_it(
        scripted_server: ScriptedReplicationServer, make_client: MakeClient) -> None:
    scripted_server.serve(handshake("FULL_SNAPSHOT", current=1, resume=1),
                          snapshot([row(1)], sequence=1, position=pos(1)),
                          entry(2, pos(2), "INSERT", new=row(2)), entry(4, pos(4), "INSERT", new=row(4)), hold())
    scripted_server.serve(handshake("DELTA", current=4, resume=2), entry(3, pos(3), "INSERT", new=row(3)),
                          entry(4, pos(4), "INSERT", new=row(4)), hold())
    client = make_client()
    await client.start()
    second = await next_call(scripted_server, 1)
    assert second.request.last_known_source_position == pos(2)
    await eventually(lambda: client.count() == 4, what="rows 1-4 after the reconnect")
    assert client.stats.sequence_gaps == 1 and client.full_resyncs == 0


async def test_a_full_resync_is_counted_and_reported_to_listeners(scripted_server: ScriptedReplicationServer,
                                                                 make_client: MakeClient) -> None:
    scripted_server.serve(handshake("FULL_SNAPSHOT", current=2, resume=2),
                          snapshot([row(1), row(2)], sequence=2, position=pos(2)), Abort(grpc.StatusCode.ABORTED))
    scripted_server.serve(handshake("FULL_SNAPSHOT", current=9, resume=9),
                          snapshot([row(1), row(3)], sequence=9, position=pos(9), snapshot_id="snap-2"), hold())
    client = make_client()
    events: list[tuple[Any, Any]] = []
    client.listen(lambda old, new: events.append((old, new)))
    await client.start()
    await eventually(lambda: client.full_resyncs == 1 and client.get(3) is not None, what="the re-sync installed")
    assert sorted(events, key=repr) == sorted([(None, row(3)), (row(2), None)], key=repr)
    assert client.snapshot_id == "snap-2"


async def test_filters_and_batching_are_requested(scripted_server: ScriptedReplicationServer,
                                                  make_client: MakeClient) -> None:
    scripted_server.serve(handshake("FULL_SNAPSHOT", current=5, resume=5),
                          snapshot([row(1)], sequence=5, position=pos(5), batch=4),
                          entry(9, pos(9), "INSERT", new=row(9)), hold())  # 6-8 were filtered out
    client = make_client(filters=[Filter.equals("team", "a"), Filter.prefix("name", "n"),
                                  Filter.is_in("id", [1, 9])], max_batch_size=64)
    await client.start()
    await eventually(lambda: client.get(9) is not None, what="an entry after filtered-out sequences")
    request = scripted_server.calls[0].request
    assert [p.WhichOneof("match") for p in request.filters] == ["equals", "prefix", "in"]
    assert request.max_batch_size == 64 and client.stats.sequence_gaps == 0


async def test_batching_is_asked_for_by_default_and_a_server_ignoring_it_is_read_as_well(
        scripted_server: ScriptedReplicationServer, make_client: MakeClient) -> None:
    scripted_server.serve(handshake("FULL_SNAPSHOT", current=2, resume=2),  # one row and one entry per message
                          snapshot([row(1), row(2)], sequence=2, position=pos(2)),
                          entry(3, pos(3), "INSERT", new=row(3)), entry(4, pos(4), "DELETE", old=row(1)), hold())
    client = make_client()
    await client.start()
    await eventually(lambda: client.count() == 2 and client.get(3) is not None, what="rows 2 and 3 only")
    assert scripted_server.calls[0].request.max_batch_size == 100


async def test_a_batch_larger_than_grpcs_default_message_limit_is_accepted(
        scripted_server: ScriptedReplicationServer, make_client: MakeClient) -> None:
    wide = [row(i, name="x" * 1_500_000) for i in range(1, 5)]  # 6 MB in one SnapshotRowBatch
    scripted_server.serve(handshake("FULL_SNAPSHOT", current=1, resume=1),
                          snapshot(wide, sequence=1, position=pos(1), batch=4), hold())
    client = make_client()
    await client.start()
    await client.await_ready(10)
    assert client.count() == 4 and client.stats.reconnects == 0


async def test_a_reconnect_sends_the_sequence_with_the_journal_that_issued_it(
        scripted_server: ScriptedReplicationServer, make_client: MakeClient) -> None:
    """The sequence travels with instance and epoch, for the server to judge; a server that does not name its
    journal cannot have judged, so its stream is refused before anything is applied."""
    first = scripted_server.serve(handshake("FULL_SNAPSHOT", current=7, resume=7, instance="fanout-a", epoch="e1"),
                                  snapshot([row(1)], sequence=7, position=pos(7)))
    unnamed = scripted_server.serve(handshake("DELTA", current=50, resume=7),
                                    entry(8, pos(8), "INSERT", new=row(8)), hold())
    scripted_server.serve(handshake("DELTA", current=50, resume=50, instance="fanout-b", epoch="e5"), hold())
    client = make_client()
    await client.start()
    third = await next_call(scripted_server, 2)
    assert first.request.identify_instance and not first.request.last_known_instance_id
    request = unnamed.request
    assert (request.last_known_sequence, request.last_known_instance_id, request.last_known_journal_epoch,
            request.last_known_source_position) == (7, "fanout-a", "e1", pos(7))
    # The client cancels that call before it dials again, but the server may hear of it after the new call.
    await eventually(unnamed.closed_by_client.is_set, what="a sequence must not be trusted to an unnamed server")
    assert client.get(8) is None, "nothing of the unnamed server's stream was applied"
    assert third.request.last_known_sequence == 0 and third.request.last_known_source_position == pos(7)
    assert third.request.identify_instance and not third.request.last_known_instance_id
    await eventually(lambda: client.last_sequence == 50, what="the cursor moved to fanout-b's sequence")


async def test_retryable_statuses_reconnect_and_fatal_ones_fail(scripted_server: ScriptedReplicationServer,
                                                                make_client: MakeClient) -> None:
    scripted_server.serve(Abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "max clients reached"))
    scripted_server.serve(Abort(grpc.StatusCode.NOT_FOUND, "no fan-out target for public.items"))
    client = make_client()
    await client.start()
    with pytest.raises(ClientFailed, match="NOT_FOUND: no fan-out target for public.items"):
        await client.await_ready(5)
    assert len(scripted_server.calls) == 2 and client.failure is not None


async def test_an_unreachable_server_is_retried_until_it_appears(make_client: MakeClient) -> None:
    server = ScriptedReplicationServer()
    await server.start()
    address = server.address
    await server.stop()
    client = make_client(address=address)
    await client.start()
    await eventually(lambda: client._backoff.attempt >= 3, what="several failed connection attempts")
    with pytest.raises(TimeoutError, match=f"connecting to {address}.*UNAVAILABLE"):
        await client.await_ready(0.01)
