"""A scripted OAM service for CLI tests: a real grpc.aio server on port 0 that records every request and
answers each RPC with a configured response, status error, or (WatchStatus) a scripted event stream."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf.message import Message
from laredo.v1 import oam_pb2, oam_pb2_grpc

OAM_METHODS = oam_pb2.DESCRIPTOR.services_by_name["TableSyncOAM"].methods


@dataclass
class Failure:
    code: grpc.StatusCode
    details: str


class FakeOam(oam_pb2_grpc.TableSyncOAMServicer):
    """Every TableSyncOAM RPC. Unary RPCs answer `responses[name]` (the empty response when unset; a list is
    answered in order, its last item repeating), after `delays[name]` seconds, or abort with `failures[name]`;
    WatchStatus sends `watch_events` and then stays open until the client leaves (`watch_end=True` ends it
    instead). `requests` records (name, request) in arrival order."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, Message]] = []
        self.responses: dict[str, Message | list[Message]] = {}
        self.failures: dict[str, Failure] = {}
        self.delays: dict[str, float] = {}
        self.watch_events: list[oam_pb2.WatchStatusResponse] = []
        self.watch_end = False
        self.watchers_left = asyncio.Event()
        for method in OAM_METHODS:
            if method.server_streaming:
                continue
            setattr(self, method.name, self._unary(method.name, method.output_type.full_name))

    def fail(self, rpc: str, code: grpc.StatusCode, details: str) -> None:
        self.failures[rpc] = Failure(code, details)

    def requests_of(self, rpc: str) -> list[Any]:
        return [request for name, request in self.requests if name == rpc]

    def _unary(self, name: str, response_type: str) -> Any:
        response_class = getattr(oam_pb2, response_type.rsplit(".", 1)[1])

        async def handler(request: Message, context: grpc.aio.ServicerContext) -> Message:
            self.requests.append((name, request))
            if name in self.delays:
                await asyncio.sleep(self.delays[name])  # a slow server, for deadline tests
            failure = self.failures.get(name)
            if failure is not None:
                await context.abort(failure.code, failure.details)
            answer = self.responses.get(name, response_class())
            if isinstance(answer, list):
                return answer.pop(0) if len(answer) > 1 else answer[0]
            return answer

        return handler

    async def WatchStatus(self, request: oam_pb2.WatchStatusRequest,  # noqa: N802 (gRPC method name)
                          context: grpc.aio.ServicerContext) -> AsyncIterator[oam_pb2.WatchStatusResponse]:
        self.requests.append(("WatchStatus", request))
        failure = self.failures.get("WatchStatus")
        if failure is not None:
            await context.abort(failure.code, failure.details)
        try:
            for event in self.watch_events:
                yield event
            if not self.watch_end:
                await asyncio.Event().wait()  # until the client cancels
        finally:
            self.watchers_left.set()


class MetadataRecorder(grpc.aio.ServerInterceptor):
    """Records (method, authorization header or None) of every call, whatever the service answers."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str | None]] = []

    async def intercept_service(self, continuation: Any, handler_call_details: grpc.HandlerCallDetails) -> Any:
        metadata = dict(handler_call_details.invocation_metadata or ())
        self.calls.append((handler_call_details.method.rsplit("/", 1)[1], metadata.get("authorization")))
        return await continuation(handler_call_details)

    def authorizations(self) -> list[str | None]:
        return [authorization for _, authorization in self.calls]


@dataclass
class FakeOamServer:
    servicer: FakeOam
    server: grpc.aio.Server
    port: int
    recorder: MetadataRecorder
    address: str = field(init=False)

    def __post_init__(self) -> None:
        self.address = f"127.0.0.1:{self.port}"


async def start_fake_oam(credentials: grpc.ServerCredentials | None = None) -> FakeOamServer:
    """On a free port, cleartext or TLS with `credentials`; every call's authorization header is recorded."""
    servicer, recorder = FakeOam(), MetadataRecorder()
    server = grpc.aio.server(interceptors=[recorder])
    oam_pb2_grpc.add_TableSyncOAMServicer_to_server(servicer, server)
    if credentials is None:
        port = server.add_insecure_port("127.0.0.1:0")
    else:
        port = server.add_secure_port("127.0.0.1:0", credentials)
    await server.start()
    return FakeOamServer(servicer, server, port, recorder)
