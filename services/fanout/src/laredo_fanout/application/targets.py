"""The fan-out targets of this instance: request routing by schema.table, Sync sessions, status, snapshots, drain."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from laredo_kernel.changes import ColumnInfo, TableId
from laredo_kernel.position import Position, PositionError

from laredo_fanout.application.client_registry import ConnectedClient
from laredo_fanout.application.session import SyncRequestInfo, SyncSession
from laredo_fanout.application.snapshots import TableSnapshots
from laredo_fanout.application.table_replica import DrainNotice, TableReplica
from laredo_fanout.domain.errors import InvalidSyncRequest, SnapshotNotFound, SnapshotsNotConfigured, TargetNotFound
from laredo_core.snapshots.format import SnapshotManifest
from laredo_fanout.domain.subscription_filter import SubscriptionFilter
from laredo_fanout.ports import Clock, Observer, SyncEncoder

log = logging.getLogger(__name__)

#: Column types whose values compare as numbers in filters (numeric travels as a decimal string).
_NUMERIC_TYPES = frozenset({20, 21, 23, 26, 700, 701, 1700})


@dataclass(frozen=True, slots=True)
class ReplicationStatus:
    current_sequence: int
    journal_oldest_sequence: int
    journal_entry_count: int
    row_count: int
    clients: tuple[ConnectedClient, ...]  # each behind by client.lag(current_sequence)
    latest_snapshot: SnapshotManifest | None = None
    latest_snapshot_sequence: int = 0  # this instance's sequence for it (FanoutTargets.advertised_sequence)


class FanoutTargets:
    def __init__(self, replicas: Iterable[TableReplica], *, encoder: SyncEncoder, clock: Clock, observer: Observer,
                 snapshots: Mapping[TableId, TableSnapshots] | None = None, instance_id: str = "") -> None:
        self._replicas = {r.table: r for r in replicas}
        self.instance_id = instance_id  # named in handshakes: sequences are only resumed where they were issued
        self._encoder = encoder
        self._clock = clock
        self._observer = observer
        self.snapshots: Mapping[TableId, TableSnapshots] = snapshots or {}
        self.dead_letter_stats: Callable[[], Mapping[str, Any]] | None = None  # the dead-letter writer's counters
        self.feed_stalls: Callable[[], Mapping[TableId, str]] | None = None  # the change feed's (see FeedHealth)

    @property
    def replicas(self) -> list[TableReplica]:
        return list(self._replicas.values())

    def find(self, schema: str, table: str) -> TableReplica:
        missing = [name for name, value in (("schema", schema), ("table", table)) if not value]
        if missing:
            raise InvalidSyncRequest(f"{' and '.join(missing)} required: name the table to replicate, "
                                     "e.g. schema='public', table='users'")
        replica = self._replicas.get(TableId(schema, table))
        if replica is None:
            raise TargetNotFound(schema, table)
        return replica

    def open_session(self, request: SyncRequestInfo) -> SyncSession:
        """Validate and route a Sync request; the session waits for the table to be ready."""
        replica = self.find(request.schema, request.table)
        if request.last_known_sequence < 0:
            raise InvalidSyncRequest(f"last_known_sequence must not be negative, got {request.last_known_sequence}")
        snapshots = self.snapshots.get(replica.table)
        return SyncSession(replica, request, encoder=self._encoder, clock=self._clock, observer=self._observer,
                           subscription=self._subscription(replica, request),
                           find_snapshot=snapshots.find if snapshots is not None else None,
                           instance_id=self.instance_id)

    def _subscription(self, replica: TableReplica, request: SyncRequestInfo) -> SubscriptionFilter | None:
        if not request.filters:
            return None
        names = {c.name for c in replica.columns}
        unknown = [p.field for p in request.filters if names and p.field and p.field not in names]
        if unknown:
            raise InvalidSyncRequest(f"filter on {', '.join(map(repr, unknown))}: not a column of {replica.table} "
                                     f"(columns: {', '.join(sorted(names))})")
        return SubscriptionFilter(request.filters, (c.name for c in replica.columns if _numeric(c)))

    def status(self, schema: str, table: str) -> ReplicationStatus:
        replica = self.find(schema, table)
        journal = replica.journal
        latest = replica.latest_snapshot
        return ReplicationStatus(journal.current_sequence, journal.oldest_sequence, len(journal), len(replica.state),
                                 tuple(replica.clients.clients()), latest,
                                 self.advertised_sequence(latest) if latest is not None else 0)

    async def list_snapshots(self, schema: str, table: str, limit: int = 0) -> list[SnapshotManifest]:
        replica = self.find(schema, table)
        snapshots = self.snapshots.get(replica.table)
        if snapshots is None:
            raise SnapshotsNotConfigured(f"{replica.table} has no snapshot store on this instance; set "
                                         "snapshot { store = local } on its replication-fanout target")
        return await snapshots.list(limit)

    def advertised_sequence(self, manifest: SnapshotManifest) -> int:
        """The sequence this instance gives a stored snapshot (ListSnapshots, FetchSnapshot): its journal's
        sequence at the snapshot's source position, which a client holding the snapshot resumes after here; 0
        when the journal does not cover that position (the client then needs a full sync). Never the manifest's
        journal_sequence: that is its writer's numbering (another instance's, or 0 from the snapshot service)."""
        replica = self._replicas.get(manifest.table)
        try:
            position = Position.parse(manifest.source_position)
        except PositionError:
            return 0
        return (replica.journal.resume_after_position(position) or 0) if replica is not None else 0

    async def find_snapshot(self, snapshot_id: str) -> tuple[TableSnapshots, SnapshotManifest]:
        """The snapshot with this id in any target's store; SnapshotNotFound otherwise."""
        if not snapshot_id:
            raise InvalidSyncRequest("snapshot_id required: take one from ListSnapshots")
        for snapshots in self.snapshots.values():
            manifest = await snapshots.find(snapshot_id)
            if manifest is not None:
                return snapshots, manifest
        raise SnapshotNotFound(snapshot_id)

    async def snapshot_messages(self, snapshots: TableSnapshots, manifest: SnapshotManifest) -> AsyncIterator[bytes]:
        """FetchSnapshotResponse bytes: begin, one per row, end."""
        encoder, sent, sequence = self._encoder, 0, self.advertised_sequence(manifest)
        yield encoder.fetch_begin(snapshot_id=manifest.snapshot_id, sequence=sequence,
                                  row_count=manifest.row_count, position=manifest.source_position)
        async for rows in snapshots.stored_rows(manifest):
            for row in rows:
                yield encoder.fetch_row(row)
            sent += len(rows)
        yield encoder.fetch_end(sequence=sequence, rows_sent=sent,
                                position=manifest.source_position)

    def drain(self, schema: str, table: str, reason: str, deadline_unix: float) -> list[TableId]:
        """GoAway to the clients of one target (or every target when schema and table are empty); drained streams
        end at deadline_unix (0: when their clients leave). Returns the drained tables."""
        replicas = self.replicas if not schema and not table else [self.find(schema, table)]
        now = self._clock.now()
        notice = DrainNotice(reason, int(deadline_unix * 1000) if deadline_unix else 0)
        for replica in replicas:
            if replica.start_drain(notice, deadline_unix - now if deadline_unix else None):
                log.info("%s: draining (%s), %d clients told to move%s", replica.table, reason, len(replica.clients),
                         f", streams end in {deadline_unix - now:.1f}s" if deadline_unix else "")
        return [r.table for r in replicas]

    @property
    def draining(self) -> bool:
        return any(r.drain is not None for r in self._replicas.values())

    async def wait_clients_gone(self) -> None:
        await asyncio.gather(*(r.clients.wait_empty() for r in self._replicas.values()))

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        """Ready when every table is loaded and caught up, nothing drains, and the feed of no table stalls."""
        stalls = self.feed_stalls() if self.feed_stalls is not None else {}
        tables = {
            str(r.table): {"ready": r.ready, "baseline_complete": r.baseline_complete, "caught_up": r.caught_up,
                           "rows": len(r.state), "sequence": r.journal.current_sequence,
                           "clients": len(r.clients), "applied": r.applied.report(),
                           **({"draining": r.drain.reason} if r.drain else {}),
                           **({"dead_letters": r.dead_letters} if r.dead_letters else {}),
                           **({"position_regressions": r.position_regressions} if r.position_regressions else {}),
                           **({"feed_stalled": stalls[r.table]} if r.table in stalls else {})}
            for r in self._replicas.values()
        }
        ready = all(r.ready for r in self._replicas.values()) and not self.draining and not stalls
        if self.dead_letter_stats is not None:
            return ready, {"tables": tables, "dead_letter_writer": self.dead_letter_stats()}
        return ready, {"tables": tables}


def _numeric(column: ColumnInfo) -> bool:
    return column.type_oid in _NUMERIC_TYPES or column.base_type_oid in _NUMERIC_TYPES and \
        not column.type_name.startswith("_")
