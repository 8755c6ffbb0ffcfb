"""Stop saves the local snapshot, start resumes from it by position; a corrupt file means a fresh start; and the
thread-backed blocking client."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any
import pytest
from laredo_testing.eventually import eventually

from laredo_client import BlockingLaredoClient, Index, LaredoClient
from libs.client.tests.conftest import FAST_BACKOFF
from libs.client.tests.scripted_server import (
    ScriptedReplicationServer,
    entry,
    handshake,
    hold,
    pos,
    row,
    snapshot,
)

MakeClient = Callable[..., LaredoClient]


async def test_stop_saves_and_a_restart_resumes_by_position(tmp_path: Path, scripted_server: ScriptedReplicationServer,
                                                            make_client: MakeClient) -> None:
    path = tmp_path / "cache" / "items.json"
    scripted_server.serve(handshake("FULL_SNAPSHOT", current=4, resume=4, instance="fanout-a", epoch="e1"),
                          snapshot([row(1), row(2)], sequence=4, position=pos(4)),
                          entry(5, pos(5), "UPDATE", new=row(2, "two")), hold())
    first = make_client(local_snapshot_path=path, indexes=[Index("by_name", "name", unique=True)])
    await first.start()
    await eventually(lambda: first.last_sequence == 5, what="entry 5 applied")
    await first.stop()
    saved = json.loads(path.read_text())
    assert (saved["last_seq"], saved["last_source_position"], saved["server_id"], saved["journal_epoch"]) == \
        (5, pos(5), "fanout-a", "e1")
    assert saved["snapshot_id"] == "snap-1" and saved["server_address"] == scripted_server.address
    assert sorted(r["id"] for r in saved["rows"]) == [1, 2]
    assert [p.name for p in path.parent.iterdir()] == ["items.json"], "no temporary file left behind"

    resumed = scripted_server.serve(handshake("DELTA", current=5, resume=5, instance="fanout-a", epoch="e1"), hold())
    second = make_client(local_snapshot_path=path, indexes=[Index("by_name", "name", unique=True)])
    await second.start()
    assert second.lookup_all("by_name", "two") == [row(2, "two")], "restored rows are indexed at once"
    await second.await_ready(5)
    request = resumed.request
    assert (request.last_known_source_position, request.last_known_sequence, request.last_snapshot_id) == \
        (pos(5), 5, "snap-1")
    assert (request.last_known_instance_id, request.last_known_journal_epoch) == ("fanout-a", "e1")
    assert second.stats.modes == ["DELTA"] and second.full_resyncs == 0


async def test_a_corrupt_local_snapshot_means_a_fresh_start(tmp_path: Path, scripted_server: ScriptedReplicationServer,
                                                            make_client: MakeClient,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "items.json"
    path.write_text('{"format": 1, "rows": [{"id": 1')
    fresh = scripted_server.serve(handshake("FULL_SNAPSHOT", current=1, resume=1),
                                  snapshot([row(1)], sequence=1, position=pos(1)), hold())
    client = make_client(local_snapshot_path=path)
    with caplog.at_level(logging.WARNING, logger="laredo_client"):
        await client.start()
        await client.await_ready(5)
    assert f"local snapshot {path} is unusable" in caplog.text
    assert fresh.request.last_known_source_position == "" and client.full_resyncs == 0


async def test_a_client_that_never_synced_writes_no_file(tmp_path: Path, scripted_server: ScriptedReplicationServer,
                                                         make_client: MakeClient) -> None:
    scripted_server.serve(hold())
    client = make_client(local_snapshot_path=tmp_path / "items.json")
    await client.start()
    await eventually(lambda: len(scripted_server.calls) == 1, what="the Sync call")
    await client.stop()
    assert not (tmp_path / "items.json").exists()


async def test_blocking_client_replicates_on_its_own_thread(tmp_path: Path,
                                                            scripted_server: ScriptedReplicationServer) -> None:
    scripted_server.serve(handshake("FULL_SNAPSHOT", current=2, resume=2),
                          snapshot([row(1, team="a"), row(2, team="b")], sequence=2, position=pos(2)),
                          entry(3, pos(3), "INSERT", new=row(3)), hold())
    client = BlockingLaredoClient(scripted_server.address, "public", "items", backoff=FAST_BACKOFF,
                                  lookup_fields=("name",), indexes=[Index("by_team", "team")],
                                  local_snapshot_path=tmp_path / "items.json")
    heard: list[tuple[str, Any]] = []
    client.listen(lambda old, new: heard.append((threading.current_thread().name, new)))
    try:
        await asyncio.to_thread(client.start)  # blocking calls run off this loop, which serves the server
        await asyncio.to_thread(client.await_ready, 5)
        await eventually(lambda: heard == [("laredo-client public.items", row(3))],
                         what="the insert heard on the client's thread")
        assert client.ready and client.count() == 3 and client.lookup("n1") == row(1, team="a")
        assert client.lookup_all("by_team", "b") == [row(2, team="b")]
        assert client.last_source_position == pos(3) and [c.name for c in client.columns][0] == "id"
    finally:
        await asyncio.to_thread(client.stop)
    assert (tmp_path / "items.json").exists()
    await asyncio.to_thread(client.stop)  # idempotent
    with pytest.raises(RuntimeError, match="stopped"):
        client.start()
