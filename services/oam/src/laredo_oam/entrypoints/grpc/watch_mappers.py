"""WatchStatus events -> WatchStatusResponse messages."""

from __future__ import annotations

from laredo.v1 import oam_pb2

from laredo_oam.domain.watch import (
    PipelineStateChanged,
    RowChanged,
    ServiceStateChanged,
    SourceStateChanged,
    WatchEvent,
)
from laredo_oam.entrypoints.grpc.mappers import pipeline_state, service_state, timestamp


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
