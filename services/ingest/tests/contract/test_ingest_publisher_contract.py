"""ChangePublisher and StateStore contracts, run against the in-memory fakes and the NATS adapters alike."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import nats
import pytest

from laredo_kernel.changes import Action, BatchKind, ColumnInfo, TableId
from laredo_kernel.position import format_lsn
from laredo_core.stream.codec import decode_batch
from laredo_core.stream.naming import (
    HEADER_COMMIT_LSN,
    HEADER_END_LSN,
    HEADER_KIND,
    HEADER_MSG_ID,
    source_subject_filter,
    stream_name,
    table_subject,
)
from laredo_kernel.tuples import encode_tuple
from laredo_testing.eventually import eventually

from laredo_ingest.adapters.memory import InMemoryChangePublisher, InMemoryStateStore
from laredo_ingest.adapters.nats_change_publisher import NatsChangePublisher
from laredo_ingest.adapters.nats_connection import NatsConnection
from laredo_ingest.adapters.nats_state_store import NatsKvStateStore, state_key
from laredo_ingest.domain.baseline_reason import BaselineCause, TableBaseline
from laredo_ingest.domain.batches import ChangeRecord, OutboundBatch
from laredo_ingest.domain.errors import IngestError
from laredo_ingest.domain.schema import ReplicaIdentity, TableSchema
from laredo_ingest.domain.start_plan import IngestState
from laredo_ingest.ports import StreamSpec

SCHEMA = TableSchema(TableId("public", "users"), 16385,
                     (ColumnInfo("id", 23, "int4", -1, True, True, 1), ColumnInfo("name", 25, "text")),
                     ReplicaIdentity.DEFAULT)
Stored = tuple[str, BatchKind, int, int, int, str]  # msg id, kind, commit lsn, end lsn, changes, traceparent


@dataclasses.dataclass
class PublisherHarness:
    publisher: Any
    spec: StreamSpec
    prefix: str
    stored: Callable[[], Awaitable[list[Stored]]]
    #: The same batch made to be rejected by the stream (as a 503 during a leader change would).
    rejected: Callable[[OutboundBatch], OutboundBatch]
    #: Another client writes bytes that are no change batch to a subject of the source's stream.
    foreign: Callable[[str], Awaitable[None]]


@pytest.fixture(params=["memory", pytest.param("nats", marks=pytest.mark.integration)])
async def harness(request: pytest.FixtureRequest, unique_name: str) -> AsyncIterator[PublisherHarness]:
    spec = StreamSpec(stream_name(unique_name, "src"), (source_subject_filter(unique_name, "src"),), 120.0, 0.0,
                      -1, 1)
    if request.param == "memory":
        fake = InMemoryChangePublisher(max_pending=4)

        async def stored_in_memory() -> list[Stored]:
            return [(m.batch.msg_id, m.batch.kind, m.batch.commit_lsn, m.batch.end_lsn, len(m.batch.changes),
                     m.headers.get("traceparent", "")) for m in fake.stored]

        def rejected_in_memory(b: OutboundBatch) -> OutboundBatch:
            fake.fail_next = 1  # the next message published: this one
            return b

        async def foreign_in_memory(_subject: str) -> None:
            fake.foreign_next = True  # it takes the place of the next message published

        yield PublisherHarness(fake, spec, unique_name, stored_in_memory, rejected_in_memory, foreign_in_memory)
        return
    url = request.getfixturevalue("nats_url")
    connection = NatsConnection([url])
    publisher = NatsChangePublisher(connection, max_pending=4, ack_timeout=5.0)
    reader = await nats.connect(url)
    js = reader.jetstream()

    async def stored_in_nats() -> list[Stored]:
        """The messages ingest stored (another client's, without a message id, are left out)."""
        info = await js.stream_info(spec.name)
        result = []
        for seq in range(info.state.first_seq, info.state.last_seq + 1):
            raw = await js.get_msg(spec.name, seq)
            headers = raw.headers or {}
            if HEADER_MSG_ID not in headers:
                continue  # another client's message
            batch = decode_batch(raw.data or b"")
            result.append((headers[HEADER_MSG_ID], batch.kind, batch.commit_lsn, batch.end_lsn, len(batch.changes),
                           headers.get("traceparent", "")))
        return result

    def rejected_by_nats(b: OutboundBatch) -> OutboundBatch:
        return dataclasses.replace(b, subject=f"{unique_name}-nowhere.x")  # no stream: 503 no responders

    async def foreign_in_nats(subject: str) -> None:
        await js.publish(subject, b"\xff\x00 foreign bytes")

    yield PublisherHarness(publisher, spec, unique_name, stored_in_nats, rejected_by_nats, foreign_in_nats)
    await publisher.close()
    await connection.close()
    await reader.close()


def batch(prefix: str, commit_lsn: int, chunk: int = 0, *, end_lsn: int = 0, rows: int = 2) -> OutboundBatch:
    changes = [ChangeRecord(Action.INSERT, chunk * 100 + i, b"", encode_tuple([str(i).encode(), b"x"]))
               for i in range(rows)]
    return OutboundBatch(subject=table_subject(prefix, "src", SCHEMA.table),
                         msg_id=f"src:tx:{format_lsn(commit_lsn)}:public.users:{chunk}", source_id="src",
                         kind=BatchKind.TRANSACTION, schema=SCHEMA, commit_lsn=commit_lsn, end_lsn=end_lsn,
                         xid=7, chunk=chunk, last_chunk=end_lsn > 0, changes=changes)


class Acks:
    def __init__(self) -> None:
        self.results: dict[str, list[IngestError | None]] = {}

    def callback(self, msg_id: str) -> Callable[[IngestError | None], None]:
        return lambda error: self.results.setdefault(msg_id, []).append(error)


TRACE = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}


async def test_every_message_is_acknowledged_once_and_stored_in_publish_order(harness: PublisherHarness) -> None:
    await harness.publisher.ensure_stream(harness.spec)
    acks = Acks()
    batches = [batch(harness.prefix, 0x100, 0), batch(harness.prefix, 0x100, 1, end_lsn=0x180),
               batch(harness.prefix, 0x200, end_lsn=0x280, rows=0)]
    for b in batches:
        await harness.publisher.publish(b, acks.callback(b.msg_id), TRACE)
    assert await harness.publisher.wait_for_acks(10.0)
    assert acks.results == {b.msg_id: [None] for b in batches}
    assert await harness.stored() == [
        (b.msg_id, BatchKind.TRANSACTION, b.commit_lsn, b.end_lsn, len(b.changes), TRACE["traceparent"])
        for b in batches]


async def test_a_repeated_msg_id_is_acknowledged_but_stored_once(harness: PublisherHarness) -> None:
    await harness.publisher.ensure_stream(harness.spec)
    acks = Acks()
    b = batch(harness.prefix, 0x300, end_lsn=0x380)
    await harness.publisher.publish(b, acks.callback("first"))
    await harness.publisher.publish(dataclasses.replace(b, xid=99), acks.callback("again"))
    assert await harness.publisher.wait_for_acks(10.0)
    assert acks.results == {"first": [None], "again": [None]}
    assert [s[0] for s in await harness.stored()] == [b.msg_id]


async def test_nothing_after_a_rejected_message_is_stored_until_the_next_session(harness: PublisherHarness) -> None:
    """A hole in the middle of a pipelined run: the messages after it are refused, not stored out of order;
    a new session (ensure_stream) re-publishes from the hole, duplicates acknowledged, and continues in order."""
    await harness.publisher.ensure_stream(harness.spec)
    acks = Acks()
    batches = [batch(harness.prefix, 0x2000 + i * 0x100, end_lsn=0x2000 + i * 0x100 + 0x80) for i in range(6)]
    await harness.publisher.publish(batches[0], acks.callback("0"))
    await harness.publisher.publish(harness.rejected(batches[1]), acks.callback("1"))
    for i, b in enumerate(batches[2:], start=2):
        await harness.publisher.publish(b, acks.callback(str(i)))
    await eventually(lambda: len(acks.results) == 6, what="every message answered")
    assert acks.results["0"] == [None]
    assert all(isinstance(acks.results[str(i)][0], IngestError) for i in range(1, 6)), acks.results
    assert [s[0] for s in await harness.stored()] == [batches[0].msg_id]

    await harness.publisher.ensure_stream(harness.spec)  # the next session re-sends from the first unacknowledged
    again = Acks()
    for b in batches:
        await harness.publisher.publish(b, again.callback(b.msg_id))
    assert await harness.publisher.wait_for_acks(10.0)
    assert again.results == {b.msg_id: [None] for b in batches}
    assert [s[0] for s in await harness.stored()] == [b.msg_id for b in batches]


async def test_more_messages_than_the_window_all_get_through(harness: PublisherHarness) -> None:
    await harness.publisher.ensure_stream(harness.spec)
    acks = Acks()
    batches = [batch(harness.prefix, 0x1000 + i * 0x100, end_lsn=0x1000 + i * 0x100 + 0x80) for i in range(25)]
    for b in batches:
        await harness.publisher.publish(b, acks.callback(b.msg_id))
    await eventually(lambda: len(acks.results) == 25, what="25 acks")
    assert all(r == [None] for r in acks.results.values())
    assert [s[0] for s in await harness.stored()] == [b.msg_id for b in batches]


async def test_ensure_stream_is_idempotent_and_waiting_with_nothing_pending_returns_at_once(
        harness: PublisherHarness) -> None:
    await harness.publisher.ensure_stream(harness.spec)
    await harness.publisher.ensure_stream(dataclasses.replace(harness.spec, max_age=3600.0))
    assert await harness.publisher.wait_for_acks(0.5)


@pytest.mark.integration
async def test_nats_messages_carry_the_laredo_headers(nats_url: str, unique_name: str) -> None:
    connection = NatsConnection([nats_url])
    publisher = NatsChangePublisher(connection, max_pending=4)
    spec = StreamSpec(stream_name(unique_name, "src"), (source_subject_filter(unique_name, "src"),), 120.0, 0.0, -1, 1)
    await publisher.ensure_stream(spec)
    acks = Acks()
    await publisher.publish(batch(unique_name, 0x16B3748, end_lsn=0x16B3778), acks.callback("m"), TRACE)
    assert await publisher.wait_for_acks(10.0)
    js = (await connection.client()).jetstream()
    raw = await js.get_msg(spec.name, 1)
    assert raw.headers is not None
    assert raw.headers[HEADER_KIND] == "TRANSACTION"
    assert raw.headers[HEADER_COMMIT_LSN] == "0/016B3748" and raw.headers[HEADER_END_LSN] == "0/016B3778"
    assert raw.headers["traceparent"] == TRACE["traceparent"]
    assert raw.subject == f"{unique_name}.src.table.public.users"
    info = await js.stream_info(spec.name)
    assert info.config.duplicate_window == 120.0 and str(getattr(info.config.storage, "value", info.config.storage)) == "file"
    await publisher.close()
    await connection.close()


@pytest.fixture(params=["memory", pytest.param("nats", marks=pytest.mark.integration)])
async def state_store(request: pytest.FixtureRequest, unique_name: str) -> AsyncIterator[Any]:
    if request.param == "memory":
        yield InMemoryStateStore()
        return
    connection = NatsConnection([request.getfixturevalue("nats_url")])
    yield NatsKvStateStore(connection, bucket=f"{unique_name}_state")
    await connection.close()


async def test_state_store_round_trips_per_source(state_store: Any) -> None:
    assert await state_store.get("main") is None
    state = IngestState("slot_a", "7300000000000000001", 0x16B3748, False, ("public.a", "s.b"))
    await state_store.put("main", state)
    await state_store.put("other source/2", dataclasses.replace(state, slot_name="slot_b"))
    assert await state_store.get("main") == state
    dropped = TableBaseline("public.a", BaselineCause.SLOT_DROPPED, "replication slot slot_a was dropped",
                            "16B3748-1", 1_700_000_000_000)
    done = dataclasses.replace(state, baseline_complete=True, baseline_id="16B3748-1", baselines=(dropped,))
    await state_store.put("main", done)
    assert await state_store.get("main") == done
    assert (await state_store.get("other source/2")).slot_name == "slot_b"


def test_state_keys_are_valid_and_distinct() -> None:
    keys = [state_key(s) for s in ["main", "a.b", "a=2Eb", "a b", "ü", ""]]
    assert len(set(keys)) == len(keys)
    assert all(k and all(c.isalnum() or c in "_-=" for c in k) for k in keys)


@pytest.mark.integration
async def test_nats_unacknowledged_messages_fail_after_the_ack_deadline(nats_url: str, unique_name: str) -> None:
    connection = NatsConnection([nats_url])
    publisher = NatsChangePublisher(connection, max_pending=4, ack_timeout=0.3)
    spec = StreamSpec(stream_name(unique_name, "src"), (source_subject_filter(unique_name, "src"),), 120.0, 0.0, -1, 1)
    await publisher.ensure_stream(spec)
    client = await connection.client()
    silent = await client.subscribe(f"{unique_name}_silent.>")  # a responder that never acknowledges
    acks = Acks()
    lost = dataclasses.replace(batch(unique_name, 0x500), subject=f"{unique_name}_silent.x")
    await publisher.publish(lost, acks.callback("silent"))
    nobody = dataclasses.replace(batch(unique_name, 0x600), subject=f"{unique_name}_nobody.x")
    await publisher.publish(nobody, acks.callback("nobody"))
    await eventually(lambda: len(acks.results) == 2, what="both messages failed")
    assert "no acknowledgement from JetStream" in str(acks.results["silent"][0])
    assert "no responders" in str(acks.results["nobody"][0]) or "no acknowledgement" in str(acks.results["nobody"][0])
    assert all(isinstance(r[0], IngestError) and r[0].retryable for r in acks.results.values())
    await silent.unsubscribe()
    await publisher.close()
    await connection.close()


@pytest.mark.integration
async def test_nats_a_jetstream_error_reply_fails_the_message(nats_url: str, unique_name: str) -> None:
    connection = NatsConnection([nats_url])
    publisher = NatsChangePublisher(connection, max_pending=4, ack_timeout=5.0)
    spec = StreamSpec(stream_name(unique_name, "src"), (source_subject_filter(unique_name, "src"),), 120.0, 0.0, -1, 1)
    await publisher.ensure_stream(spec)
    acks = Acks()
    await publisher.publish(batch(unique_name, 0x500), acks.callback("good"))
    await publisher.publish(batch(unique_name, 0x600), acks.callback("refused"),
                            {"Nats-Expected-Stream": "SOME_OTHER_STREAM"})  # JetStream answers with an error
    await eventually(lambda: len(acks.results) == 2, what="both answered")
    assert acks.results["good"] == [None]
    [error] = acks.results["refused"]
    assert isinstance(error, IngestError) and "JetStream rejected" in str(error) and "expected stream" in str(error)
    await publisher.close()
    await connection.close()


async def test_ensure_stream_names_the_last_message_for_the_next_session(harness: PublisherHarness) -> None:
    assert await harness.publisher.ensure_stream(harness.spec) is None  # an empty stream
    acks = Acks()
    harness.publisher.use_epoch(2)
    for b in (batch(harness.prefix, 0x700, end_lsn=0x780), batch(harness.prefix, 0x800, end_lsn=0x880)):
        await harness.publisher.publish(b, acks.callback(b.msg_id))
    assert await harness.publisher.wait_for_acks(10.0)
    tail = await harness.publisher.ensure_stream(harness.spec)
    assert tail is not None and (tail.sequence, tail.epoch, tail.commit_lsn) == (2, 2, 0x800)


@pytest.mark.integration
async def test_nats_foreign_bytes_at_the_end_of_the_stream_do_not_stop_a_session(nats_url: str,
                                                                                 unique_name: str) -> None:
    connection = NatsConnection([nats_url])
    publisher = NatsChangePublisher(connection, max_pending=4, ack_timeout=5.0)
    spec = StreamSpec(stream_name(unique_name, "src"), (source_subject_filter(unique_name, "src"),), 120.0, 0.0, -1, 1)
    await publisher.ensure_stream(spec)
    acks = Acks()
    await publisher.publish(batch(unique_name, 0x900, end_lsn=0x980), acks.callback("ours"))
    assert await publisher.wait_for_acks(10.0) and acks.results == {"ours": [None]}
    other = await nats.connect(nats_url)
    await other.jetstream().publish(table_subject(unique_name, "src", SCHEMA.table), b"\xff not a change batch")
    await other.close()
    tail = await publisher.ensure_stream(spec)  # the next session: after the foreign message, ours found
    assert tail is not None and (tail.sequence, tail.commit_lsn) == (2, 0x900)
    await publisher.publish(batch(unique_name, 0xA00, end_lsn=0xA80), acks.callback("after"))
    assert await publisher.wait_for_acks(10.0) and acks.results["after"] == [None]
    await publisher.close()
    await connection.close()


async def test_a_message_stored_ahead_of_a_refused_one_is_reported_to_the_next_session(
        harness: PublisherHarness) -> None:
    """Another client's message takes the sequence predicted for ingest's next message: that one is refused,
    but its successor, already sent, names that sequence and is stored ahead of it (JetStream cannot tell).
    The next session must say so instead of re-sending the refused change behind it."""
    await harness.publisher.ensure_stream(harness.spec)
    acks = Acks()
    batches = [batch(harness.prefix, 0x3000 + i * 0x100, end_lsn=0x3000 + i * 0x100 + 0x80) for i in range(3)]
    await harness.publisher.publish(batches[0], acks.callback("0"))  # careful start: stored, pipelining begins
    await eventually(lambda: "0" in acks.results, what="the first message stored")
    await harness.foreign(batches[0].subject)
    for i, b in enumerate(batches[1:], start=1):
        await harness.publisher.publish(b, acks.callback(str(i)))
    await eventually(lambda: len(acks.results) == 3, what="every message answered")
    assert isinstance(acks.results["1"][0], IngestError)  # refused: the foreign message took its place
    assert acks.results["2"] == [None]
    assert [s[0] for s in await harness.stored()] == [batches[0].msg_id, batches[2].msg_id]

    tail = await harness.publisher.ensure_stream(harness.spec)
    assert tail is not None and tail.commit_lsn == batches[2].commit_lsn
    assert batches[1].msg_id in tail.disorder and batches[2].msg_id in tail.disorder, tail.disorder
    assert "new baseline" in tail.disorder
    again = await harness.publisher.ensure_stream(harness.spec)  # reported once: ingest baselines after it
    assert again is not None and again.disorder == ""


async def test_a_failed_message_whose_successors_were_refused_is_no_disorder(harness: PublisherHarness) -> None:
    """The usual failure: a message rejected, those sent after it refused; the next session resumes normally."""
    await harness.publisher.ensure_stream(harness.spec)
    acks = Acks()
    batches = [batch(harness.prefix, 0x5000 + i * 0x100, end_lsn=0x5000 + i * 0x100 + 0x80) for i in range(4)]
    await harness.publisher.publish(batches[0], acks.callback("0"))
    await eventually(lambda: "0" in acks.results, what="the first message stored")
    await harness.publisher.publish(harness.rejected(batches[1]), acks.callback("1"))
    for i in (2, 3):
        await harness.publisher.publish(batches[i], acks.callback(str(i)))
    await eventually(lambda: len(acks.results) == 4, what="every message answered")
    assert all(isinstance(acks.results[str(i)][0], IngestError) for i in (1, 2, 3)), acks.results
    tail = await harness.publisher.ensure_stream(harness.spec)
    assert tail is not None and tail.disorder == "" and tail.commit_lsn == batches[0].commit_lsn


async def test_nats_a_change_stored_ahead_is_found_after_a_restart_too(nats_url: str, unique_name: str) -> None:
    """The process that saw the refusal is gone: the next one re-sends the lost change, which is stored anew,
    then its successor, which JetStream acknowledges as a duplicate of a message stored before: the same
    disorder, found one session late, and reported to the session after it."""
    spec = StreamSpec(stream_name(unique_name, "src"), (source_subject_filter(unique_name, "src"),), 120.0, 0.0, -1, 1)
    batches = [batch(unique_name, 0x7000 + i * 0x100, end_lsn=0x7000 + i * 0x100 + 0x80) for i in range(3)]
    gone = NatsConnection([nats_url])
    first = NatsChangePublisher(gone, max_pending=4, ack_timeout=5.0)
    await first.ensure_stream(spec)
    acks = Acks()
    await first.publish(batches[0], acks.callback("0"))
    other = await nats.connect(nats_url)
    await other.jetstream().publish(batches[0].subject, b"\xff\x00 foreign bytes")
    await other.close()
    for i in (1, 2):
        await first.publish(batches[i], acks.callback(str(i)))
    await eventually(lambda: len(acks.results) == 3, what="every message answered")
    assert isinstance(acks.results["1"][0], IngestError) and acks.results["2"] == [None]
    await first.close()  # gone without starting another session
    await gone.close()

    connection = NatsConnection([nats_url])
    restarted = NatsChangePublisher(connection, max_pending=4, ack_timeout=5.0)
    tail = await restarted.ensure_stream(spec)
    assert tail is not None and tail.disorder == ""  # nothing tells this one yet
    again = Acks()
    for i in (1, 2):  # the slot re-sends from the lost change on
        await restarted.publish(batches[i], again.callback(str(i)))
    await eventually(lambda: len(again.results) == 2, what="both answered")
    assert again.results["1"] == [None] and isinstance(again.results["2"][0], IngestError)
    tail = await restarted.ensure_stream(spec)
    assert tail is not None and batches[2].msg_id in tail.disorder and "new baseline" in tail.disorder
    await restarted.close()
    await connection.close()
