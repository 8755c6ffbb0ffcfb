"""Requests as the front door delivers them: protobuf or JSON (Connect and gRPC-Web JSON), checked at the door.

A grpcio server interceptor. Calls that arrive with `x-laredo-codec: json` are read and answered in the proto3
JSON mapping; every request body that does not parse is refused with INVALID_ARGUMENT naming the message type,
instead of grpcio's INTERNAL "Exception deserializing request". Handlers are otherwise untouched: a proto call's
responses (the fan-out's pre-serialized ones too) go out exactly as the handler makes them. An exception a
handler did not expect is answered UNKNOWN with its message scrubbed of configured secrets (laredo_core.redaction).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from functools import lru_cache
from typing import Any

import grpc
from google.protobuf import descriptor_pool, json_format, message_factory
from google.protobuf.message import DecodeError, Message

from laredo_core import redaction
from laredo_core.frontdoor.envoy_config import CODEC_HEADER

log = logging.getLogger(__name__)


@lru_cache(maxsize=512)
def message_types(method: str) -> tuple[type[Message], type[Message]] | None:
    """The request and response classes of "/package.Service/Method", from the default descriptor pool."""
    service, _, name = method.lstrip("/").partition("/")
    try:
        descriptor = descriptor_pool.Default().FindServiceByName(service).FindMethodByName(name)
    except KeyError:
        return None
    if descriptor is None:
        return None
    return (message_factory.GetMessageClass(descriptor.input_type),
            message_factory.GetMessageClass(descriptor.output_type))


def _request_type(method: str, handler: grpc.RpcMethodHandler) -> type[Message] | None:
    types = message_types(method)
    if types is not None:
        return types[0]
    owner = getattr(handler.request_deserializer, "__self__", None)
    return owner if isinstance(owner, type) and issubclass(owner, Message) else None


#: What a handler raises on purpose (context.abort) or on the way out; everything else is unexpected.
_PASS_THROUGH = (grpc.aio.AbortError, grpc.aio.UsageError, GeneratorExit)
BAD_BODY = (DecodeError, json_format.ParseError, UnicodeDecodeError, ValueError, TypeError)


def refusing_behaviour(abort: Callable[[grpc.aio.ServicerContext], Awaitable[None]],
                       streaming: bool) -> Callable[..., Any]:
    """A behaviour of the call's response shape that never reads the request: it only runs `abort`."""
    if streaming:
        async def refuse_stream(_: Any, context: grpc.aio.ServicerContext) -> Any:
            await abort(context)
            yield  # pragma: no cover - abort raises
        return refuse_stream

    async def refuse(_: Any, context: grpc.aio.ServicerContext) -> Any:
        await abort(context)
    return refuse


def _decoded(method: str, handler: grpc.RpcMethodHandler, parse: Callable[[bytes], Any]) -> Callable[..., Any]:
    """The handler's behaviour, taking the raw body and decoding it first: a bad body becomes INVALID_ARGUMENT.

    grpc.aio runs only coroutine and async-generator functions on the event loop; the wrapper keeps the
    original's shape, so a stream written with context.write stays one (its writes keep their flow control).
    """
    async def unexpected(context: grpc.aio.ServicerContext, exc: Exception) -> None:
        # grpcio would send "Unexpected <class>: <message>" as it is; the message may quote configuration
        text = redaction.scrub(f"{method} failed unexpectedly: {type(exc).__name__}: {exc}")
        log.error("%s", text, exc_info=exc)
        await context.abort(grpc.StatusCode.UNKNOWN, text)

    async def parsed(raw: bytes, context: grpc.aio.ServicerContext) -> Any:
        try:
            return parse(raw)
        except BAD_BODY as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                f"{method}: the request body is not a valid message: {exc}")

    behaviour = _target(handler)
    if not handler.response_streaming or inspect.iscoroutinefunction(behaviour):
        # unary, or a stream written with context.write (the fan-out's Sync): a coroutine like the original
        async def call(raw: bytes, context: grpc.aio.ServicerContext) -> Any:
            request = await parsed(raw, context)
            try:
                return await behaviour(request, context)
            except _PASS_THROUGH:
                raise
            except Exception as exc:  # noqa: BLE001 - reported scrubbed, as grpcio would report it raw
                await unexpected(context, exc)
        return call

    async def stream(raw: bytes, context: grpc.aio.ServicerContext) -> Any:
        request = await parsed(raw, context)
        try:
            async for response in behaviour(request, context):
                yield response
        except _PASS_THROUGH:
            raise
        except Exception as exc:  # noqa: BLE001
            await unexpected(context, exc)
    return stream


class CodecInterceptor(grpc.aio.ServerInterceptor):
    """Proto or JSON per call; malformed bodies refused with INVALID_ARGUMENT. Stream requests pass through."""

    async def intercept_service(self, continuation: Callable[..., Any],
                                details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        handler = await continuation(details)
        if handler is None or handler.request_streaming:
            return handler
        method, original = details.method, handler.request_deserializer
        if not any(k == CODEC_HEADER and v == "json" for k, v in details.invocation_metadata or ()):
            return handler if original is None else _serving(handler, _decoded(method, handler, original))
        request_type, types = _request_type(method, handler), message_types(method)
        if request_type is None or types is None:
            return _serving(handler, refusing_behaviour(lambda context: context.abort(
                grpc.StatusCode.UNIMPLEMENTED, f"{method} does not take JSON; use application/proto"),
                handler.response_streaming), response_serializer=None)
        response_type = types[1]
        serialize = handler.response_serializer

        def parse(raw: bytes) -> Any:
            # unknown fields are skipped, as protobuf binary does: newer clients keep working
            message = json_format.Parse(raw.decode("utf-8") or "{}", request_type(), ignore_unknown_fields=True)
            return original(message.SerializeToString()) if original else message

        def to_json(response: Any) -> bytes:
            if not isinstance(response, Message) or not isinstance(response, response_type):
                response = response_type.FromString(serialize(response) if serialize else response)
            return json_format.MessageToJson(response, indent=None).encode()

        return _serving(handler, _decoded(method, handler, parse), response_serializer=to_json)


def _target(handler: grpc.RpcMethodHandler) -> Callable[..., Any]:
    return handler.unary_stream if handler.response_streaming else handler.unary_unary


def _serving(handler: grpc.RpcMethodHandler, behaviour: Callable[..., Any], **fields: Any) -> grpc.RpcMethodHandler:
    """The handler with `behaviour`, which takes the request's raw body, in place of its own."""
    target = "unary_stream" if handler.response_streaming else "unary_unary"
    return handler._replace(request_deserializer=None, **fields, **{target: behaviour})


class OneRequestInterceptor(grpc.aio.ServerInterceptor):
    """Serves every one-request call as a request stream whose first message is the request.

    grpcio's own one-request handling drops a call whose request never arrives whole (a length prefix that
    promises more bytes than the stream carries before it ends) without answering it: the client waits until
    its deadline. Read as a stream, the end of the request is seen and answered with INVALID_ARGUMENT. On the
    wire the two are the same; the outermost interceptor, so every other one sees the call's own shape.
    """

    async def intercept_service(self, continuation: Callable[..., Any],
                                details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        handler = await continuation(details)
        if handler is None or handler.request_streaming:
            return handler
        served = _one_request(_target(handler), details.method)
        if handler.response_streaming:
            return handler._replace(request_streaming=True, unary_stream=None, stream_stream=served)
        return handler._replace(request_streaming=True, unary_unary=None, stream_unary=served)


def _one_request(behaviour: Callable[..., Any], method: str) -> Callable[..., Any]:
    """The behaviour, reading its one request from a request stream (OneRequestInterceptor); keeps its shape."""
    async def only(_: Any, context: grpc.aio.ServicerContext) -> Any:
        # context.read, not the request iterator: that one is an async generator, which the event loop closes
        # with a task of its own when a call leaves it unfinished
        raw = await context.read()
        if raw is not grpc.aio.EOF:
            return raw
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                            f"{method}: the request ended before its message was complete (a message's length "
                            f"prefix promised more bytes than were sent) or carried no message")

    if inspect.isasyncgenfunction(behaviour):
        async def stream(requests: Any, context: grpc.aio.ServicerContext) -> Any:
            async for response in behaviour(await only(requests, context), context):
                yield response
        return stream

    async def call(requests: Any, context: grpc.aio.ServicerContext) -> Any:
        result = behaviour(await only(requests, context), context)
        return await result if inspect.isawaitable(result) else result
    return call
