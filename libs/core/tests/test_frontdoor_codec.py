"""The request decoder behind every port: JSON calls, malformed bodies and unexpected handler errors.

A real grpcio server with the interceptor and the health service's messages; calls made with grpcio.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest
from google.protobuf import json_format
from grpc_health.v1 import health_pb2

from laredo_core import redaction
from laredo_core.frontdoor.codec import CodecInterceptor
from laredo_core.frontdoor.envoy_config import CODEC_HEADER

CHECK = "/grpc.health.v1.Health/Check"
WATCH = "/grpc.health.v1.Health/Watch"
SECRET = "s3cr3t-password-value"


class Health:
    """Check answers; Watch writes with context.write (as the fan-out's Sync does); service "boom" raises."""

    async def check(self, request: health_pb2.HealthCheckRequest, context: grpc.aio.ServicerContext
                    ) -> health_pb2.HealthCheckResponse:
        if request.service == "boom":
            raise RuntimeError(f"cannot reach postgresql://app:{SECRET}@db/x")
        return health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.SERVING)

    async def watch(self, request: health_pb2.HealthCheckRequest, context: grpc.aio.ServicerContext) -> None:
        if request.service == "boom":
            raise RuntimeError(f"token {SECRET} refused")
        for status in (health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING):
            await context.write(health_pb2.HealthCheckResponse(status=status))


@pytest.fixture
async def address() -> AsyncIterator[str]:
    health = Health()
    server = grpc.aio.server(interceptors=[CodecInterceptor()])
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("grpc.health.v1.Health", {
        "Check": grpc.unary_unary_rpc_method_handler(
            health.check, request_deserializer=health_pb2.HealthCheckRequest.FromString,
            response_serializer=health_pb2.HealthCheckResponse.SerializeToString),
        "Watch": grpc.unary_stream_rpc_method_handler(
            health.watch, request_deserializer=health_pb2.HealthCheckRequest.FromString,
            response_serializer=health_pb2.HealthCheckResponse.SerializeToString),
    }),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    previous = redaction.active()
    redaction.activate(redaction.Redactor([SECRET]))
    try:
        yield f"127.0.0.1:{port}"
    finally:
        redaction.activate(previous)
        await server.stop(None)


def _raw(channel: grpc.aio.Channel, method: str, streaming: bool = False) -> object:
    if streaming:
        return channel.unary_stream(method, request_serializer=None, response_deserializer=None)
    return channel.unary_unary(method, request_serializer=None, response_deserializer=None)


async def test_json_calls_are_read_and_answered_in_json(address: str) -> None:
    async with grpc.aio.insecure_channel(address) as channel:
        answer = await _raw(channel, CHECK)(b'{"service": ""}', metadata=((CODEC_HEADER, "json"),))
        assert json_format.Parse(answer, health_pb2.HealthCheckResponse()).status == 1
        streamed = [json_format.Parse(m, health_pb2.HealthCheckResponse()).status
                    async for m in _raw(channel, WATCH, True)(b"{}", metadata=((CODEC_HEADER, "json"),))]
        assert streamed == [1, 2]
        # a field this server does not know is skipped, as in protobuf binary
        answer = await _raw(channel, CHECK)(b'{"service": "", "newer": 1}', metadata=((CODEC_HEADER, "json"),))
        assert json_format.Parse(answer, health_pb2.HealthCheckResponse()).status == 1


@pytest.mark.parametrize(("body", "json"), [(b"\xff\xff\xff", False), (b"{not json", True),
                                            (b'{"service": 7}', True)])
async def test_a_body_that_does_not_parse_is_invalid_argument_naming_the_method(address: str, body: bytes,
                                                                                json: bool) -> None:
    metadata = ((CODEC_HEADER, "json"),) if json else ()
    async with grpc.aio.insecure_channel(address) as channel:
        for method, streaming in ((CHECK, False), (WATCH, True)):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                call = _raw(channel, method, streaming)(body, metadata=metadata)
                if streaming:
                    [m async for m in call]
                else:
                    await call
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert method in (refused.value.details() or "")


async def test_an_unexpected_error_is_unknown_and_its_message_scrubbed(address: str) -> None:
    boom = health_pb2.HealthCheckRequest(service="boom").SerializeToString()
    async with grpc.aio.insecure_channel(address) as channel:
        for method, streaming in ((CHECK, False), (WATCH, True)):
            with pytest.raises(grpc.aio.AioRpcError) as failed:
                call = _raw(channel, method, streaming)(boom)
                if streaming:
                    [m async for m in call]
                else:
                    await call
            assert failed.value.code() == grpc.StatusCode.UNKNOWN
            details = failed.value.details() or ""
            assert "RuntimeError" in details and SECRET not in details and "***" in details
