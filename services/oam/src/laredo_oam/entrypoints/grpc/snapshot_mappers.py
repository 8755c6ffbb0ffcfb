"""Stored snapshots -> SnapshotInfo, and a request's user_meta Struct -> a JSON object."""

from __future__ import annotations

from typing import Any

from google.protobuf import json_format, struct_pb2, timestamp_pb2
from laredo.v1 import oam_pb2

from laredo_oam.application.snapshots import StoredSnapshot
from laredo_oam.entrypoints.grpc.mappers import struct


def snapshot_info(snapshot: StoredSnapshot) -> oam_pb2.SnapshotInfo:
    manifest = snapshot.manifest
    created = timestamp_pb2.Timestamp()
    created.FromMilliseconds(round(manifest.created_at * 1000))  # manifests keep milliseconds
    return oam_pb2.SnapshotInfo(
        snapshot_id=manifest.snapshot_id,
        created_at=created,
        format=manifest.format,
        source_positions=[oam_pb2.SourcePositionEntry(source_id=manifest.source_id,
                                                      position=manifest.source_position)],
        tables=[oam_pb2.TableSnapshotSummary(schema=snapshot.table.schema, table=snapshot.table.name,
                                             row_count=manifest.row_count, target_type=snapshot.target_type)],
        size_bytes=manifest.size_bytes,
        store_type=snapshot.place.store_type,
        store_location=snapshot.place.location,
        user_meta=struct(manifest.user_meta) if manifest.user_meta else None,
    )


def user_meta(request_meta: struct_pb2.Struct) -> dict[str, Any]:
    """The request's user_meta as JSON (numbers arrive as floats: Struct has no integers)."""
    return json_format.MessageToDict(request_meta)
