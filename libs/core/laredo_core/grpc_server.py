"""A grpc.aio server with health checking and reflection, and services registered under alias names."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ServiceRegistration:
    """One servicer registered under every given full service name (spec name and upstream alias)."""

    servicer: Any
    add_functions: Sequence[Callable[[Any, grpc.aio.Server], None]]
    service_names: Sequence[str]


@dataclass(slots=True)
class GrpcServer:
    server: grpc.aio.Server
    port: int
    health: health.aio.HealthServicer
    service_names: tuple[str, ...]

    async def set_serving(self, serving: bool) -> None:
        status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        for name in ("", *self.service_names):
            await self.health.set(name, status)

    async def stop(self, grace: float | None) -> None:
        await self.health.enter_graceful_shutdown()
        await self.server.stop(grace)


async def start_grpc_server(host: str, port: int, registrations: Iterable[ServiceRegistration], *,
                            generic_handlers: Sequence[grpc.GenericRpcHandler] = (),
                            extra_service_names: Sequence[str] = (),
                            options: Sequence[tuple[str, Any]] = ()) -> GrpcServer:
    """Start serving; port 0 picks a free port. Health starts SERVING for every registered name."""
    server = grpc.aio.server(options=list(options))
    names: list[str] = list(extra_service_names)
    for reg in registrations:
        for add in reg.add_functions:
            add(reg.servicer, server)
        names.extend(reg.service_names)
    if generic_handlers:
        server.add_generic_rpc_handlers(tuple(generic_handlers))
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        (*names, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME), server
    )
    bound = server.add_insecure_port(f"{host}:{port}")
    if bound == 0:
        raise OSError(f"cannot bind gRPC server to {host}:{port}: address in use or not permitted")
    await server.start()
    grpc_server = GrpcServer(server, bound, health_servicer, tuple(names))
    await grpc_server.set_serving(True)
    log.info("gRPC on %s:%d serving %s", host, bound, ", ".join(names))
    return grpc_server
