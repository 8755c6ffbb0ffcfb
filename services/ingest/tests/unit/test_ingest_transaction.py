"""Transaction assembly: chunking, ordinals across tables, last_chunk and end_lsn placement, determinism."""

from __future__ import annotations

import pytest

from laredo_kernel.changes import Action, BatchKind, ColumnInfo, TableId
from laredo_kernel.errors import ProtocolError
from laredo_core.stream.naming import transaction_msg_id
from laredo_kernel.tuples import UNCHANGED, encode_tuple

from laredo_ingest.adapters.memory import WalBuilder
from laredo_ingest.domain.pgoutput import decode_message
from laredo_ingest.domain.schema import ReplicaIdentity, TableSchema
from laredo_ingest.domain.transaction import TransactionAssembler
from laredo_ingest.domain.walproto import PG_EPOCH_UNIX_US, XLOG_DATA_HEADER_SIZE

USERS = TableSchema(TableId("public", "users"), 16385,
                    (ColumnInfo("id", 23, "int4", -1, True, True, 1), ColumnInfo("name", 25, "text")),
                    ReplicaIdentity.DEFAULT)
ORDERS = TableSchema(TableId("shop", "orders"), 16390,
                     (ColumnInfo("id", 20, "int8", -1, True, True, 1),), ReplicaIdentity.DEFAULT)
OTHER = TableSchema(TableId("public", "other"), 16400, (ColumnInfo("x", 23, "int4"),), ReplicaIdentity.FULL)


def assembler(max_changes: int = 1000, max_bytes: int = 1 << 20) -> TransactionAssembler:
    return TransactionAssembler("src", "laredo", {USERS.table: USERS, ORDERS.table: ORDERS},
                                max_changes=max_changes, max_bytes=max_bytes)


def run(asm: TransactionAssembler, frames: list[bytes]) -> list:
    out = []
    for frame in frames:
        out.extend(asm.feed(decode_message(frame, XLOG_DATA_HEADER_SIZE)))
    return out


def ins(relid: int, *values: object) -> bytes:
    return WalBuilder.insert(relid, [str(v).encode() for v in values])


def test_one_table_transaction_is_one_message_carrying_everything() -> None:
    wal = WalBuilder()
    frames, end_lsn = wal.transaction([WalBuilder.relation(USERS), ins(16385, 1, "a"), ins(16385, 2, "b")])
    begin = decode_message(frames[0], XLOG_DATA_HEADER_SIZE)
    [batch] = run(assembler(), frames)
    assert batch.kind is BatchKind.TRANSACTION
    assert batch.subject == "laredo.src.table.public.users"
    assert batch.commit_lsn == begin.final_lsn and batch.end_lsn == end_lsn
    assert batch.xid == begin.xid and batch.commit_time_unix_us == begin.commit_time_pg_us + PG_EPOCH_UNIX_US
    assert (batch.chunk, batch.last_chunk) == (0, True)
    assert batch.msg_id == transaction_msg_id("src", begin.final_lsn, USERS.table, 0)
    assert [(c.action, c.ordinal, c.new_tuple) for c in batch.changes] == [
        (Action.INSERT, 0, encode_tuple([b"1", b"a"])), (Action.INSERT, 1, encode_tuple([b"2", b"b"]))]
    assert batch.schema.columns == USERS.columns


def test_ordinals_count_across_tables_and_only_the_final_message_carries_end_lsn() -> None:
    wal = WalBuilder()
    frames, end_lsn = wal.transaction([
        WalBuilder.relation(USERS), WalBuilder.relation(ORDERS), ins(16390, 10), ins(16385, 1, "a"), ins(16390, 11),
        WalBuilder.update(16385, [b"1", b"z"]), WalBuilder.delete(16390, [b"10"]), WalBuilder.truncate([16385]),
    ])
    batches = run(assembler(), frames)
    assert [b.schema.table for b in batches] == [ORDERS.table, USERS.table]  # by first change
    orders, users = batches
    assert [(c.action, c.ordinal) for c in orders.changes] == [
        (Action.INSERT, 0), (Action.INSERT, 2), (Action.DELETE, 4)]
    assert [(c.action, c.ordinal) for c in users.changes] == [
        (Action.INSERT, 1), (Action.UPDATE, 3), (Action.TRUNCATE, 5)]
    assert orders.changes[2].old_is_key_only and orders.changes[2].old_tuple == encode_tuple([b"10"])
    assert [b.last_chunk for b in batches] == [True, True]
    assert [b.end_lsn for b in batches] == [0, end_lsn]


@pytest.mark.parametrize(("limits", "expected_sizes"), [
    ({"max_changes": 3}, [3, 3, 1]),
    ({"max_changes": 7}, [7]),
    ({"max_bytes": 2 * (16 + 15) + 1}, [2, 2, 2, 1]),  # each insert tuple is 15 bytes + 16 overhead
])
def test_big_transactions_are_chunked_and_chunks_leave_before_the_commit(limits: dict, expected_sizes: list) -> None:
    wal = WalBuilder()
    frames, end_lsn = wal.transaction([WalBuilder.relation(USERS)] + [ins(16385, i, "xx") for i in range(7)])
    asm = assembler(**limits)
    before_commit = run(asm, frames[:-1])
    at_commit = run(asm, frames[-1:])
    batches = before_commit + at_commit
    assert len(before_commit) == len(expected_sizes) - 1  # everything but the last chunk left early
    assert [len(b.changes) for b in batches] == expected_sizes
    assert [b.chunk for b in batches] == list(range(len(expected_sizes)))
    assert [b.last_chunk for b in batches] == [False] * (len(expected_sizes) - 1) + [True]
    assert [b.end_lsn for b in batches] == [0] * (len(expected_sizes) - 1) + [end_lsn]
    assert [c.ordinal for b in batches for c in b.changes] == list(range(7))
    assert len({b.msg_id for b in batches}) == len(batches)


def test_a_replay_of_the_same_transaction_yields_the_same_messages() -> None:
    wal = WalBuilder()
    frames, _ = wal.transaction([WalBuilder.relation(USERS), WalBuilder.relation(ORDERS)]
                                + [ins(16385 if i % 3 else 16390, i, "v") for i in range(20)])
    first, second = run(assembler(max_changes=4), frames), run(assembler(max_changes=4), frames)
    assert [(b.msg_id, b.changes) for b in first] == [(b.msg_id, b.changes) for b in second]


def test_changes_of_unconfigured_tables_are_skipped_and_do_not_take_ordinals() -> None:
    wal = WalBuilder()
    frames, end_lsn = wal.transaction([WalBuilder.relation(OTHER), WalBuilder.relation(USERS),
                                       ins(16400, 5), ins(16385, 1, "a")])
    [batch] = run(assembler(), frames)
    assert batch.schema.table == USERS.table and [c.ordinal for c in batch.changes] == [0]
    assert batch.end_lsn == end_lsn


def test_a_transaction_with_nothing_configured_emits_nothing() -> None:
    wal = WalBuilder()
    frames, _ = wal.transaction([WalBuilder.relation(OTHER), ins(16400, 5)])
    asm = assembler()
    assert run(asm, frames) == []
    assert not asm.in_transaction


def test_a_column_change_mid_transaction_sends_the_old_chunk_then_a_schema_change_event() -> None:
    widened = TableSchema(USERS.table, USERS.relation_id, USERS.columns + (ColumnInfo("age", 23),),
                          USERS.replica_identity)
    wal = WalBuilder()
    frames, end_lsn = wal.transaction([WalBuilder.relation(USERS), ins(16385, 1, "a"),
                                       WalBuilder.relation(widened), ins(16385, 2, "b", 30)])
    first, event, second = run(assembler(), frames)
    assert [c.name for c in first.schema.columns] == ["id", "name"] and not first.last_chunk
    assert event.kind is BatchKind.SCHEMA_CHANGE and event.subject == first.subject and not event.changes
    assert [c.name for c in event.old_columns] == ["id", "name"]
    assert [c.name for c in event.schema.columns] == ["id", "name", "age"] and event.reason == "added age"
    assert event.commit_lsn == first.commit_lsn
    assert [c.name for c in second.schema.columns] == ["id", "name", "age"] and second.last_chunk
    assert second.schema.columns[0].type_name == "int4"  # catalog facts survive the merge
    assert (second.chunk, second.end_lsn) == (1, end_lsn)
    assert [b.msg_id for b in run(assembler(), frames)] == [first.msg_id, event.msg_id, second.msg_id]


def test_the_first_relation_matching_the_catalog_is_no_schema_change() -> None:
    wal = WalBuilder()
    frames, _ = wal.transaction([WalBuilder.relation(USERS), ins(16385, 1, "a")])
    assert [b.kind for b in run(assembler(), frames)] == [BatchKind.TRANSACTION]


def test_a_dropped_column_seen_first_in_a_session_is_a_schema_change_against_the_catalog() -> None:
    narrowed = TableSchema(USERS.table, USERS.relation_id, USERS.columns[:1], USERS.replica_identity)
    wal = WalBuilder()
    frames, _ = wal.transaction([WalBuilder.relation(narrowed), ins(16385, 1)])
    event, batch = run(assembler(), frames)
    assert event.kind is BatchKind.SCHEMA_CHANGE and event.reason == "dropped name"
    assert batch.chunk == 0 and len(batch.schema.columns) == 1


def test_a_table_without_a_usable_key_goes_to_its_dead_letter_subject() -> None:
    keyless = TableSchema(TableId("public", "logs"), 16500, (ColumnInfo("line", 25, "text"),),
                          ReplicaIdentity.DEFAULT)
    asm = TransactionAssembler("src", "laredo", {keyless.table: keyless, USERS.table: USERS}, max_changes=10,
                               max_bytes=1 << 20)
    wal = WalBuilder()
    frames, _ = wal.transaction([WalBuilder.relation(keyless), WalBuilder.relation(USERS),
                                 ins(16500, "hello"), ins(16385, 1, "a")])
    logs, users = run(asm, frames)
    assert logs.subject == "laredo.src.deadletter.public.logs" and logs.changes[0].action is Action.INSERT
    assert users.subject == "laredo.src.table.public.users"


def test_full_identity_updates_get_unchanged_toast_values_from_the_old_row() -> None:
    full = TableSchema(TableId("public", "docs"), 16600,
                       (ColumnInfo("id", 23, "int4", -1, True), ColumnInfo("body", 25, "text", -1, True)),
                       ReplicaIdentity.FULL)
    asm = TransactionAssembler("src", "laredo", {full.table: full}, max_changes=10, max_bytes=1 << 20)
    wal = WalBuilder()
    frames, _ = wal.transaction([
        WalBuilder.relation(full),
        WalBuilder.update(16600, [b"2", UNCHANGED], old=[b"1", b"big body"], key_only=False),
        WalBuilder.update(16600, [b"3", UNCHANGED], old=None),
    ])
    [batch] = run(asm, frames)
    assert batch.changes[0].new_tuple == encode_tuple([b"2", b"big body"])
    assert batch.changes[1].new_tuple == encode_tuple([b"3", UNCHANGED])  # nothing to fill it from


def test_skip_before_drops_one_tables_changes_of_earlier_commits_but_keeps_ordinals() -> None:
    wal = WalBuilder()
    early, _ = wal.transaction([WalBuilder.relation(USERS), WalBuilder.relation(ORDERS),
                                ins(16385, 1, "a"), ins(16390, 10)])
    late, _ = wal.transaction([ins(16385, 2, "b")])
    late_commit = decode_message(late[0], XLOG_DATA_HEADER_SIZE).final_lsn
    asm = assembler()
    asm.skip_before(USERS.table, late_commit)
    [orders] = run(asm, early)
    assert orders.schema.table == ORDERS.table and [c.ordinal for c in orders.changes] == [1]
    [users] = run(asm, late)
    assert users.commit_lsn == late_commit


@pytest.mark.parametrize("messages", [
    [b"C\x00" + bytes(24)],  # commit without begin
    [WalBuilder.relation(USERS), ins(16385, 1, "a")],  # change without begin
])
def test_out_of_transaction_messages_are_protocol_errors(messages: list[bytes]) -> None:
    asm = assembler()
    with pytest.raises(ProtocolError):
        for m in messages:
            asm.feed(decode_message(m))


def test_change_before_its_relation_message_is_a_protocol_error() -> None:
    wal = WalBuilder()
    frames, _ = wal.transaction([ins(16385, 1, "a")])
    with pytest.raises(ProtocolError, match="before its Relation"):
        run(assembler(), frames)


def test_nested_begin_is_a_protocol_error() -> None:
    wal = WalBuilder()
    frames, _ = wal.transaction([])
    with pytest.raises(ProtocolError, match="still open"):
        run(assembler(), [frames[0], frames[0]])
