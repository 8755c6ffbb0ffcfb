"""Protobuf <-> application types for the Replication service."""

from __future__ import annotations

from google.protobuf.timestamp_pb2 import Timestamp

from laredo.replication.v1 import replication_pb2 as pb

from laredo_fanout.application.session import SyncRequestInfo
from laredo_fanout.application.targets import ReplicationStatus


def sync_request(request: pb.SyncRequest) -> SyncRequestInfo:
    return SyncRequestInfo(
        schema=request.schema,
        table=request.table,
        last_known_sequence=request.last_known_sequence,
        last_snapshot_id=request.last_snapshot_id,
        client_id=request.client_id,
        last_known_source_position=request.last_known_source_position,
        max_batch_size=request.max_batch_size,
    )


def status_response(status: ReplicationStatus) -> pb.GetReplicationStatusResponse:
    return pb.GetReplicationStatusResponse(
        current_sequence=status.current_sequence,
        journal_oldest_sequence=status.journal_oldest_sequence,
        journal_entry_count=status.journal_entry_count,
        row_count=status.row_count,
        connected_clients=len(status.clients),
        clients=[
            pb.ConnectedClient(client_id=c.client_id, current_sequence=c.current_sequence,
                               behind_count=c.behind_count, buffer_depth=0,
                               connected_at=_timestamp(c.connected_at), state=c.state)
            for c in status.clients
        ],
    )


def _timestamp(unix_seconds: float) -> Timestamp:
    stamp = Timestamp()
    stamp.FromNanoseconds(int(unix_seconds * 1e9))
    return stamp
