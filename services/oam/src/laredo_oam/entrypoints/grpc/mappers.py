"""OAM domain views, snapshots, dead letters and WatchStatus events -> protobuf messages (user_meta back)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping
from typing import Any

from google.protobuf import duration_pb2, json_format, struct_pb2, timestamp_pb2
from laredo.v1 import oam_pb2
from laredo_core.coordination.ports import InstanceStatus
from laredo_core.deadletters.model import DeadLetter

from laredo_oam.application.snapshots import StoredSnapshot
from laredo_oam.domain.catalog import ConfiguredSource
from laredo_oam.domain.states import PipelineState, ServiceState
from laredo_oam.domain.views import (
    ColumnView,
    IndexView,
    PipelineView,
    SnapshotSummaryView,
    SourceView,
    SystemStatus,
    TableListing,
)
from laredo_oam.domain.watch import (
    PipelineStateChanged,
    RowChanged,
    ServiceStateChanged,
    SourceStateChanged,
    WatchEvent,
)


def service_state(state: ServiceState) -> int:
    return oam_pb2.ServiceState.Value(f"SERVICE_STATE_{state.name}")


def pipeline_state(state: PipelineState) -> int:
    return oam_pb2.PipelineState.Value(f"PIPELINE_STATE_{state.name}")


def struct(values: Mapping[str, Any]) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    # A JSON round trip turns tuples, ints and nested mappings into what Struct accepts.
    message.update(json.loads(json.dumps(dict(values), default=str)))
    return message


def timestamp(unix_ms: int) -> timestamp_pb2.Timestamp | None:
    if not unix_ms:
        return None
    stamp = timestamp_pb2.Timestamp()
    stamp.FromMilliseconds(unix_ms)
    return stamp


def duration(seconds: float) -> duration_pb2.Duration:
    value = duration_pb2.Duration()
    value.FromNanoseconds(int(seconds * 1e9))
    return value


def pipeline(view: PipelineView) -> oam_pb2.PipelineStatus:
    key, applied, baseline = view.key, view.applied, view.last_baseline
    status = oam_pb2.PipelineStatus(
        pipeline_id=view.pipeline_id, source_id=key.source_id, schema=key.table.schema, table=key.table.name,
        target_type=key.target_type, state=pipeline_state(view.state), row_count=view.row_count,
        inserts_applied=applied.inserts, updates_applied=applied.updates, deletes_applied=applied.deletes,
        truncates_applied=applied.truncates, error_message=view.error_message,
        last_change_at=timestamp(view.last_change_unix_ms), dead_letter_count=view.dead_letter_count)
    if baseline is not None:
        status.last_baseline_reason, status.last_baseline_detail = baseline.reason, baseline.detail
        status.last_baseline_id = baseline.baseline_id
        if baseline.started_unix_ms:
            status.last_baseline_at.FromMilliseconds(baseline.started_unix_ms)
    return status


def indexes(views: Iterable[IndexView]) -> list[oam_pb2.IndexInfo]:
    return [oam_pb2.IndexInfo(name=i.name, fields=i.fields, unique=i.unique, entry_count=i.entry_count)
            for i in views]


def snapshot_summary(view: SnapshotSummaryView) -> oam_pb2.SnapshotSummary:
    return oam_pb2.SnapshotSummary(
        enabled=view.enabled, store_type=view.store_type, last_snapshot_id=view.last_snapshot_id,
        last_snapshot_at=timestamp(view.last_snapshot_unix_ms), snapshot_count=view.snapshot_count)


def instance_info(instance: InstanceStatus) -> oam_pb2.InstanceInfo:
    status = instance.status
    return oam_pb2.InstanceInfo(service=instance.service, instance_id=instance.instance_id,
                                ready=bool(status.get("ready")), draining=bool(status.get("draining")),
                                heartbeat_at=timestamp(instance.heartbeat_unix_ms),
                                started_at=timestamp(instance.started_unix_ms), status=struct(status))


def source_status(view: SourceView) -> oam_pb2.SourceStatus:
    return oam_pb2.SourceStatus(**_source_fields(view), source_details=struct(view.details))


def source_info(view: SourceView) -> oam_pb2.SourceInfo:
    return oam_pb2.SourceInfo(**_source_fields(view), details=struct(view.details))


def _source_fields(view: SourceView) -> dict[str, Any]:
    return dict(source_id=view.source_id, source_type=view.source_type, supports_resume=view.supports_resume,
                ordering_guarantee="total", current_position=view.current_position,
                acked_position=view.acked_position, lag_bytes=view.lag_bytes, lag_time=duration(view.lag_seconds))


def system_status(status: SystemStatus, snapshots: SnapshotSummaryView | None = None) -> oam_pb2.GetStatusResponse:
    return oam_pb2.GetStatusResponse(
        state=service_state(status.state), sources=[source_status(s) for s in status.sources],
        pipelines=[pipeline(p) for p in status.pipelines], started_at=timestamp(status.started_unix_ms),
        last_change_at=timestamp(status.last_change_unix_ms),
        snapshot_status=snapshot_summary(snapshots) if snapshots is not None else None)


def table_configs(listing: TableListing, source: ConfiguredSource | None) -> list[oam_pb2.TableConfig]:
    """One TableConfig per target; `primary_key` lists the key columns joined with `,` (composite keys)."""
    table = listing.table
    return [oam_pb2.TableConfig(
        schema=table.table.schema, table=table.table.name, source_id=table.source_id,
        primary_key=",".join(listing.primary_key),
        source_type=source.source_type if source else "", source_config=struct(source.details if source else {}),
        target_type=target.target_type, target_config=struct(target.options)) for target in table.targets]


def column(view: ColumnView) -> oam_pb2.ColumnDefinition:
    return oam_pb2.ColumnDefinition(
        ordinal_position=view.ordinal_position, column_name=view.name, data_type=view.data_type,
        not_null=view.not_null, is_primary_key=view.primary_key_ordinal > 0,
        primary_key_ordinal=view.primary_key_ordinal)


def watch_response(event: WatchEvent) -> oam_pb2.WatchStatusResponse:
    stamp = timestamp(event.unix_ms)
    if isinstance(event, RowChanged):
        key = event.key
        return oam_pb2.WatchStatusResponse(timestamp=stamp, row_change=oam_pb2.RowChange(
            pipeline_id=key.pipeline_id, schema=key.table.schema, table=key.table.name, action=event.action.value,
            position=event.position, xid=event.xid))
    if isinstance(event, PipelineStateChanged):
        return oam_pb2.WatchStatusResponse(timestamp=stamp, pipeline_state_change=oam_pb2.PipelineStateChangeEvent(
            pipeline_id=event.key.pipeline_id, old_state=pipeline_state(event.old),
            new_state=pipeline_state(event.new)))
    if isinstance(event, SourceStateChanged):
        return oam_pb2.WatchStatusResponse(timestamp=stamp, source_state_change=oam_pb2.SourceStateChange(
            source_id=event.source_id, event_type=event.link.value, message=event.message))
    if isinstance(event, ServiceStateChanged):
        return oam_pb2.WatchStatusResponse(timestamp=stamp, service_state_change=oam_pb2.ServiceStateChange(
            old_state=service_state(event.old), new_state=service_state(event.new)))
    raise TypeError(f"unknown WatchStatus event {event!r}")


def snapshot_info(snapshot: StoredSnapshot) -> oam_pb2.SnapshotInfo:
    manifest = snapshot.manifest
    created = timestamp_pb2.Timestamp()
    created.FromMilliseconds(round(manifest.created_at * 1000))  # manifests keep milliseconds
    return oam_pb2.SnapshotInfo(
        snapshot_id=manifest.snapshot_id, created_at=created, format=manifest.format,
        source_positions=[oam_pb2.SourcePositionEntry(source_id=manifest.source_id,
                                                      position=manifest.source_position)],
        tables=[oam_pb2.TableSnapshotSummary(schema=snapshot.table.schema, table=snapshot.table.name,
                                             row_count=manifest.row_count, target_type=snapshot.target_type)],
        size_bytes=manifest.size_bytes, store_type=snapshot.place.store_type,
        store_location=snapshot.place.location, user_meta=struct(manifest.user_meta) if manifest.user_meta else None)


def user_meta(request_meta: struct_pb2.Struct) -> dict[str, Any]:
    """The request's user_meta as JSON (numbers arrive as floats: Struct has no integers)."""
    return json_format.MessageToDict(request_meta)


def dead_letter_entry(letter: DeadLetter) -> oam_pb2.DeadLetterEntry:
    """change_data: new_values / old_values (as clients see rows), or raw_message_base64 when the message does not
    decode; plus letter_id, stream_sequence, xid, recorded_by and replays (failed replays so far)."""
    data: dict[str, Any] = {"letter_id": letter.letter_id, "stream_sequence": letter.stream_sequence,
                            "xid": letter.xid, "recorded_by": letter.recorded_by, "replays": letter.replays}
    if letter.new_values is not None:
        data["new_values"] = dict(letter.new_values)
    if letter.old_values is not None:
        data["old_values"] = dict(letter.old_values)
    if not letter.decodable:
        data["raw_message_base64"] = base64.b64encode(letter.message).decode("ascii")
    return oam_pb2.DeadLetterEntry(timestamp=timestamp(letter.recorded_unix_ms),
                                   action=letter.action or "UNDECODABLE", position=letter.position,
                                   error_message=letter.error, change_data=struct(data))
