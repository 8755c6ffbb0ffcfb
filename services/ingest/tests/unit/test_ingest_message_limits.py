"""Every message fits max_payload and max_batch_bytes; a change that cannot fit at all becomes a named dead letter."""

from __future__ import annotations

import pytest

from laredo_kernel.changes import Action, BatchKind, ColumnInfo, TableId
from laredo_core.deadletters.records import decode_record
from laredo_core.stream.naming import deadletter_subject, table_subject
from laredo_kernel.tuples import UNCHANGED, decode_tuple_exact, encode_tuple

from laredo_ingest.adapters.batch_encoding import encode_batch
from laredo_ingest.adapters.keyless_dead_letters import KeylessDeadLetters
from laredo_ingest.adapters.memory import WalBuilder
from laredo_ingest.domain.baseline import BaselineBatches
from laredo_ingest.domain.batches import OutboundBatch
from laredo_ingest.domain.message_limits import UNLIMITED, MessageLimits
from laredo_ingest.domain.pgoutput import decode_message
from laredo_ingest.domain.schema import ReplicaIdentity, TableSchema
from laredo_ingest.domain.transaction import TransactionAssembler
from laredo_ingest.domain.walproto import XLOG_DATA_HEADER_SIZE

DOCS = TableSchema(TableId("public", "docs"), 16385,
                   (ColumnInfo("id", 23, "int4", -1, True, True, 1), ColumnInfo("body", 25, "text")),
                   ReplicaIdentity.DEFAULT)
MAX_PAYLOAD = 64 * 1024
#: What the NATS adapter adds around the payload, generously (message id, kind, LSNs, table, trace context).
HEADERS = 400


def body(size: int, seed: int = 0) -> bytes:
    return (f"{seed:08x}" * (size // 8 + 1)).encode()[:size]


def row(key: int, size: int) -> bytes:
    return encode_tuple([str(key).encode(), body(size, key)])


def assert_fits(batches: list[OutboundBatch], max_batch_bytes: int) -> None:
    for batch in batches:
        assert len(encode_batch(batch)) + HEADERS <= MAX_PAYLOAD, f"{batch.msg_id} exceeds max_payload"
        if len(batch.changes) > 1:
            assert sum(c.size for c in batch.changes) <= max_batch_bytes


def test_without_a_known_max_payload_only_max_batch_bytes_applies() -> None:
    limits = MessageLimits(512 * 1024).for_table(DOCS)
    assert (limits.chunk_bytes, limits.room) == (512 * 1024, UNLIMITED)
    assert not limits.oversized(1 << 40)


@pytest.mark.parametrize("max_batch_bytes", [16 * 1024, 1 << 20])
def test_baseline_chunks_of_wide_rows_are_cut_by_bytes_as_well_as_rows(max_batch_bytes: int) -> None:
    batches = BaselineBatches(source_id="src", subject_prefix="laredo", baseline_id="b1", snapshot_lsn=0x100,
                              schema=DOCS, chunk_rows=2000, limits=MessageLimits(max_batch_bytes, MAX_PAYLOAD))
    out = batches.add_rows([row(i, 10_000) for i in range(40)])
    assert len(out) > 1 and all(b.kind is BatchKind.BASELINE_ROWS and not b.dead_letter for b in out)
    assert_fits(out, max_batch_bytes)
    assert [c.ordinal - out[0].changes[0].ordinal for b in out for c in b.changes] == list(range(40))
    assert [b.chunk for b in out] == list(range(len(out)))


def test_a_baseline_row_too_large_for_max_payload_becomes_a_dead_letter_and_the_rest_goes_on() -> None:
    batches = BaselineBatches(source_id="src", subject_prefix="laredo", baseline_id="b1", snapshot_lsn=0x100,
                              schema=DOCS, chunk_rows=2000, limits=MessageLimits(512 * 1024, MAX_PAYLOAD))
    batches.begin()
    out = batches.add_rows([row(1, 100), row(2, 200_000), row(3, 100)])
    assert_fits(out, 512 * 1024)
    letter = next(b for b in out if b.dead_letter)
    assert letter.subject == deadletter_subject("laredo", "src", DOCS.table)
    assert "public.docs" in letter.dead_letter_reason and f"{MAX_PAYLOAD} bytes" in letter.dead_letter_reason
    assert "max_payload" in letter.dead_letter_reason and "ReloadTable" in letter.dead_letter_reason
    assert decode_tuple_exact(letter.changes[0].new_tuple) == [b"2", UNCHANGED], "its key, not the whole row"
    rows = [c for b in out if not b.dead_letter for c in b.changes]
    assert [decode_tuple_exact(c.new_tuple)[0] for c in rows] == [b"1", b"3"]
    assert batches.oversized_rows == 1 and batches.end().baseline_row_count == 2


def assemble(frames: list[bytes], max_batch_bytes: int, letters: list[OutboundBatch]) -> list[OutboundBatch]:
    asm = TransactionAssembler("src", "laredo", {DOCS.table: DOCS}, max_changes=1000, max_bytes=max_batch_bytes,
                               max_payload=MAX_PAYLOAD, on_oversized=letters.append)
    return [b for frame in frames for b in asm.feed(decode_message(frame, XLOG_DATA_HEADER_SIZE))]


def test_transaction_chunks_respect_max_payload_even_when_max_batch_bytes_is_larger() -> None:
    changes = [WalBuilder.insert(DOCS.relation_id, [str(i).encode(), body(10_000, i)]) for i in range(30)]
    frames, end_lsn = WalBuilder().transaction([WalBuilder.relation(DOCS), *changes])
    out = assemble(frames, 8 << 20, [])
    assert len(out) > 1
    assert_fits(out, 8 << 20)
    assert out[-1].end_lsn == end_lsn and [b.last_chunk for b in out] == [False] * (len(out) - 1) + [True]


def test_a_change_too_large_for_max_payload_is_dead_lettered_and_its_transaction_still_completes() -> None:
    frames, end_lsn = WalBuilder().transaction([
        WalBuilder.relation(DOCS), WalBuilder.insert(DOCS.relation_id, [b"1", b"small"]),
        WalBuilder.update(DOCS.relation_id, [b"2", body(300_000)]),
        WalBuilder.insert(DOCS.relation_id, [b"3", b"small too"])])
    letters: list[OutboundBatch] = []
    out = assemble(frames, 512 * 1024, letters)
    assert_fits(out, 512 * 1024)
    [letter] = letters
    assert letter in out and letter.subject == deadletter_subject("laredo", "src", DOCS.table)
    assert letter.changes[0].action is Action.UPDATE and letter.changes[0].ordinal == 1
    assert "the UPDATE of public.docs" in letter.dead_letter_reason
    [published] = [b for b in out if not b.dead_letter]
    assert published.subject == table_subject("laredo", "src", DOCS.table)
    assert [c.ordinal for c in published.changes] == [0, 2] and published.end_lsn == end_lsn


def test_the_dead_letter_of_an_oversized_row_says_why_and_fits_a_message() -> None:
    batches = BaselineBatches(source_id="src", subject_prefix="laredo", baseline_id="b1", snapshot_lsn=0x100,
                              schema=DOCS, chunk_rows=2000, limits=MessageLimits(512 * 1024, MAX_PAYLOAD))
    [letter] = batches.add_rows([row(7, 200_000)])
    [(subject, _, payload)] = KeylessDeadLetters("laredo", "src", {DOCS.table: ("replication-fanout",)}).messages(
        letter)
    record = decode_record(payload)
    assert subject.startswith("laredo") and len(payload) + HEADERS <= MAX_PAYLOAD
    assert record.error == letter.dead_letter_reason and record.new_values == {
        "id": 7, "body": "<unchanged TOASTed value>"}
