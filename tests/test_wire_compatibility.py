"""Field names and numbers match the upstream Laredo schema, so existing clients interoperate."""

from __future__ import annotations

import pytest

from laredo.replication.v1 import replication_pb2 as rep
from laredo.v1 import oam_pb2 as oam
from laredo.v1 import query_pb2 as query

# message -> "name=number ..." as published by upstream (reference §2).
UPSTREAM = {
    rep: {
        "SyncRequest": "schema=1 table=2 last_known_sequence=3 last_snapshot_id=4 client_id=5 "
                       "last_known_source_position=6 filters=7",
        "FieldPredicate": "field=1 equals=2 prefix=3 in=4",
        "SyncResponse": "handshake=1 snapshot_begin=2 snapshot_row=3 snapshot_end=4 journal_entry=5 schema_change=6 "
                        "heartbeat=7 go_away=8",
        "GoAway": "reason=1 drain_deadline_unix_ms=2",
        "SyncHandshake": "mode=1 server_current_sequence=2 journal_oldest_sequence=3 resume_from_sequence=4 "
                         "columns=5 snapshot_id=6",
        "SnapshotBegin": "snapshot_id=1 sequence=2 row_count=3",
        "SnapshotRow": "row=1",
        "SnapshotEnd": "sequence=1 rows_sent=2",
        "ReplicationJournalEntry": "sequence=1 source_position=2 timestamp=3 action=4 old_values=5 new_values=6",
        "SchemaChangeNotification": "sequence=1 old_columns=2 new_columns=3",
        "ColumnDefinition": "ordinal_position=1 column_name=2 data_type=3 not_null=4 is_primary_key=5 "
                            "primary_key_ordinal=6",
        "Heartbeat": "current_sequence=1 server_time=2",
        "ListSnapshotsRequest": "schema=1 table=2 limit=3",
        "ListSnapshotsResponse": "snapshots=1",
        "ReplicationSnapshotInfo": "snapshot_id=1 sequence=2 source_position=3 row_count=4 size_bytes=5 created_at=6",
        "FetchSnapshotRequest": "snapshot_id=1",
        "FetchSnapshotResponse": "begin=1 row=2 end=3",
        "GetReplicationStatusRequest": "schema=1 table=2",
        "GetReplicationStatusResponse": "current_sequence=1 journal_oldest_sequence=2 journal_entry_count=3 "
                                        "row_count=4 connected_clients=5 clients=6 latest_snapshot=7",
        "ConnectedClient": "client_id=1 current_sequence=2 behind_count=3 buffer_depth=4 connected_at=5 state=6",
    },
    query: {
        "LookupRequest": "schema=1 table=2 index_name=3 key_values=4",
        "LookupResponse": "found=1 row=2",
        "LookupAllRequest": "schema=1 table=2 index_name=3 key_values=4",
        "LookupAllResponse": "rows=1",
        "GetRowRequest": "schema=1 table=2 primary_key=3",
        "GetRowResponse": "found=1 row=2",
        "ListRowsRequest": "schema=1 table=2 page_size=3 page_token=4",
        "ListRowsResponse": "rows=1 next_page_token=2 total_count=3",
        "CountRowsRequest": "schema=1 table=2",
        "CountRowsResponse": "count=1",
        "SubscribeRequest": "schema=1 table=2 replay_existing=3",
        "SubscribeResponse": "action=1 position=2 xid=3 timestamp=4 old_values=5 new_values=6",
    },
    oam: {
        "GetStatusResponse": "state=1 sources=2 pipelines=3 started_at=4 last_change_at=5 snapshot_status=6",
        "SourceStatus": "source_id=1 source_type=2 supports_resume=3 ordering_guarantee=4 current_position=5 "
                        "acked_position=6 lag_bytes=7 lag_time=8 source_details=9",
        "PipelineStatus": "pipeline_id=1 source_id=2 schema=3 table=4 target_type=5 state=6 row_count=7 "
                          "inserts_applied=8 updates_applied=9 deletes_applied=10 truncates_applied=11 "
                          "last_change_at=12 error_message=13 buffer_depth=14 buffer_capacity=15 dead_letter_count=16",
        "WatchStatusRequest": "tables=1 pipeline_ids=2",
        "WatchStatusResponse": "timestamp=1 service_state_change=2 pipeline_state_change=3 row_change=4 "
                               "source_state_change=5",
        "RowChange": "pipeline_id=1 schema=2 table=3 action=4 position=5 xid=6",
        "CheckReadyRequest": "source=1 table=2 pipeline_id=3",
        "CheckReadyResponse": "ready=1 not_ready_reasons=2",
        "ResetSourceRequest": "source_id=1 confirm=2 drop_publication=3",
        "DrainReplicationRequest": "schema=1 table=2 drain_deadline_seconds=3",
        "DrainReplicationResponse": "accepted=1 message=2 drained_targets=3",
        "TableConfig": "schema=1 table=2 primary_key=3 source_id=4 source_type=5 source_config=6 target_type=7 "
                       "target_config=8",
        "SnapshotInfo": "snapshot_id=1 created_at=2 format=3 source_positions=4 tables=5 size_bytes=6 store_type=7 "
                        "store_location=8 user_meta=9",
        "RestoreSnapshotRequest": "snapshot_id=1 confirm=2 skip_meta_check=3",
        "DeadLetterEntry": "timestamp=1 action=2 position=3 error_message=4 change_data=5",
        "StartReplayRequest": "snapshot_id=1 target_pipeline_id=2 speed=3 tables=4",
        "GetReplayStatusResponse": "replay_id=1 state=2 rows_replayed=3 elapsed=4",
    },
}
CASES = [(module, name, spec) for module, messages in UPSTREAM.items() for name, spec in messages.items()]


@pytest.mark.parametrize(("module", "message", "spec"), CASES, ids=[c[1] for c in CASES])
def test_upstream_fields_keep_their_numbers(module, message: str, spec: str) -> None:  # noqa: ANN001
    fields = {f.name: f.number for f in module.DESCRIPTOR.message_types_by_name[message].fields}
    expected = dict((pair.split("=")[0], int(pair.split("=")[1])) for pair in spec.split())
    assert {name: fields.get(name) for name in expected} == expected
    extensions = {name: number for name, number in fields.items() if name not in expected}
    assert all(number >= 100 for number in extensions.values()), f"extensions must use numbers >= 100: {extensions}"


def test_enums_match_upstream_values() -> None:
    assert [v.number for v in rep.SyncMode.DESCRIPTOR.values] == [0, 1, 2, 3, 4]
    assert oam.ServiceState.Value("SERVICE_STATE_ERROR") == 6
    assert oam.PipelineState.Value("PIPELINE_STATE_STOPPED") == 6
