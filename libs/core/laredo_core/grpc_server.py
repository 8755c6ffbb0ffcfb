"""A grpc.aio server with health checking and reflection, and services registered under alias names."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from laredo_core.auth.exposure import warn_if_exposed
from laredo_core.auth.interceptor import build_auth_interceptor
from laredo_core.frontdoor.codec import CodecInterceptor, OneRequestInterceptor
from laredo_core.frontdoor.envoy_config import Upstream
from laredo_core.frontdoor.envoy_process import EnvoyFrontDoor
from laredo_core.frontdoor.settings import FrontDoorSettings

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
    front_door: EnvoyFrontDoor | None = None

    async def set_serving(self, serving: bool) -> None:
        status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        for name in ("", *self.service_names):
            await self.health.set(name, status)

    async def stop(self, grace: float | None) -> None:
        await self.health.enter_graceful_shutdown()
        try:
            await self.server.stop(grace)
        finally:
            if self.front_door is not None:
                await self.front_door.stop()


async def start_grpc_server(host: str, port: int, registrations: Iterable[ServiceRegistration], *,
                            generic_handlers: Sequence[grpc.GenericRpcHandler] = (),
                            extra_service_names: Sequence[str] = (),
                            options: Sequence[tuple[str, Any]] = (),
                            front_door: FrontDoorSettings | None = None, name: str = "service",
                            interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
                            upstreams: Sequence[Upstream] = (), console: bool = False) -> GrpcServer:
    """Start serving; port 0 picks a free port. Health starts SERVING for every registered name.

    `front_door` (when enabled) puts Envoy on host:port and grpcio behind it; `upstreams` are further
    destinations that door routes to (OAM's Query routing); `console`: the door also routes GET /console/... to
    an HTTP server on `front_door.console_socket` (OAM's web console). Without it, grpcio serves host:port itself.
    """
    auth = front_door.auth if front_door is not None else None
    # before anything is started: reading the token secrets may fail (ConfigError)
    checks = build_auth_interceptor(auth, client_cert_header_set=front_door is not None and front_door.enabled
                                    and bool(front_door.tls.client_ca))
    door = EnvoyFrontDoor(front_door, host, port, name=name, upstreams=upstreams, console=console) \
        if front_door is not None and front_door.enabled else None
    server_options = list(options)
    if front_door is not None:
        server_options.append(("grpc.max_receive_message_length", front_door.max_request_bytes))
    server = grpc.aio.server(options=server_options, interceptors=[
        OneRequestInterceptor(), *([checks] if checks is not None else []), *interceptors, CodecInterceptor()])
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
    address = door.backend_address if door is not None else f"{host}:{port}"
    bound = server.add_insecure_port(address)
    if bound == 0:
        raise OSError(f"cannot bind gRPC server to {address}: address in use or not permitted")
    await server.start()
    if door is not None:
        try:
            bound = await door.start()
        except BaseException:
            await server.stop(None)
            await door.stop()
            raise
    warn_if_exposed(host, bound, name, authenticated=auth is not None)
    grpc_server = GrpcServer(server, bound, health_servicer, tuple(names), door)
    await grpc_server.set_serving(True)
    log.info("%s on %s:%d serving %s", "gRPC, Connect and gRPC-Web" if door else "gRPC", host, bound,
             ", ".join(names))
    return grpc_server
