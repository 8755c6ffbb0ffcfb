"""OAM domain views -> protobuf messages."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from google.protobuf import duration_pb2, struct_pb2, timestamp_pb2
from laredo.v1 import oam_pb2
from laredo_core.coordination.ports import InstanceStatus

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
