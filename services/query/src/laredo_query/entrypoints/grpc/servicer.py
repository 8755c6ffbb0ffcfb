"""The query gRPC servicer: until the query use cases land, every RPC answers UNIMPLEMENTED, explicitly."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import grpc
from google.protobuf.descriptor import ServiceDescriptor
from laredo.v1 import query_pb2, query_pb2_grpc
from laredo_core.grpc_server import ServiceRegistration

#: The specification's name first, then the upstream Laredo alias; both serve the same servicer.
QUERY_SERVICE_NAMES = ("laredo.v1.TableSyncQuery", "laredo.v1.LaredoQueryService")

Handler = Callable[[Any, grpc.aio.ServicerContext], Awaitable[None]]


def not_yet_available(rpc: str) -> str:
    """The one status message every query RPC answers with for now."""
    return (f"{rpc} is not available yet: Laredo's query service (indexed lookups, row listing, "
            f"subscriptions) arrives in a later release; this server only answers health and reflection")


class NotYetAvailableServicer:
    """Has one async handler per RPC of the given services; each aborts with UNIMPLEMENTED.

    Built from the proto descriptors, so an RPC added to query.proto is covered without code here.
    """

    def __init__(self, services: tuple[ServiceDescriptor, ...]) -> None:
        for service in services:
            for method in service.methods:
                setattr(self, method.name, _unimplemented(method.name))


def _unimplemented(rpc: str) -> Handler:
    message = not_yet_available(rpc)

    async def handler(request: Any, context: grpc.aio.ServicerContext) -> None:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, message)

    handler.__name__ = rpc
    return handler


def query_registration() -> ServiceRegistration:
    """The servicer under both service names, ready for laredo_core.grpc_server.start_grpc_server."""
    services = tuple(query_pb2.DESCRIPTOR.services_by_name[name.rsplit(".", 1)[1]] for name in QUERY_SERVICE_NAMES)
    return ServiceRegistration(
        servicer=NotYetAvailableServicer(services),
        add_functions=(query_pb2_grpc.add_TableSyncQueryServicer_to_server,
                       query_pb2_grpc.add_LaredoQueryServiceServicer_to_server),
        service_names=QUERY_SERVICE_NAMES,
    )
