"""Tables without a usable key: the NATS publisher stores their changes as dead letters of every pipeline."""

from __future__ import annotations

import pytest

from laredo_kernel.changes import Action, BatchKind, ColumnInfo, TableId
from laredo_core.deadletters.model import PipelineId
from laredo_core.deadletters.nats_store import DeadLetterStreamSpec, NatsDeadLetterStore, dead_letter_stream_config
from laredo_core.stream.naming import deadletter_subject, source_subject_filter, stream_name
from laredo_kernel.tuples import encode_tuple
from laredo_testing.eventually import eventually

from laredo_ingest.adapters.keyless_dead_letters import KeylessDeadLetters
from laredo_ingest.adapters.nats_change_publisher import NatsChangePublisher
from laredo_ingest.adapters.nats_connection import NatsConnection
from laredo_ingest.domain.batches import ChangeRecord, OutboundBatch
from laredo_ingest.domain.errors import IngestError
from laredo_ingest.domain.schema import ReplicaIdentity, TableSchema
from laredo_ingest.ports import StreamSpec

pytestmark = pytest.mark.integration

LOGS = TableSchema(TableId("public", "logs"), 16400, (ColumnInfo("line", 25, "text"),), ReplicaIdentity.DEFAULT)
TARGETS = ("replication-fanout", "indexed-memory")


def keyless_batch(prefix: str, kind: BatchKind, lines: list[str], *, end_lsn: int = 0) -> OutboundBatch:
    changes = [ChangeRecord(Action.INSERT, i, b"", encode_tuple([line.encode()])) for i, line in enumerate(lines)]
    return OutboundBatch(subject=deadletter_subject(prefix, "src", LOGS.table), msg_id=f"src:tx:{kind.value}",
                         source_id="src", kind=kind, schema=LOGS, commit_lsn=0x200, end_lsn=end_lsn, xid=9,
                         changes=changes)


async def test_each_change_becomes_one_letter_per_pipeline_acknowledged_once(nats_url: str, unique_name: str) -> None:
    spec = DeadLetterStreamSpec()
    connection = NatsConnection([nats_url])
    publisher = NatsChangePublisher(connection, max_pending=2, ack_timeout=5.0,
                                    dead_letters=KeylessDeadLetters(unique_name, "src", {LOGS.table: TARGETS}),
                                    dead_letter_stream=dead_letter_stream_config(unique_name, spec))
    store = NatsDeadLetterStore([nats_url], unique_name)
    acks: list[IngestError | None] = []
    try:
        await publisher.ensure_stream(StreamSpec(stream_name(unique_name, "src"),
                                                 (source_subject_filter(unique_name, "src"),), 120.0, 0.0, -1, 1))
        await publisher.publish(keyless_batch(unique_name, BatchKind.BASELINE_BEGIN, []), acks.append)
        assert acks == [None], "a message without changes keeps nothing and is done at once"
        await publisher.publish(keyless_batch(unique_name, BatchKind.TRANSACTION, ["a", "b", "c"], end_lsn=0x210),
                                acks.append)
        await eventually(lambda: len(acks) == 2, what="one acknowledgement for the whole batch")
        assert acks == [None, None]
        for target in TARGETS:
            page = await store.list(PipelineId("src", LOGS.table, target))
            assert [(x.new_values, x.position, x.recorded_by) for x in page.letters] == [
                ({"line": "a"}, "0/00000200:0", "ingest:src"), ({"line": "b"}, "0/00000200:1", "ingest:src"),
                ({"line": "c"}, "0/00000200:2", "ingest:src")]
            assert "no primary key and REPLICA IDENTITY DEFAULT" in page.letters[0].error
        # The same WAL published again (a restart) replaces the letters: no duplicates.
        await publisher.publish(keyless_batch(unique_name, BatchKind.TRANSACTION, ["a", "b", "c"], end_lsn=0x210),
                                acks.append)
        await eventually(lambda: len(acks) == 3, what="the repeated batch acknowledged")
        assert await store.count(PipelineId("src", LOGS.table, TARGETS[0])) == 3
    finally:
        await store.close()
        await publisher.close()
        await connection.close()
