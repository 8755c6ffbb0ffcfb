"""Hand-made connections for the tests of what a front door refuses: a raw HTTP/2 client (the `h2` library's
state machine on an asyncio socket) that can send a broken gRPC frame or more streams than the server allows,
and plain sockets that connect and then say nothing, or half a request."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import h2.config
import h2.connection
import h2.events
import h2.settings


@dataclass
class StreamOutcome:
    headers: dict[str, str] = field(default_factory=dict)  # response headers and trailers
    data: bytearray = field(default_factory=bytearray)
    reset: int | None = None  # the RST_STREAM error code, when the server reset the stream
    ended: bool = False
    _messages: list[bytes] = field(default_factory=list)
    _parsed: int = 0  # bytes of `data` split into _messages so far

    @property
    def grpc_status(self) -> str | None:
        return self.headers.get("grpc-status")

    def messages(self) -> list[bytes]:
        """The whole gRPC messages received so far; each byte is split only once, however often this is asked
        while megabytes arrive."""
        new, used = _split_messages(self.data, self._parsed)
        self._messages.extend(new)
        self._parsed = used
        return self._messages


class RawH2:
    """One cleartext HTTP/2 connection (prior knowledge), driven by hand."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, authority: str) -> None:
        self.reader, self.writer, self.authority = reader, writer, authority
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.streams: dict[int, StreamOutcome] = {}
        self.closed_by_server = False
        self.settings_received = False
        self.goaway: tuple[int, bytes | None] | None = None  # the server's GOAWAY: error code, debug data
        self._pump: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()
        self.reading = asyncio.Event()  # cleared: the socket is not read (a client that stopped reading)
        self.reading.set()

    @classmethod
    @contextlib.asynccontextmanager
    async def connect(cls, address: str, *, window: int = 0) -> AsyncIterator[RawH2]:
        """`window`: the flow-control window to grant the server (connection and each stream), as a client that
        can take a lot at once (grpcio grows its window that far); 0 keeps HTTP/2's 65,535 bytes."""
        host, port = address.rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        raw = cls(reader, writer, address)
        raw.conn.initiate_connection()
        if window:
            raw.conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: window})
            raw.conn.increment_flow_control_window(window - raw.conn.inbound_flow_control_window)
        await raw.flush()
        raw._pump = asyncio.create_task(raw._read())
        try:
            await raw.wait_for(lambda: raw.settings_received, 5)
            yield raw
        finally:
            raw._pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await raw._pump
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    @property
    def server_max_streams(self) -> int | None:
        if h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS not in self.conn.remote_settings:
            return None
        return self.conn.remote_settings.max_concurrent_streams

    async def flush(self) -> None:
        self.writer.write(self.conn.data_to_send())
        await self.writer.drain()

    def _headers(self, path: str, content_type: str) -> list[tuple[str, str]]:
        return [(":method", "POST"), (":scheme", "http"), (":path", path), (":authority", self.authority),
                ("content-type", content_type), ("te", "trailers")]

    async def request(self, path: str, body: bytes, *, content_type: str = "application/grpc",
                      end: bool = True) -> int:
        """Open a stream and send `body` (ending the stream when `end`); returns the stream id."""
        stream_id = self.conn.get_next_available_stream_id()
        self.streams[stream_id] = StreamOutcome()
        self.conn.send_headers(stream_id, self._headers(path, content_type))
        self.conn.send_data(stream_id, body, end_stream=end)
        await self.flush()
        return stream_id

    async def request_past_the_limit(self, path: str, body: bytes) -> int:
        """A stream opened past the server's SETTINGS_MAX_CONCURRENT_STREAMS, as a client that ignores it would:
        the h2 library's own view of the limit is raised by one for this stream only."""
        code = h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS
        limit = self.conn.remote_settings._settings[code]  # noqa: SLF001 - the library has no knob to misbehave
        limit[0] += 1
        try:
            return await self.request(path, body)
        finally:
            limit[0] -= 1

    async def wait_for(self, condition: object, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not condition():  # type: ignore[operator]
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no such answer within {timeout}s; streams: {self.streams}")
            self._changed.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)

    async def finished(self, stream_id: int, timeout: float = 10) -> StreamOutcome:
        outcome = self.streams[stream_id]
        await self.wait_for(lambda: outcome.ended or outcome.reset is not None or self.closed_by_server, timeout)
        return outcome

    async def _read(self) -> None:
        while True:
            await self.reading.wait()
            data = await self.reader.read(65536)
            if not data:
                self.closed_by_server = True
                self._changed.set()
                return
            for event in self.conn.receive_data(data):
                self._on(event)
            with contextlib.suppress(ConnectionError):
                await self.flush()
            self._changed.set()

    def _on(self, event: h2.events.Event) -> None:
        outcome = self.streams.get(getattr(event, "stream_id", 0) or 0)
        if isinstance(event, (h2.events.ResponseReceived, h2.events.TrailersReceived)) and outcome:
            outcome.headers.update(dict(event.headers))  # type: ignore[arg-type]
        elif isinstance(event, h2.events.DataReceived) and outcome:
            outcome.data += event.data
            self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        elif isinstance(event, h2.events.StreamEnded) and outcome:
            outcome.ended = True
        elif isinstance(event, h2.events.StreamReset) and outcome:
            outcome.reset = int(event.error_code)
        elif isinstance(event, h2.events.RemoteSettingsChanged):
            self.settings_received = True
        elif isinstance(event, h2.events.ConnectionTerminated):
            self.closed_by_server = True
            self.goaway = (int(event.error_code), event.additional_data)


async def closed_after(address: str, send: bytes, timeout: float) -> tuple[float, int]:
    """Connect, send `send` (maybe nothing), then wait for the server to close; seconds until it did, and the
    connection's own port. Raises TimeoutError if the connection is still open after `timeout`."""
    host, port = address.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    own_port = writer.get_extra_info("sockname")[1]
    started = time.monotonic()
    try:
        if send:
            writer.write(send)
            await writer.drain()
        with contextlib.suppress(ConnectionError):
            while await asyncio.wait_for(reader.read(65536), timeout - (time.monotonic() - started)):
                pass  # what the server says before it closes (an HTTP 408) does not matter here
        return time.monotonic() - started, own_port
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


def grpc_frame(message: bytes) -> bytes:
    """One uncompressed gRPC length-prefixed message."""
    return b"\x00" + len(message).to_bytes(4, "big") + message


def _split_messages(data: bytes | bytearray, offset: int) -> tuple[list[bytes], int]:
    """The whole messages from `offset` on, and the offset after the last of them."""
    out = []
    while offset + 5 <= len(data):
        length = int.from_bytes(data[offset + 1:offset + 5], "big")
        if offset + 5 + length > len(data):
            break
        out.append(bytes(data[offset + 5:offset + 5 + length]))
        offset += 5 + length
    return out, offset
