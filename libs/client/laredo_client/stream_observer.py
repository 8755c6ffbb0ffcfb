"""StreamObserver: an optional witness of every Sync stream a client opens (what was asked, what arrived)."""

from __future__ import annotations

from typing import Protocol

from laredo.replication.v1 import replication_pb2 as pb


class StreamObserver(Protocol):
    """Sees the wire, not the replica: for checking the protocol (sequences, positions) and for diagnostics.
    Contract: called on the client's event loop, in stream order. `opened` once per stream before its request is
    sent; `received` with each SyncResponse's bytes as they came off the wire, before the client applies them;
    `closed` once when the stream's call is gone, however it ended. `stream` names the stream, unique within the
    client. Calls must be quick and must not raise: whatever an observer does, the client behaves the same."""

    def opened(self, stream: str, request: pb.SyncRequest) -> None: ...

    def received(self, stream: str, message: bytes) -> None: ...

    def closed(self, stream: str) -> None: ...
