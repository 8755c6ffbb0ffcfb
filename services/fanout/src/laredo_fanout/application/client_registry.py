"""Connected Sync clients of one fan-out target, for admission (max_clients), status and drain."""

from __future__ import annotations

import asyncio
import enum
import itertools
from dataclasses import dataclass, field

from laredo_fanout.application.send_buffer import SendBuffer
from laredo_fanout.domain.client_buffer import client_lag
from laredo_fanout.domain.errors import TooManyClients


class ClientState(enum.Enum):
    CATCHING_UP = "catching_up"
    LIVE = "live"
    BACKPRESSURED = "backpressured"  # live, but its buffer is full and it is fed at its own pace (slow_down)
    DRAINING = "draining"  # told to move to another instance (GoAway sent)


@dataclass(slots=True, eq=False)
class ConnectedClient:
    """One Sync stream. Two streams with the same client_id are two entries (no overwrite)."""

    connection_id: int
    client_id: str
    connected_at: float
    sequence: int = 0  # the last sequence written to this client
    offered: int = 0  # the last sequence its session took from the journal (queued, or skipped by its filter)
    delivered: int = 0  # journal entries and snapshot rows written to it
    state: ClientState = ClientState.CATCHING_UP
    buffer: SendBuffer | None = field(default=None, repr=False)

    @property
    def buffer_depth(self) -> int:
        return self.buffer.depth if self.buffer is not None else 0

    def lag(self, current_sequence: int) -> int:
        """Entries behind: not offered yet, or offered and not yet written (see client_buffer.client_lag)."""
        return client_lag(current_sequence, self.offered, self.buffer.journal_depth if self.buffer else 0)


class ClientRegistry:
    """Admits up to max_clients streams (0 = unlimited)."""

    def __init__(self, max_clients: int) -> None:
        self._max_clients = max_clients
        self._clients: dict[int, ConnectedClient] = {}
        self._ids = itertools.count(1)
        self._empty = asyncio.Event()
        self._empty.set()
        self._delivered_by_gone = 0  # what was written to the streams that have ended

    @property
    def delivered(self) -> int:
        """Journal entries and snapshot rows written to every stream so far, ended ones included."""
        return self._delivered_by_gone + sum(c.delivered for c in self._clients.values())

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
        self._empty.clear()
        return client

    def unregister(self, client: ConnectedClient) -> None:
        if self._clients.pop(client.connection_id, None) is not None:
            self._delivered_by_gone += client.delivered
        if not self._clients:
            self._empty.set()

    def clients(self) -> list[ConnectedClient]:
        return list(self._clients.values())

    async def wait_empty(self) -> None:
        await self._empty.wait()
