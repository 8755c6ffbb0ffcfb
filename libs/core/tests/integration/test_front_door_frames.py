"""What the front door grants the service it fronts: each call's window (front_door.limits.stream_window_bytes, 1 MiB
by default) and frames as large as that window, so a batched Sync message crosses the door as one frame.

The service here is an HTTP/2 server written with the h2 library on the door's backend socket: it records the
SETTINGS the door (a real Envoy) sends and answers a gRPC call with frames as large as those settings allow,
which a grpcio client must receive intact through the door.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace

import grpc
import h2.config
import h2.connection
import h2.events
import h2.settings
import pytest

from laredo_core.frontdoor.envoy_process import EnvoyFrontDoor
from laredo_core.frontdoor.settings import FrontDoorSettings

pytestmark = pytest.mark.integration

METHOD = "/laredo.test.v1.Frames/Stream"
MESSAGE = os.urandom(300_000)  # some batched Sync messages are this large; HTTP/2's default frame is 16 KiB


@dataclass
class Backend:
    """The service behind the door: what the door asked for, and the DATA frames sent to it."""

    settings: dict[int, int] = field(default_factory=dict)
    frames: list[int] = field(default_factory=list)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
        conn.initiate_connection()
        writer.write(conn.data_to_send())
        pending: dict[int, memoryview] = {}
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(65536):
                for event in conn.receive_data(data):
                    if isinstance(event, h2.events.RemoteSettingsChanged):
                        self.settings.update({int(k): v.new_value for k, v in event.changed_settings.items()})
                    elif isinstance(event, h2.events.StreamEnded):
                        conn.send_headers(event.stream_id, [(":status", "200"), ("content-type", "application/grpc")])
                        pending[event.stream_id] = memoryview(b"\0" + len(MESSAGE).to_bytes(4, "big") + MESSAGE)
                    elif isinstance(event, h2.events.DataReceived):
                        conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                for stream_id, rest in list(pending.items()):
                    pending[stream_id] = rest = self._send(conn, stream_id, rest)
                    if not rest:
                        conn.send_headers(stream_id, [("grpc-status", "0")], end_stream=True)
                        del pending[stream_id]
                writer.write(conn.data_to_send())
                await writer.drain()
        writer.close()

    def _send(self, conn: h2.connection.H2Connection, stream_id: int, rest: memoryview) -> memoryview:
        """As much of `rest` as the door's windows allow, each frame as large as its SETTINGS allow."""
        while rest:
            size = min(len(rest), conn.max_outbound_frame_size, conn.local_flow_control_window(stream_id))
            if size <= 0:
                break
            conn.send_data(stream_id, bytes(rest[:size]))
            self.frames.append(size)
            rest = rest[size:]
        return rest


@contextlib.asynccontextmanager
async def door_with_backend(settings: FrontDoorSettings) -> AsyncIterator[tuple[EnvoyFrontDoor, Backend]]:
    door, backend = EnvoyFrontDoor(settings, "127.0.0.1", 0, name="frames-test"), Backend()
    server = await asyncio.start_unix_server(backend.serve, path=door.backend_socket)
    try:
        await door.start()
        yield door, backend
    finally:
        await door.stop()
        server.close()


async def call_through(door: EnvoyFrontDoor) -> list[bytes]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{door.port}") as channel:
        call = channel.unary_stream(METHOD, request_serializer=lambda m: m, response_deserializer=lambda m: m)(b"")
        return [message async for message in call]


async def test_the_service_may_send_a_batched_message_as_one_frame() -> None:
    async with door_with_backend(FrontDoorSettings()) as (door, backend):
        assert await call_through(door) == [MESSAGE]
    window = FrontDoorSettings().stream_window_bytes
    assert window == 1024 * 1024
    assert backend.settings[h2.settings.SettingCodes.INITIAL_WINDOW_SIZE] == window
    assert backend.settings[h2.settings.SettingCodes.MAX_FRAME_SIZE] == window
    assert backend.frames[0] > len(MESSAGE), f"the message went in frames of {backend.frames}"


async def test_a_smaller_window_bounds_the_frames_too() -> None:
    settings = replace(FrontDoorSettings(), stream_window_bytes=64 * 1024)
    async with door_with_backend(settings) as (door, backend):
        assert await call_through(door) == [MESSAGE]
    assert backend.settings[h2.settings.SettingCodes.INITIAL_WINDOW_SIZE] == 64 * 1024
    assert backend.settings[h2.settings.SettingCodes.MAX_FRAME_SIZE] == 64 * 1024
    assert max(backend.frames) == 64 * 1024
