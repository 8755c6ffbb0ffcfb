"""OAM's ports. OAM owns no data: everything it reports or changes goes through the CoordinationStore.

CoordinationStore (laredo_core.coordination.ports, Redis in production, InMemoryCoordinationStore in tests):
- `instances(service)` lists the live instances of a service with the status mapping each heartbeats
  (ingest: `source`, `phase`, `confirmed_lsn`, `received_lsn`, `lag_bytes`, `lag_seconds`, `baseline_complete`,
  ...; fan-out and query: `ready`, `draining`, `tables` = {"schema.table": {baseline_complete, rows, ...}}).
  An entry disappears when its instance stops heartbeating for the ttl: a missing instance is not running.
- `send_command(target, kind, args)` appends a durable command for `ingest:<source_id>` (RELOAD, PAUSE, RESUME,
  RESET) or `fanout:*` / `fanout:<instance_id>` (DRAIN, SNAPSHOT); exactly one consumer per target group runs
  it, idempotently by command id; `command_result(id, timeout)` waits at most `timeout` for its result.
- `events()` iterates state changes published by the services (no history; late watchers miss earlier ones).
- Every call raises CoordinationUnavailable when the store cannot be reached; OAM reports that as UNAVAILABLE
  and never caches around it, so answers recover as soon as the store does.
"""

from __future__ import annotations

from laredo_core.coordination.ports import CoordinationStore, CoordinationUnavailable

__all__ = ["CoordinationStore", "CoordinationUnavailable"]
