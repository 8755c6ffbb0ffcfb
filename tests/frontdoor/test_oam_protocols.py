"""OAM through its front door on every protocol, under both service names: one call of each unary RPC family,
the WatchStatus stream with a status change made while it is open, and the same error codes everywhere."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json

import pytest
from google.protobuf.message import Message
from laredo.v1 import oam_pb2
from laredo_core.coordination.ports import InstanceStatus
from laredo_testing.protocols import CallError, Caller

from services.oam.tests.oam_testkit import executing
from tests.frontdoor.curl import (grpc_web_text_body, grpc_web_text_frames, header_fields, run_curl,
                                 trailers)
from tests.frontdoor.services import STREAMING, Running, over

pytestmark = pytest.mark.integration

SERVICE_NAMES = ("laredo.v1.TableSyncOAM", "laredo.v1.LaredoOAMService")
PIPELINE = "pg:public.items:indexed-memory"
_sources = itertools.count(1)


async def expect_error(caller: Caller, method: str, request: Message, code: str, words: str) -> None:
    with pytest.raises(CallError) as caught:
        await caller.unary(method, request)
    assert caught.value.code == code and words in caught.value.message, caught.value


@over(SERVICE_NAMES)
async def test_read_families_answer(oam_door: Running, protocol: str, service: str) -> None:
    caller = Caller(oam_door.address, protocol)
    status = await caller.unary(f"/{service}/GetStatus", oam_pb2.GetStatusRequest())
    assert status.state != oam_pb2.SERVICE_STATE_UNSPECIFIED
    table = await caller.unary(f"/{service}/GetTableStatus", oam_pb2.GetTableStatusRequest(schema="public",
                                                                                         table="items"))
    assert {p.pipeline_id for p in table.pipelines} >= {PIPELINE}
    tables = await caller.unary(f"/{service}/ListTables", oam_pb2.ListTablesRequest())
    assert [(t.schema, t.table) for t in tables.tables][:1] == [("public", "items")]
    snapshots = await caller.unary(f"/{service}/ListSnapshots", oam_pb2.ListSnapshotsRequest(table="public.items"))
    assert list(snapshots.snapshots) == []
    letters = await caller.unary(f"/{service}/ListDeadLetters", oam_pb2.ListDeadLettersRequest(pipeline_id=PIPELINE))
    assert list(letters.entries) == []


@over(SERVICE_NAMES)
async def test_not_found_and_invalid_argument_are_the_same_codes(oam_door: Running, protocol: str,
                                                                 service: str) -> None:
    caller = Caller(oam_door.address, protocol)
    await expect_error(caller, f"/{service}/GetTableStatus", oam_pb2.GetTableStatusRequest(schema="public",
                                                                                          table="nope"),
                       "NOT_FOUND", "public.nope is not configured")
    await expect_error(caller, f"/{service}/GetReplayStatus", oam_pb2.GetReplayStatusRequest(replay_id="r-none"),
                       "NOT_FOUND", "r-none")
    await expect_error(caller, f"/{service}/ListDeadLetters", oam_pb2.ListDeadLettersRequest(),
                       "INVALID_ARGUMENT", "pipeline_id is required")


@over(SERVICE_NAMES, STREAMING)  # GET only for calls without side effects
async def test_admin_family_reaches_the_instances(oam_door: Running, protocol: str, service: str) -> None:
    assert oam_door.store is not None
    caller = Caller(oam_door.address, protocol)
    async with executing(oam_door.store, "ingest:pg", "i1") as seen:
        paused = await caller.unary(f"/{service}/PauseSync", oam_pb2.PauseSyncRequest(source_id="pg"))
    assert paused.state == oam_pb2.SERVICE_STATE_PAUSED
    assert [c.kind.value for c in seen] == ["pause"]
    await expect_error(caller, f"/{service}/ResetSource", oam_pb2.ResetSourceRequest(),
                       "INVALID_ARGUMENT", "source_id is required")


@over(SERVICE_NAMES, STREAMING)
async def test_watch_status_streams_a_change_made_while_open(oam_door: Running, protocol: str,
                                                             service: str) -> None:
    """A new source's heartbeat is the change; it is repeated until the open stream reports one."""
    assert oam_door.store is not None
    store = oam_door.store
    caller = Caller(oam_door.address, protocol)
    sources: list[str] = []

    async def beat() -> None:
        while True:
            sources.append(f"src-{next(_sources)}")
            await store.heartbeat(InstanceStatus("ingest", sources[-1], {"source": sources[-1],
                                                                          "phase": "streaming"}), ttl=30)
            await asyncio.sleep(0.5)

    watch = asyncio.create_task(caller.stream(f"/{service}/WatchStatus", oam_pb2.WatchStatusRequest(),
                                              until=lambda m: m.WhichOneof("event") == "source_state_change"))
    beats = asyncio.create_task(beat())
    try:
        messages = await asyncio.wait_for(watch, 15)
    finally:
        beats.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await beats
    change = messages[-1].source_state_change
    assert change.source_id in sources and change.event_type == "connected"
    assert messages[-1].HasField("timestamp")


async def test_curl_with_a_json_body_gets_status(oam_door: Running) -> None:
    code, out, err = await run_curl("-H", "content-type: application/json", "-d", "{}",
                                    f"http://{oam_door.address}/laredo.v1.TableSyncOAM/GetStatus")
    assert code == 0, err
    assert json.loads(out)["state"].startswith("SERVICE_STATE_"), out


async def test_what_the_go_cli_sends_gets_status(oam_door: Running) -> None:
    """The Go Laredo CLI: Connect unary over HTTP/1.1, application/proto, the upstream service name."""
    code, out, err = await run_curl("--http1.1", "-H", "content-type: application/proto",
                                    "-H", "connect-protocol-version: 1", "-A", "connect-go/1.16.2 (go1.22.0)",
                                    "--data-binary", "@-", "-w", "\n%{http_code} %{http_version}",
                                    f"http://{oam_door.address}/laredo.v1.LaredoOAMService/GetTableStatus",
                                    stdin=oam_pb2.GetTableStatusRequest(schema="public",
                                                                        table="items").SerializeToString())
    assert code == 0, err
    body, _, status = out.rpartition(b"\n")
    assert status == b"200 1.1", status
    assert PIPELINE in {p.pipeline_id for p in oam_pb2.GetTableStatusResponse.FromString(body).pipelines}


async def test_grpc_web_text_gets_table_status(oam_door: Running) -> None:
    """gRPC-Web text (application/grpc-web-text): no Python client library speaks it, so curl sends a base64
    body made from the protobuf message, and the base64 response is decoded and checked here."""
    request = oam_pb2.GetTableStatusRequest(schema="public", table="items")
    code, out, err = await run_curl("-H", "content-type: application/grpc-web-text", "-H", "x-grpc-web: 1",
                                    "-H", "accept: application/grpc-web-text", "--data-binary",
                                    grpc_web_text_body(request),
                                    f"http://{oam_door.address}/laredo.v1.LaredoOAMService/GetTableStatus")
    assert code == 0, err
    frames = grpc_web_text_frames(out)
    message = oam_pb2.GetTableStatusResponse.FromString(frames[0][1])
    assert PIPELINE in {p.pipeline_id for p in message.pipelines}
    assert trailers(frames).get("grpc-status") == "0", frames
    missing = oam_pb2.GetTableStatusRequest(schema="public", table="nope")
    code, out, err = await run_curl("--include", "-H", "content-type: application/grpc-web-text", "--data-binary",
                                    grpc_web_text_body(missing),
                                    f"http://{oam_door.address}/laredo.v1.TableSyncOAM/GetTableStatus")
    assert code == 0, err
    head, _, body = out.partition(b"\r\n\r\n")
    fields = trailers(grpc_web_text_frames(body)) or header_fields(head)  # an error may come trailers-only
    assert fields.get("grpc-status") == "5" and "public.nope" in fields.get("grpc-message", ""), out  # NOT_FOUND


async def test_get_is_refused_for_calls_with_side_effects(oam_door: Running) -> None:
    assert oam_door.store is not None
    async with executing(oam_door.store, "ingest:pg", "i1") as seen:
        with pytest.raises(CallError):
            await Caller(oam_door.address, "connect-get-json").unary("/laredo.v1.TableSyncOAM/PauseSync",
                                                                     oam_pb2.PauseSyncRequest(source_id="pg"))
    assert not seen, f"a GET carried out {[c.kind.value for c in seen]}"
