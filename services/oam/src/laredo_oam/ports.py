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

DeadLetterStore (laredo_core.deadletters.store, JetStream in production, InMemoryDeadLetterStore in tests): the
changes pipelines could not apply; OAM lists, removes and rewrites them. DeadLetterStoreUnavailable is UNAVAILABLE.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from laredo_kernel.changes import TableId
from laredo_core.coordination.ports import CoordinationStore, CoordinationUnavailable
from laredo_core.deadletters.model import DeadLetterStoreError, DeadLetterStoreUnavailable
from laredo_core.deadletters.store import DeadLetterStore

from laredo_oam.domain.watch import ObservedChange

__all__ = ["ChangeSink", "ChangeTail", "CoordinationStore", "CoordinationUnavailable", "DeadLetterStore",
           "DeadLetterStoreError", "DeadLetterStoreUnavailable", "TailTopic"]


@dataclass(frozen=True, slots=True)
class TailTopic:
    """One table of a source to follow, or every table of it (`table` None)."""

    source_id: str
    table: TableId | None = None


ChangeSink = Callable[[Sequence[ObservedChange]], None]


class ChangeTail(Protocol):
    """The row changes of committed transactions that ingest publishes (JetStream), for WatchStatus.

    Contract:
    - `follow(topics)` replaces the set of followed topics (empty: nothing); it returns at once and the
      adapter (un)subscribes in the background. A topic delivers what is published from the moment it was
      first followed (while it stays followed), however long subscribing takes and also when the source's
      stream is created only later.
    - `run(sink)` delivers until cancelled: `sink(changes)` is called on the event loop with one stream
      message's changes, in stream order per table; baseline rows, control messages and dead letters are not
      delivered. A message seen through two overlapping topics is delivered once.
    - Best effort, never blocking ingest: an unreachable server is retried with backoff and logged, never
      raised; no history beyond the rule above, no acknowledgement, nothing stored.
    """

    def follow(self, topics: frozenset[TailTopic]) -> None: ...

    async def run(self, sink: ChangeSink) -> None: ...


class QueryRoutes(Protocol):
    """Where the OAM address sends Query service calls (the front door's query cluster).

    Contract: `publish(addresses)` replaces the whole set with these "host:port" addresses of ready query
    instances (empty: Query calls on the OAM address fail UNAVAILABLE until one is ready); names are resolved
    here, an address that does not resolve is left out and logged. Idempotent; called by QueryRouting only.
    """

    async def publish(self, addresses: Sequence[str]) -> None: ...
