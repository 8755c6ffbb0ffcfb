"""What instances tell watchers: the `instance_status` event and the column report OAM's GetTableSchema reads.

An `instance_status` event (kind INSTANCE_STATUS) carries the same record a heartbeat stores, published right
after storing it when an instance's state changes (InstanceHeartbeat.poke), so a watcher sees every
transition in order without waiting for the next periodic heartbeat. Payload:

    {"service": "ingest", "instance_id": "...", "status": {...the heartbeat's status...},
     "heartbeat_unix_ms": 1700000000123, "started_unix_ms": 1700000000000}

`heartbeat_unix_ms` increases strictly per instance process across heartbeats and events, so a watcher
applies a record only when it is newer than the one it holds, whichever path (event or registry read)
brought it first.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from laredo_kernel.changes import ColumnInfo
from laredo_core.coordination.ports import Event, InstanceStatus
from laredo_core.coordination.records import instance_record

INSTANCE_STATUS = "instance_status"


def instance_status_event(instance: InstanceStatus) -> Event:
    """The event announcing `instance` as just stored."""
    return Event(INSTANCE_STATUS, instance_record(instance))


def instance_from_event(event: Event) -> InstanceStatus | None:
    """The instance record an `instance_status` event carries; None for another kind or a malformed payload."""
    if event.kind != INSTANCE_STATUS:
        return None
    payload = event.payload
    service, instance_id, status = payload.get("service"), payload.get("instance_id"), payload.get("status")
    stamp, started = payload.get("heartbeat_unix_ms"), payload.get("started_unix_ms", 0)
    if not (isinstance(service, str) and service and isinstance(instance_id, str) and instance_id
            and isinstance(status, Mapping) and isinstance(stamp, int)):
        return None
    return InstanceStatus(service, instance_id, status, stamp, started if isinstance(started, int) else 0)


def column_report(columns: Iterable[ColumnInfo]) -> list[dict[str, Any]]:
    """A table's columns as instances report them under `tables[<schema.table>].columns` (JSON-compatible)."""
    return [{"ordinal_position": position, "name": c.name, "type": c.type_name, "type_oid": c.type_oid,
             "not_null": c.not_null, "primary_key_ordinal": c.primary_key_ordinal}
            for position, c in enumerate(columns, start=1)]
