"""One RPC, made by a real client library over any protocol a Laredo port speaks.

`Caller` calls a method by its full name ("/laredo.v1.TableSyncOAM/GetStatus") with grpcio (gRPC over HTTP/2,
cleartext or TLS) or with connectrpc, the Connect project's Python client (Connect over HTTP/1.1 or HTTP/2
with binary or JSON bodies, unary GET, and gRPC-Web), so a test states a protocol and compares outcomes.
Errors come back as `CallError(code, message)` whatever the protocol, with gRPC's code names.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf import descriptor_pool, message_factory
from google.protobuf.message import Message

PROTOCOLS = ("grpc", "connect-http1-proto", "connect-http1-json", "connect-http2-proto", "connect-http2-json",
             "grpc-web", "connect-get-json")


@dataclass(frozen=True)
class CallError(Exception):
    code: str  # gRPC code name: NOT_FOUND, INVALID_ARGUMENT, UNAUTHENTICATED, ...
    message: str

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


def method_types(full_method: str) -> tuple[type[Message], type[Message], bool]:
    """Request class, response class and whether the server streams, from the default descriptor pool."""
    service, _, name = full_method.lstrip("/").partition("/")
    descriptor = descriptor_pool.Default().FindServiceByName(service).FindMethodByName(name)
    return (message_factory.GetMessageClass(descriptor.input_type),
            message_factory.GetMessageClass(descriptor.output_type), descriptor.server_streaming)


@dataclass
class TlsClient:
    ca: bytes
    cert: bytes | None = None
    key: bytes | None = None
    server_name: str = "localhost"


@dataclass
class Caller:
    """Calls one address (host:port) over `protocol` (one of PROTOCOLS)."""

    address: str
    protocol: str = "grpc"
    tls: TlsClient | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float = 10.0

    async def unary(self, method: str, request: Message, response_type: type[Message] | None = None) -> Message:
        """`response_type` for a method the descriptor pool does not know (an unknown method, on purpose)."""
        if response_type is None:
            _, response_type, streaming = method_types(method)
            assert not streaming, f"{method} streams: use stream()"
        if self.protocol == "grpc":
            return await self._grpc_unary(method, request, response_type)
        client, info = self._connect(method, type(request), response_type, streaming=False)
        try:
            return await client.execute_unary(request=request, method=info, headers=dict(self.headers),
                                              use_get=self.protocol == "connect-get-json")
        except Exception as exc:  # noqa: BLE001 - mapped to one error type for every protocol
            raise _connect_error(exc) from exc

    async def stream(self, method: str, request: Message, *, limit: int | None = None,
                     until: Any = None) -> list[Message]:
        """The first `limit` responses (or all, or those up to the first one `until(message)` accepts)."""
        out: list[Message] = []
        async with contextlib.aclosing(self.iterate(method, request)) as messages:
            async for message in messages:
                out.append(message)
                if (limit is not None and len(out) >= limit) or (until is not None and until(message)):
                    break
        return out

    async def iterate(self, method: str, request: Message) -> AsyncIterator[Message]:
        request_type, response_type, streaming = method_types(method)
        assert streaming, f"{method} is unary: use unary()"
        if self.protocol == "grpc":
            async for message in self._grpc_stream(method, request, response_type):
                yield message
            return
        client, info = self._connect(method, request_type, response_type, streaming=True)
        try:
            async for message in client.execute_server_stream(request=request, method=info,
                                                              headers=dict(self.headers)):
                yield message
        except Exception as exc:  # noqa: BLE001 - not GeneratorExit or CancelledError: those are BaseExceptions
            raise _connect_error(exc) from exc

    # -- gRPC (grpcio) -------------------------------------------------------------------------------------
    def _channel(self) -> grpc.aio.Channel:
        if self.tls is None:
            return grpc.aio.insecure_channel(self.address)
        credentials = grpc.ssl_channel_credentials(self.tls.ca, self.tls.key, self.tls.cert)
        return grpc.aio.secure_channel(self.address, credentials,
                                       options=[("grpc.ssl_target_name_override", self.tls.server_name)])

    async def _grpc_unary(self, method: str, request: Message, response_type: type[Message]) -> Message:
        async with self._channel() as channel:
            call = channel.unary_unary(method, request_serializer=type(request).SerializeToString,
                                       response_deserializer=response_type.FromString)
            try:
                return await call(request, metadata=tuple(self.headers.items()), timeout=self.timeout)
            except grpc.aio.AioRpcError as exc:
                raise CallError(exc.code().name, exc.details() or "") from exc

    async def _grpc_stream(self, method: str, request: Message,
                           response_type: type[Message]) -> AsyncIterator[Message]:
        async with self._channel() as channel:
            call = channel.unary_stream(method, request_serializer=type(request).SerializeToString,
                                        response_deserializer=response_type.FromString)
            try:
                async for message in call(request, metadata=tuple(self.headers.items())):
                    yield message
            except grpc.aio.AioRpcError as exc:
                raise CallError(exc.code().name, exc.details() or "") from exc

    # -- Connect and gRPC-Web (connectrpc) -----------------------------------------------------------------
    def _connect(self, method: str, request_type: type[Message], response_type: type[Message], *,
                 streaming: bool) -> tuple[Any, Any]:
        from connectrpc.client import ConnectClient
        from connectrpc.compat import google_protobuf_binary_codec, google_protobuf_json_codec
        from connectrpc.method import IdempotencyLevel, MethodInfo, StreamType
        from connectrpc.protocol import ProtocolType
        from pyqwest import Client, HTTPTransport, HTTPVersion

        service, _, name = method.lstrip("/").partition("/")
        json = self.protocol.endswith("json")
        protocol = ProtocolType.GRPC_WEB if self.protocol.startswith("grpc-web") else ProtocolType.CONNECT
        version = HTTPVersion.HTTP2 if "http2" in self.protocol else HTTPVersion.HTTP1
        transport_args: dict[str, Any] = {"http_version": version}
        if self.tls is not None:
            transport_args.update(tls_ca_cert=self.tls.ca, tls_cert=self.tls.cert, tls_key=self.tls.key)
        scheme = "https" if self.tls is not None else "http"
        http = Client(HTTPTransport(**transport_args))
        client = ConnectClient(f"{scheme}://{self.address}", protocol=protocol, http_client=http,
                               codec=google_protobuf_json_codec() if json else google_protobuf_binary_codec(),
                               timeout_ms=int(self.timeout * 1000), send_compression=None)
        info = MethodInfo(name=name, service_name=service, input=request_type, output=response_type,
                          idempotency_level=IdempotencyLevel.NO_SIDE_EFFECTS,
                          stream_type=StreamType.SERVER_STREAM if streaming else StreamType.UNARY)
        return client, info


def _connect_error(exc: Exception) -> CallError:
    from connectrpc.errors import ConnectError

    if isinstance(exc, ConnectError):
        return CallError(exc.code.name.upper(), exc.message)
    return CallError("TRANSPORT", f"{type(exc).__name__}: {exc}")
