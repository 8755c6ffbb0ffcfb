"""Query through its front door on every protocol, under both service names: every unary RPC, the Subscribe
stream with a change fed while it is open, and the same error codes everywhere."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator

import pytest
from google.protobuf import struct_pb2
from laredo.v1 import query_pb2 as pb
from laredo_testing.eventually import eventually
from laredo_testing.protocols import CallError, Caller

from tests.frontdoor.services import STREAMING, Running, over, row

pytestmark = pytest.mark.integration

SERVICE_NAMES = ("laredo.v1.TableSyncQuery", "laredo.v1.LaredoQueryService")
TABLE = {"schema": "public", "table": "items"}
BASELINE_ROWS = 6
_live_ids = itertools.count(1000)


@pytest.fixture(scope="module")
async def loaded(query_door: Running) -> AsyncIterator[Running]:
    """The query service with a baseline of BASELINE_ROWS rows applied."""
    assert query_door.batches is not None
    query_door.publish(query_door.batches.baseline([row(i, "odd" if i % 2 else "even")
                                                    for i in range(1, BASELINE_ROWS + 1)]))
    await eventually(lambda: query_door.app.service.tables[0].ready, what="the baseline applied")
    yield query_door


def text(value: str) -> struct_pb2.Value:
    return struct_pb2.Value(string_value=value)


@over(SERVICE_NAMES)
async def test_every_unary_rpc_answers(loaded: Running, protocol: str, service: str) -> None:
    caller = Caller(loaded.address, protocol)
    found = await caller.unary(f"/{service}/Lookup", pb.LookupRequest(**TABLE, key_values=[text("u3@example.com")]))
    assert found.found and found.row.fields["id"].number_value == 3
    odd = await caller.unary(f"/{service}/LookupAll", pb.LookupAllRequest(**TABLE, index_name="by_status",
                                                                          key_values=[text("odd")]))
    assert sorted(r.fields["id"].number_value for r in odd.rows)[:3] == [1, 3, 5]
    got = await caller.unary(f"/{service}/GetRow", pb.GetRowRequest(**TABLE, primary_key=4))
    assert got.found and got.row.fields["email"].string_value == "u4@example.com"
    page = await caller.unary(f"/{service}/ListRows", pb.ListRowsRequest(**TABLE, page_size=2))
    assert len(page.rows) == 2 and page.next_page_token
    count = await caller.unary(f"/{service}/CountRows", pb.CountRowsRequest(**TABLE))
    assert count.count >= BASELINE_ROWS


@over(SERVICE_NAMES)
async def test_not_found_and_invalid_argument_are_the_same_codes(loaded: Running, protocol: str,
                                                                 service: str) -> None:
    caller = Caller(loaded.address, protocol)
    with pytest.raises(CallError) as missing:
        await caller.unary(f"/{service}/CountRows", pb.CountRowsRequest(schema="public", table="nope"))
    assert missing.value.code == "NOT_FOUND" and "public.nope" in missing.value.message, missing.value
    with pytest.raises(CallError) as unnamed:
        await caller.unary(f"/{service}/LookupAll", pb.LookupAllRequest(**TABLE, key_values=[text("odd")]))
    assert unnamed.value.code == "INVALID_ARGUMENT" and "index_name is required" in unnamed.value.message, \
        unnamed.value


@over(SERVICE_NAMES, STREAMING)
async def test_subscribe_streams_existing_rows_then_a_live_change(loaded: Running, protocol: str,
                                                                  service: str) -> None:
    assert loaded.batches is not None
    live_id = next(_live_ids)
    caller = Caller(loaded.address, protocol)
    seen: list[pb.SubscribeResponse] = []

    async def read() -> None:
        request = pb.SubscribeRequest(**TABLE, replay_existing=True)
        async with contextlib.aclosing(caller.iterate(f"/{service}/Subscribe", request)) as messages:
            async for message in messages:
                seen.append(message)
                if len(seen) == 1:  # the stream is in place: feed the change
                    loaded.publish(loaded.batches.transaction(loaded.batches.insert(row(live_id, "live"))))
                if message.new_values.fields["id"].number_value == live_id:
                    return

    await asyncio.wait_for(read(), 15)
    replayed = {m.new_values.fields["id"].number_value for m in seen[:-1]}
    assert set(range(1, BASELINE_ROWS + 1)) <= replayed
    assert seen[-1].action.lower() == "insert" and seen[-1].new_values.fields["status"].string_value == "live"


@pytest.mark.parametrize("protocol", ["grpc", "connect-http1-proto", "connect-http1-json", "connect-http2-proto",
                                      "grpc-web"])
async def test_a_unary_answer_larger_than_the_door_buffers_arrives_whole(loaded: Running, protocol: str) -> None:
    """ListRows of ~3 MB, three times the door's per-connection buffer: Connect and gRPC-Web answers pass
    through the door as a stream of bytes, not as one buffered body."""
    assert loaded.batches is not None
    big = {i: row(i, "big-" + str(i) * 25_000) for i in range(2000, 2030)}
    loaded.publish(loaded.batches.transaction(*(loaded.batches.insert(r) for r in big.values())))
    caller = Caller(loaded.address, protocol)

    async def listed() -> pb.ListRowsResponse | None:
        page = await caller.unary("/laredo.v1.TableSyncQuery/ListRows", pb.ListRowsRequest(**TABLE, page_size=1000))
        return page if sum(1 for r in page.rows if r.fields["id"].number_value >= 2000) == len(big) else None

    page = await eventually(listed, what="every big row listed", timeout=20)
    assert page.ByteSize() > 2 * 1024 * 1024
