"""One Sync call on its own channel: reads raw messages with a silence deadline and applies them (StreamApplier),
which decodes their bytes by hand (laredo_kernel.sync_wire) rather than through generated messages first."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import grpc

from laredo.replication.v1 import replication_pb2 as pb

from laredo_client.channels import open_channel
from laredo_client.client_replica import ClientReplica
from laredo_client.credentials import call_metadata
from laredo_client.errors import ServerChanged, StreamSilent
from laredo_client.options import ClientOptions
from laredo_client.stats import ClientStats
from laredo_client.stream_applier import StreamApplier

log = logging.getLogger(__name__)
T = TypeVar("T")

SYNC_METHOD = "/laredo.replication.v1.TableSyncReplication/Sync"
_OWN_CONNECTION = "grpc.use_local_subchannel_pool"


class SyncStream(StreamApplier):
    """Consumes one Sync stream into a shared ClientReplica; `primary` streams also advance its cursor."""

    def __init__(self, options: ClientOptions, replica: ClientReplica, request: pb.SyncRequest, *,
                 name: str, stats: ClientStats, on_caught_up: Callable[[SyncStream], None],
                 primary: bool = False) -> None:
        super().__init__(options, replica, name=name, stats=stats, on_caught_up=on_caught_up, primary=primary)
        self.request = request
        self.task: asyncio.Task[None] | None = None

    def start(self) -> asyncio.Task[None]:
        self.stats.streams_opened += 1
        self.task = asyncio.create_task(self._run(), name=self.name)
        self.task.add_done_callback(lambda _: self.detach())  # however it ends, even cancelled before it ran
        return self.task

    async def close(self) -> None:
        """Cancel the call (the server sees the client leave) and wait until it is gone."""
        if self.task is not None and not self.task.done():
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)

    async def _run(self) -> None:
        """Apply the stream until the server ends it cleanly (returns) or it fails (raises)."""
        observer = self.options.stream_observer
        # A new channel and a new connection per stream, so a load balancer can route a re-dial elsewhere: by
        # default gRPC shares one connection among all channels to the same address in a process.
        async with open_channel(self.options, (_OWN_CONNECTION, 1)) as channel:
            sync = channel.unary_stream(SYNC_METHOD, request_serializer=pb.SyncRequest.SerializeToString,
                                        response_deserializer=None)  # bytes: handle_bytes decodes them
            if observer is not None:
                observer.opened(self.name, self.request)
            call = sync(self.request, metadata=call_metadata(self.options.token))
            try:
                while True:
                    message = await self._within_deadline(call.read())
                    if message is grpc.aio.EOF:
                        return
                    if observer is not None:
                        observer.received(self.name, message)
                    self.handle_bytes(message)
            finally:
                call.cancel()
                if observer is not None:
                    observer.closed(self.name)

    async def _within_deadline(self, pending: Awaitable[T]) -> T:
        timeout = self.options.heartbeat_timeout
        try:
            async with asyncio.timeout(timeout):
                return await pending
        except TimeoutError:
            self.stats.silent_streams += 1
            raise StreamSilent(f"{self.name}: no message from {self.options.address} for {timeout:g}s "
                               f"(heartbeats included); treating the connection as dead") from None

    def _on_handshake(self, handshake: pb.SyncHandshake) -> None:
        """A server that knows the instance identity extension resumes from our sequence only if it issued it,
        and says who it is; one that does not name itself may have taken another instance's sequence for its
        own, so nothing of this stream is applied."""
        sequence = self.request.last_known_sequence
        if sequence and not (handshake.instance_id and handshake.journal_epoch):
            raise ServerChanged(f"{self.name}: resumed by sequence {sequence} of instance "
                                f"{self.request.last_known_instance_id} but the server does not say which journal "
                                f"numbers its sequences, so it may have resumed after another instance's sequence")
        super()._on_handshake(handshake)

