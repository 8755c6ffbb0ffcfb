"""Fan-out restores the snapshot service's compacted snapshots: for every case of the fold specification
(services/snapshot/tests/fold_spec.py) and every base snapshot position, a fan-out table restored from the
key-by-key fold's result, plus the rest of the stream, ends equal to one that applied the whole stream.

(That fan-out and the sequential fold apply the stream alike is no longer compared: both apply it with
laredo_kernel.table_replay; tests/test_table_core_contract.py runs the specification against each.)
"""

from __future__ import annotations

from typing import Any

import pytest
from services.snapshot.tests.fold_spec import FoldCase, by_keys, consistent_splits, fold_cases, sequential
from services.snapshot.tests.snapshot_testkit import SOURCE, TABLE, canonical, decoded

from laredo_kernel.changes import ChangeBatchInfo
from laredo_core.snapshots.format import SnapshotManifest
from laredo_core.stream.feed import FeedMessage
from laredo_fanout.adapters.memory import ManualClock, SilentObserver
from laredo_fanout.adapters.protobuf_sync_encoder import ProtobufSyncEncoder
from laredo_fanout.application.replicator import Replicator
from laredo_fanout.application.table_replica import ReplicaLimits, TableReplica

CASES = fold_cases()


def fanout_rows(messages: list[tuple[int, ChangeBatchInfo]], restore: tuple[SnapshotManifest, list[Any]] | None = None
                ) -> list[dict[str, Any]]:
    encoder = ProtobufSyncEncoder()
    replica = TableReplica(SOURCE, TABLE, ReplicaLimits(1_000_000, 0.0, 5.0, 0), encoder)
    if restore is not None:
        replica.restore(*restore)
    replicator = Replicator({TABLE: replica}, encoder, ManualClock(), SilentObserver())
    for sequence, batch in messages:
        replicator.on_batch(FeedMessage(TABLE, batch, sequence))
    return [dict(replica.state.values_of(r)) for r in replica.state.rows()]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_fanout_restored_from_a_compacted_snapshot_ends_where_a_full_replay_ends(case: FoldCase) -> None:
    messages = decoded(case.messages)
    replayed = canonical(fanout_rows(messages))
    for split in consistent_splits(case):
        base, _ = sequential(messages[:split]) if split else (None, None)
        rows, plan = by_keys(messages[split:], base)
        if plan.sequential_reason or not plan.last_sequence:
            continue
        manifest = SnapshotManifest(
            snapshot_id="compacted", table=TABLE, columns=plan.columns, key_columns=plan.key_columns,
            row_count=len(rows), source_position=str(plan.position), stream_sequence=plan.last_sequence,
            journal_sequence=0, created_at=0.0, parts=(), checksum="", source_id=SOURCE, producer="laredo-snapshot")
        restored = fanout_rows(messages[plan.last_sequence:], (manifest, rows))
        assert canonical(restored) == replayed, f"base after {split} messages, snapshot at {plan.last_sequence}"
