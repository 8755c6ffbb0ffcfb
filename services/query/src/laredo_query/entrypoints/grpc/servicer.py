"""The Query service, registered under the specification's name and the upstream alias.

Every handler parses its request, calls one use case and returns pre-framed response bytes (row Structs
are serialized once per row version), so the response serializer is the identity.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from typing import Any, NoReturn

import grpc

from laredo.v1 import query_pb2 as pb
from laredo_core.grpc_errors import status_for

from laredo_query.application.queries import QueryService
from laredo_query.domain.errors import QueryError
from laredo_query.entrypoints.grpc import mappers
from laredo_query.ports import Clock

log = logging.getLogger(__name__)

#: The specification's name first, then the upstream Laredo alias; both serve the same servicer.
QUERY_SERVICE_NAMES = (
    pb.DESCRIPTOR.services_by_name["TableSyncQuery"].full_name,
    pb.DESCRIPTOR.services_by_name["LaredoQueryService"].full_name,
)


class QueryServicer:
    def __init__(self, service: QueryService, clock: Clock) -> None:
        self._service = service
        self._clock = clock

    async def lookup(self, request: pb.LookupRequest, context: grpc.aio.ServicerContext) -> bytes:
        return await self._answer(context, lambda: mappers.found_row(self._service.lookup(
            request.schema, request.table, request.index_name, mappers.key_values(request.key_values,
                                                                                  "key_values"))))

    async def lookup_all(self, request: pb.LookupAllRequest, context: grpc.aio.ServicerContext) -> bytes:
        return await self._answer(context, lambda: mappers.rows(self._service.lookup_all(
            request.schema, request.table, request.index_name, mappers.key_values(request.key_values,
                                                                                  "key_values"))))

    async def get_row(self, request: pb.GetRowRequest, context: grpc.aio.ServicerContext) -> bytes:
        return await self._answer(context, lambda: mappers.found_row(self._service.get_row(
            request.schema, request.table, request.primary_key,
            mappers.key_values(request.primary_key_values, "primary_key_values"))))

    async def list_rows(self, request: pb.ListRowsRequest, context: grpc.aio.ServicerContext) -> bytes:
        return await self._answer(context, lambda: mappers.row_page(self._service.list_rows(
            request.schema, request.table, request.page_size, request.page_token)))

    async def count_rows(self, request: pb.CountRowsRequest, context: grpc.aio.ServicerContext) -> bytes:
        return await self._answer(context, lambda: mappers.count(self._service.count_rows(
            request.schema, request.table)))

    async def subscribe(self, request: pb.SubscribeRequest,
                        context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        try:
            stream = self._service.subscribe(request.schema, request.table, request.replay_existing)
        except QueryError as exc:
            await _abort(context, exc)
        try:
            if stream.replay:
                now_us = int(self._clock.now() * 1_000_000)
                for row in stream.replay:
                    yield mappers.replayed_row(row, now_us)
            next_event = stream.subscription.next
            while True:
                yield mappers.change_event(await next_event())
        except QueryError as exc:
            await _abort(context, exc)
        finally:
            stream.close()

    async def _answer(self, context: grpc.aio.ServicerContext, answer: Callable[[], bytes]) -> bytes:
        try:
            return answer()
        except QueryError as exc:
            await _abort(context, exc)


async def _abort(context: grpc.aio.ServicerContext, error: QueryError) -> NoReturn:
    code, details = status_for(error)
    if code is grpc.StatusCode.INTERNAL:
        log.error("query failed: %s", details)
    await context.abort(code, details)
    raise AssertionError("unreachable: context.abort raises")


def _identity(message: bytes) -> bytes:
    return message


def generic_handlers(servicer: QueryServicer) -> list[grpc.GenericRpcHandler]:
    """One handler per service name, both backed by the same servicer."""
    unary = [("Lookup", servicer.lookup, pb.LookupRequest), ("LookupAll", servicer.lookup_all, pb.LookupAllRequest),
             ("GetRow", servicer.get_row, pb.GetRowRequest), ("ListRows", servicer.list_rows, pb.ListRowsRequest),
             ("CountRows", servicer.count_rows, pb.CountRowsRequest)]
    methods: dict[str, Any] = {
        name: grpc.unary_unary_rpc_method_handler(handler, request_deserializer=request.FromString,
                                                  response_serializer=_identity)
        for name, handler, request in unary
    }
    methods["Subscribe"] = grpc.unary_stream_rpc_method_handler(
        servicer.subscribe, request_deserializer=pb.SubscribeRequest.FromString, response_serializer=_identity)
    return [grpc.method_handlers_generic_handler(name, methods) for name in QUERY_SERVICE_NAMES]
