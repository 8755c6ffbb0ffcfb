"""Protobuf <-> application types for the Replication service."""

from __future__ import annotations

from google.protobuf import json_format
from google.protobuf.timestamp_pb2 import Timestamp

from laredo.replication.v1 import replication_pb2 as pb

from laredo_fanout.application.session import SyncRequestInfo
from laredo_fanout.application.targets import ReplicationStatus
from laredo_core.snapshots.format import SnapshotManifest
from laredo_fanout.domain.subscription_filter import FieldPredicate, MatchKind


def sync_request(request: pb.SyncRequest) -> SyncRequestInfo:
    return SyncRequestInfo(
        schema=request.schema,
        table=request.table,
        last_known_sequence=request.last_known_sequence,
        last_snapshot_id=request.last_snapshot_id,
        client_id=request.client_id,
        last_known_source_position=request.last_known_source_position,
        max_batch_size=request.max_batch_size,
        filters=tuple(field_predicate(p) for p in request.filters),
        identify_instance=request.identify_instance,
        last_known_instance_id=request.last_known_instance_id,
        last_known_journal_epoch=request.last_known_journal_epoch,
    )


def field_predicate(predicate: pb.FieldPredicate) -> FieldPredicate:
    which = predicate.WhichOneof("match")
    if which == "equals":
        return FieldPredicate(predicate.field, MatchKind.EQUALS, json_format.MessageToDict(predicate.equals))
    if which == "prefix":
        return FieldPredicate(predicate.field, MatchKind.PREFIX, predicate.prefix)
    if which == "in":
        return FieldPredicate(predicate.field, MatchKind.IN,
                              tuple(json_format.MessageToDict(getattr(predicate, "in"))))
    return FieldPredicate(predicate.field, None)


def status_response(status: ReplicationStatus) -> pb.GetReplicationStatusResponse:
    response = pb.GetReplicationStatusResponse(
        current_sequence=status.current_sequence,
        journal_oldest_sequence=status.journal_oldest_sequence,
        journal_entry_count=status.journal_entry_count,
        row_count=status.row_count,
        connected_clients=len(status.clients),
        clients=[
            pb.ConnectedClient(client_id=c.client_id, current_sequence=c.sequence,
                               behind_count=c.lag(status.current_sequence), buffer_depth=c.buffer_depth,
                               connected_at=_timestamp(c.connected_at), state=c.state.value)
            for c in status.clients
        ],
    )
    if status.latest_snapshot is not None:
        response.latest_snapshot.CopyFrom(snapshot_info(status.latest_snapshot, status.latest_snapshot_sequence))
    return response


def snapshot_info(manifest: SnapshotManifest, sequence: int) -> pb.ReplicationSnapshotInfo:
    """`sequence`: the instance's own sequence for the snapshot (FanoutTargets.advertised_sequence)."""
    return pb.ReplicationSnapshotInfo(
        snapshot_id=manifest.snapshot_id, sequence=sequence,
        source_position=manifest.source_position, row_count=manifest.row_count,
        size_bytes=manifest.size_bytes, created_at=_timestamp(manifest.created_at),
    )


def _timestamp(unix_seconds: float) -> Timestamp:
    stamp = Timestamp()
    stamp.FromNanoseconds(int(unix_seconds * 1e9))
    return stamp
