"""The fan-out targets of this instance: request routing by schema.table, Sync sessions and status."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from laredo_core.changes import TableId

from laredo_fanout.application.client_registry import ConnectedClient
from laredo_fanout.application.session import SyncRequestInfo, SyncSession
from laredo_fanout.application.table_replica import TableReplica
from laredo_fanout.domain.errors import InvalidSyncRequest, NotAvailableYet, TargetNotFound
from laredo_fanout.ports import Clock, Observer, SyncEncoder

SNAPSHOTS_LATER = ("fan-out snapshots (ListSnapshots/FetchSnapshot) arrive in a later release; "
                   "use Sync, which sends a full snapshot to clients without state")


@dataclass(frozen=True, slots=True)
class ClientStatus:
    client_id: str
    current_sequence: int
    behind_count: int
    connected_at: float
    state: str


@dataclass(frozen=True, slots=True)
class ReplicationStatus:
    current_sequence: int
    journal_oldest_sequence: int
    journal_entry_count: int
    row_count: int
    clients: tuple[ClientStatus, ...]


class FanoutTargets:
    def __init__(self, replicas: Iterable[TableReplica], *, encoder: SyncEncoder, clock: Clock,
                 observer: Observer) -> None:
        self._replicas = {r.table: r for r in replicas}
        self._encoder = encoder
        self._clock = clock
        self._observer = observer

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
        return SyncSession(replica, request, encoder=self._encoder, clock=self._clock, observer=self._observer)

    def status(self, schema: str, table: str) -> ReplicationStatus:
        replica = self.find(schema, table)
        journal = replica.journal
        current = journal.current_sequence
        clients = tuple(_client_status(c, current) for c in replica.clients.clients())
        return ReplicationStatus(current, journal.oldest_sequence, len(journal), len(replica.state), clients)

    def list_snapshots(self, schema: str, table: str) -> None:
        self.find(schema, table)
        raise NotAvailableYet(SNAPSHOTS_LATER)

    def fetch_snapshot(self, snapshot_id: str) -> None:
        if not snapshot_id:
            raise InvalidSyncRequest("snapshot_id required: take one from ListSnapshots")
        raise NotAvailableYet(SNAPSHOTS_LATER)

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        tables = {
            str(r.table): {"ready": r.ready, "baseline_complete": r.baseline_complete, "caught_up": r.caught_up,
                           "rows": len(r.state), "sequence": r.journal.current_sequence}
            for r in self._replicas.values()
        }
        return all(r.ready for r in self._replicas.values()), {"tables": tables}


def _client_status(client: ConnectedClient, current: int) -> ClientStatus:
    return ClientStatus(client.client_id, client.sequence, max(0, current - client.sequence),
                        client.connected_at, client.state.value)
