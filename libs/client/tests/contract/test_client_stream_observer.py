"""A StreamObserver sees every stream a LaredoClient opens: its request, each message as sent, and its end."""

from __future__ import annotations

from laredo.replication.v1 import replication_pb2 as pb
from laredo_testing.eventually import eventually

from laredo_client import StreamObserver
from libs.client.tests.contract.test_client_sync_protocol import MakeClient
from libs.client.tests.scripted_server import (
    ScriptedReplicationServer,
    entry,
    handshake,
    heartbeat,
    hold,
    pos,
    row,
    snapshot,
)


class RecordingObserver:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, object]] = []

    def opened(self, stream: str, request: pb.SyncRequest) -> None:
        self.events.append(("opened", stream, request.last_known_source_position))

    def received(self, stream: str, message: bytes) -> None:
        self.events.append(("received", stream, pb.SyncResponse.FromString(message).WhichOneof("message")))

    def closed(self, stream: str) -> None:
        self.events.append(("closed", stream, None))


async def test_observer_sees_each_stream_request_messages_and_end(scripted_server: ScriptedReplicationServer,
                                                                  make_client: MakeClient) -> None:
    scripted_server.serve(handshake("FULL_SNAPSHOT", current=1, resume=1),
                          snapshot([row(1)], sequence=1, position=pos(1)),
                          entry(2, pos(2), "INSERT", new=row(2)))  # then a clean end: the client reconnects
    scripted_server.serve(handshake("DELTA", current=2, resume=2), heartbeat(2), hold())
    observer = RecordingObserver()
    typed: StreamObserver = observer
    client = make_client(stream_observer=typed)
    await client.start()
    await eventually(lambda: len(scripted_server.calls) == 2 and client.ready and
                     ("received", "public.items#2", "heartbeat") in observer.events,
                     timeout=10, what="the second stream live")
    first, second = "public.items#1", "public.items#2"
    assert observer.events == [
        ("opened", first, ""), ("received", first, "handshake"), ("received", first, "snapshot_begin"),
        ("received", first, "snapshot_row"), ("received", first, "snapshot_end"),
        ("received", first, "journal_entry"), ("closed", first, None),
        ("opened", second, pos(2)), ("received", second, "handshake"), ("received", second, "heartbeat"),
    ]
    assert client.get(2) == row(2), "observing changed nothing the client does"
    await client.stop()
    assert observer.events[-1] == ("closed", second, None)
