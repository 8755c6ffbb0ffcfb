"""Connected Sync clients of one fan-out target, for admission (max_clients) and status."""

from __future__ import annotations

import enum
import itertools
from dataclasses import dataclass

from laredo_fanout.domain.errors import TooManyClients


class ClientState(enum.Enum):
    CATCHING_UP = "catching_up"
    LIVE = "live"
    DRAINING = "draining"


@dataclass(slots=True, eq=False)
class ConnectedClient:
    """One Sync stream. Two streams with the same client_id are two entries (no overwrite)."""

    connection_id: int
    client_id: str
    connected_at: float
    sequence: int = 0  # the last sequence delivered to this client
    state: ClientState = ClientState.CATCHING_UP


class ClientRegistry:
    """Admits up to max_clients streams (0 = unlimited)."""

    def __init__(self, max_clients: int) -> None:
        self._max_clients = max_clients
        self._clients: dict[int, ConnectedClient] = {}
        self._ids = itertools.count(1)

    def __len__(self) -> int:
        return len(self._clients)

    def register(self, client_id: str, now: float) -> ConnectedClient:
        if self._max_clients and len(self._clients) >= self._max_clients:
            raise TooManyClients(
                f"max clients reached ({self._max_clients}) for this fan-out target; "
                "retry later or connect to another instance"
            )
        client = ConnectedClient(next(self._ids), client_id, now)
        self._clients[client.connection_id] = client
        return client

    def unregister(self, client: ConnectedClient) -> None:
        self._clients.pop(client.connection_id, None)

    def clients(self) -> list[ConnectedClient]:
        return list(self._clients.values())
