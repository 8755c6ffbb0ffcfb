"""The grpcio side of authentication: every call but health checks proves an identity with the role (and the
tables) its method needs, before the request is decoded or the handler runs.

Calls from every protocol reach grpcio through the front door as gRPC with the client's headers, so one check
gives the same answer on gRPC, Connect and gRPC-Web. Refusals are UNAUTHENTICATED (no or a bad credential) or
PERMISSION_DENIED (a known one without the role or tables), each logged once with the peer and credential name.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message

from laredo_core.auth.authenticator import Authenticator
from laredo_core.auth.identity import Identity
from laredo_core.auth.policy import Refusal, check_role, check_tables
from laredo_core.auth.rules import OPEN_METHODS, TableScope, every_table, method_rules
from laredo_core.auth.settings import AuthSettings
from laredo_core.frontdoor.codec import BAD_BODY, message_types, refusing_behaviour
from laredo_core.frontdoor.envoy_config import CODEC_HEADER

log = logging.getLogger(__name__)


def _metadata(pairs: Sequence[tuple[str, Any]] | None) -> dict[str, str]:
    """The first value of each text header (binary -bin headers are not credentials)."""
    out: dict[str, str] = {}
    for key, value in pairs or ():
        if isinstance(value, str):
            out.setdefault(key.lower(), value)
    return out


def _peer(metadata: Mapping[str, str], context: grpc.aio.ServicerContext) -> str:
    """The client's address: the door appends it last to x-forwarded-for; without a door, the socket's peer."""
    forwarded = metadata.get("x-forwarded-for", "")
    return forwarded.rsplit(",", 1)[-1].strip() if forwarded else context.peer()


class AuthInterceptor(grpc.aio.ServerInterceptor):
    """Checks every call against `settings`; the outermost interceptor (before the codec)."""

    def __init__(self, settings: AuthSettings, *, trust_client_cert_header: bool) -> None:
        self._authenticator = Authenticator(settings, trust_client_cert_header=trust_client_cert_header)
        self._rules = method_rules()

    async def intercept_service(self, continuation: Callable[..., Any],
                                details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        handler = await continuation(details)
        method = details.method
        if method in OPEN_METHODS:
            return handler
        metadata = _metadata(details.invocation_metadata)
        identity = self._authenticator.authenticate(metadata, method)
        if isinstance(identity, Refusal):
            return _refusing(handler, identity, method, metadata)
        if handler is None:
            return None  # no such method: grpcio answers UNIMPLEMENTED
        rule = self._rules.get(method)
        refusal = check_role(identity, method, rule)
        if refusal is not None:
            return _refusing(handler, refusal, method, metadata)
        if identity.tables is None or rule is None or rule.tables is None:
            return handler
        if rule.tables is every_table or handler.request_streaming:
            return _refusing(handler, check_tables(identity, method, None), method, metadata)
        return _checking_tables(handler, identity, method, rule.tables, metadata)


async def _abort(context: grpc.aio.ServicerContext, refusal: Refusal | None, method: str,
                 metadata: Mapping[str, str]) -> None:
    if refusal is None:
        return
    log.warning("refused %s from %s (credential %s): %s %s", method, _peer(metadata, context),
                refusal.credential or "none", refusal.kind.value, refusal.message)
    await context.abort(grpc.StatusCode[refusal.kind.value], refusal.message)


def _refusing(handler: grpc.RpcMethodHandler | None, refusal: Refusal | None, method: str,
              metadata: Mapping[str, str]) -> grpc.RpcMethodHandler:
    """A handler of the call's shape that only refuses (the request is never read)."""
    requests = handler is not None and handler.request_streaming
    responses = handler is not None and handler.response_streaming
    behaviour = refusing_behaviour(lambda context: _abort(context, refusal, method, metadata), responses)
    make = {(False, False): grpc.unary_unary_rpc_method_handler, (False, True): grpc.unary_stream_rpc_method_handler,
            (True, False): grpc.stream_unary_rpc_method_handler,
            (True, True): grpc.stream_stream_rpc_method_handler}[(requests, responses)]
    return make(behaviour)


def _checking_tables(handler: grpc.RpcMethodHandler, identity: Identity, method: str, scope: TableScope,
                     metadata: Mapping[str, str]) -> grpc.RpcMethodHandler:
    """The handler, after checking the tables its request names against a table-limited credential."""
    request_type = message_types(method)[0]  # type: ignore[index] - a method with a rule is in the pool
    json_call = metadata.get(CODEC_HEADER) == "json"

    def decode(request: Any) -> Message:
        """The request as a message, whatever form the inner interceptors left it in (proto or JSON bytes)."""
        if isinstance(request, Message):
            return request
        if json_call:
            return json_format.Parse(bytes(request).decode("utf-8") or "{}", request_type())
        return request_type.FromString(bytes(request))

    async def admitted(request: Any, context: grpc.aio.ServicerContext) -> None:
        try:
            tables = scope(decode(request))
        except BAD_BODY as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                f"{method}: the request body is not a valid message: {exc}")
        await _abort(context, check_tables(identity, method, tables), method, metadata)

    if not handler.response_streaming:
        inner = handler.unary_unary

        async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
            await admitted(request, context)
            return await inner(request, context)
        return handler._replace(unary_unary=unary)

    inner_stream = handler.unary_stream

    async def stream(request: Any, context: grpc.aio.ServicerContext) -> Any:
        await admitted(request, context)
        result = inner_stream(request, context)
        if inspect.isasyncgen(result):
            async for response in result:
                yield response
        else:
            await result
    return handler._replace(unary_stream=stream)


def build_auth_interceptor(settings: AuthSettings | None, *, client_cert_header_set: bool
                           ) -> AuthInterceptor | None:
    """The interceptor for `auth` settings; None without them (every call allowed)."""
    if settings is None:
        return None
    return AuthInterceptor(settings, trust_client_cert_header=client_cert_header_set)
