"""The dead-letter RPCs on a real grpc.aio server: entries as the specification shapes them, and every error code
(INVALID_ARGUMENT, NOT_FOUND, FAILED_PRECONDITION, UNAVAILABLE) under both service names."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import grpc
import pytest
from google.protobuf.json_format import MessageToDict
from laredo.stream.v1 import change_stream_pb2 as spb
from laredo.v1 import oam_pb2, oam_pb2_grpc
from laredo_core.config import load_settings
from laredo_core.deadletters.memory_store import InMemoryDeadLetterStore
from laredo_core.deadletters.model import DeadLetter, PipelineId
from laredo_core.deadletters.store import DeadLetterStore
from laredo_kernel.tuples import encode_tuple

from laredo_oam.adapters.memory import InMemoryCoordinationStore, MemoryChangeTail
from laredo_oam.main import build

PIPELINE_ID = "pg:public.users:indexed-memory"
STUBS = (oam_pb2_grpc.TableSyncOAMStub, oam_pb2_grpc.LaredoOAMServiceStub)
Start = Callable[..., Awaitable[list[oam_pb2_grpc.TableSyncOAMStub]]]


@pytest.fixture
async def start_oam(tmp_path: Path) -> AsyncIterator[Start]:
    running: list[tuple[asyncio.Event, asyncio.Task[None], grpc.aio.Channel]] = []

    async def start(extra: str = "", dead_letter_store: DeadLetterStore | None = None) -> list[
            oam_pb2_grpc.TableSyncOAMStub]:
        path = tmp_path / f"laredo-{len(running)}.conf"
        path.write_text(f"""
sources {{ pg {{ type = postgresql, connection = "host=127.0.0.1 dbname=app" }} }}
tables = [ {{ source = pg, table = users, targets = [ {{ type = indexed-memory }} ] }} ]
{extra}
""")
        app = build(load_settings(path, env={}), store=InMemoryCoordinationStore(), change_tail=MemoryChangeTail(),
                    dead_letter_store=dead_letter_store, grpc_host="127.0.0.1", grpc_port=0,
                    health_host="127.0.0.1", health_port=0)
        stop = asyncio.Event()
        task = asyncio.create_task(app.run(stop))
        await asyncio.wait_for(app.started.wait(), 10)
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.grpc_port}")
        running.append((stop, task, channel))
        return [stub(channel) for stub in STUBS]

    yield start
    for stop, task, channel in running:
        await channel.close()
        stop.set()
        await asyncio.wait_for(task, 10)


async def expect(call: Awaitable[object], code: grpc.StatusCode, words: str) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    assert caught.value.code() == code and words in caught.value.details(), caught.value.details()


def insert_message() -> bytes:
    batch = spb.ChangeBatch(source_id="pg", kind=spb.BATCH_KIND_TRANSACTION, commit_lsn=0x2A0, xid=41,
                            table=spb.TableRef(schema="public", name="users"))
    batch.columns.add(name="id", type_oid=23, type_name="int4", is_identity_key=True, primary_key_ordinal=1)
    batch.columns.add(name="email", type_oid=25, type_name="text")
    batch.changes.add(action=spb.ACTION_INSERT, ordinal=3, new_tuple=encode_tuple([b"7", b"x@example.com"]))
    return batch.SerializeToString()


async def test_entries_carry_the_change_and_why_it_failed(start_oam: Start) -> None:
    store = InMemoryDeadLetterStore()
    pipeline = PipelineId.parse(PIPELINE_ID)
    await store.write(DeadLetter(pipeline, "s5-c0", "unique index broken", insert_message(), 0, 5,
                                 1_700_000_000_123, "query:q1"))
    await store.write(DeadLetter(pipeline, "s6-m", "corrupt", b"\xff", stream_sequence=6))
    for stub in await start_oam(dead_letter_store=store):
        listed = await stub.ListDeadLetters(oam_pb2.ListDeadLettersRequest(pipeline_id=PIPELINE_ID, limit=1))
        assert listed.total_count == 2
        (entry,) = listed.entries
        assert (entry.action, entry.position, entry.error_message) == ("INSERT", "0/000002A0:3", "unique index broken")
        assert entry.timestamp.ToMilliseconds() == 1_700_000_000_123
        data = MessageToDict(entry.change_data)
        assert data["new_values"] == {"id": 7, "email": "x@example.com"} and "old_values" not in data
        assert (data["letter_id"], data["stream_sequence"], data["xid"], data["recorded_by"]) == (
            "s5-c0", 5, 41, "query:q1")
        both = await stub.ListDeadLetters(oam_pb2.ListDeadLettersRequest(pipeline_id=PIPELINE_ID))
        assert MessageToDict(both.entries[1].change_data)["raw_message_base64"] == "/w=="


async def test_error_codes_of_the_dead_letter_rpcs(start_oam: Start) -> None:
    calls = [lambda s, p: s.ListDeadLetters(oam_pb2.ListDeadLettersRequest(pipeline_id=p)),
             lambda s, p: s.ReplayDeadLetters(oam_pb2.ReplayDeadLettersRequest(pipeline_id=p)),
             lambda s, p: s.PurgeDeadLetters(oam_pb2.PurgeDeadLettersRequest(pipeline_id=p))]
    store = InMemoryDeadLetterStore()
    await store.write(DeadLetter(PipelineId.parse(PIPELINE_ID), "s1-m", "corrupt", b"\xff"))
    stubs = await start_oam(dead_letter_store=store)
    switched_off = await start_oam("dead_letters { enabled = false }")
    unreachable = await start_oam('stream { nats_url = "nats://127.0.0.1:1" }\ndead_letters { timeout = 300ms }')
    for call in calls:
        for stub in stubs:
            await expect(call(stub, ""), grpc.StatusCode.INVALID_ARGUMENT, "pipeline_id is required")
            await expect(call(stub, "users"), grpc.StatusCode.INVALID_ARGUMENT, "malformed")
            await expect(call(stub, "pg:public.nope:indexed-memory"), grpc.StatusCode.NOT_FOUND, "does not exist")
        for stub in switched_off:
            await expect(call(stub, PIPELINE_ID), grpc.StatusCode.FAILED_PRECONDITION, "dead_letters.enabled")
    await expect(calls[0](unreachable[0], PIPELINE_ID), grpc.StatusCode.UNAVAILABLE, "dead-letter store")
    await expect(calls[2](unreachable[0], PIPELINE_ID), grpc.StatusCode.UNAVAILABLE, "did not answer")
    await expect(calls[1](stubs[0], PIPELINE_ID), grpc.StatusCode.FAILED_PRECONDITION, "no running query instance")
