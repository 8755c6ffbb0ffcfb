"""The whole Laredo configuration as frozen settings; every service reads the same file.

Each key, its default and meaning are listed in docs/configuration.md. Keys shared by services are
validated here. A service's own section (`ingest`, `fanout`, `query`, `oam`, `snapshot`) and a source's
section may hold further keys that only the owning service reads: they arrive as `options`, and that
service validates them (and reports unknown keys) with a Reader, passing the common keys as known.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import urlencode

from laredo_kernel.changes import TableId
from laredo_core.config.reader import Reader, load_tree
from laredo_core.frontdoor.settings import FrontDoorSettings, parse_front_door
from laredo_core.stream.nats_servers import NatsServers
from laredo_core.tls import ClientTls, read_client_tls

SOURCE_TYPES = ("postgresql", "pg")
#: Keys of a source section and of a service section validated here; the owning service checks the rest.
SOURCE_COMMON_KEYS = ("type", "connection", "slot_mode", "slot_name", "always_baseline", "publication", "baseline",
                      "status_interval", "reconnect")
ENDPOINT_KEYS = ("grpc", "health_host", "health_port", "instance_id", "drain_grace")
SLOT_MODES = ("stateful", "ephemeral")
TARGET_TYPES = ("replication-fanout", "indexed-memory")
EXPORTERS = ("none", "console", "otlp")
#: Ports listen on loopback unless told otherwise: reaching them from elsewhere is a choice (with `auth`).
DEFAULT_HOST = "127.0.0.1"


@dataclass(frozen=True, slots=True)
class ReconnectSettings:
    initial_backoff: float = 1.0
    max_backoff: float = 30.0
    multiplier: float = 2.0
    max_attempts: int = 0  # 0 = forever


@dataclass(frozen=True, slots=True)
class SourceSettings:
    source_id: str
    type: str
    connection: str
    slot_mode: str = "stateful"
    slot_name: str = ""
    always_baseline: bool = False
    publication_name: str = ""
    publication_create: bool = True
    baseline_chunk_rows: int = 2000
    status_interval: float = 10.0
    reconnect: ReconnectSettings = ReconnectSettings()
    options: Mapping[str, Any] = field(default_factory=dict, repr=False)  # the whole section, for ingest


@dataclass(frozen=True, slots=True)
class TargetSettings:
    type: str
    options: Mapping[str, Any] = field(default_factory=dict)  # read further by the owning service
    path: str = ""  # e.g. "tables[0].targets[1]", for error messages


@dataclass(frozen=True, slots=True)
class TableSettings:
    source_id: str
    table: TableId
    targets: tuple[TargetSettings, ...]

    def targets_of(self, target_type: str) -> tuple[TargetSettings, ...]:
        return tuple(t for t in self.targets if t.type == target_type)


@dataclass(frozen=True, slots=True)
class StreamSettings:
    nats_urls: NatsServers = NatsServers(("nats://127.0.0.1:4222",))  # with stream.tls and credentials
    subject_prefix: str = "laredo"
    replicas: int = 1
    max_age: float = 0.0  # 0 = keep forever
    max_bytes: int = -1
    duplicate_window: float = 120.0
    max_batch_changes: int = 1000
    max_batch_bytes: int = 512 * 1024
    max_pending_acks: int = 4000


@dataclass(frozen=True, slots=True)
class RedisSettings:
    url: str = "redis://127.0.0.1:6379/0"  # what clients connect with: redis.url plus redis.tls's files (see _redis)
    key_prefix: str = "laredo"
    tls: ClientTls = ClientTls()


@dataclass(frozen=True, slots=True)
class TelemetrySettings:
    exporter: str = "none"
    otlp_endpoint: str = "http://127.0.0.1:4317"
    otlp_protocol: str = "grpc"
    sample_ratio: float = 1.0
    service_namespace: str = "laredo"


@dataclass(frozen=True, slots=True)
class ServiceEndpoint:
    grpc_host: str = DEFAULT_HOST
    grpc_port: int = 0
    health_host: str = DEFAULT_HOST
    health_port: int = 0
    instance_id: str = ""
    drain_grace: float = 0.0
    options: Mapping[str, Any] = field(default_factory=dict, repr=False)  # the whole section, for its service


@dataclass(frozen=True, slots=True)
class LaredoSettings:
    sources: Mapping[str, SourceSettings]
    tables: tuple[TableSettings, ...]
    stream: StreamSettings
    redis: RedisSettings
    telemetry: TelemetrySettings
    ingest: ServiceEndpoint
    fanout: ServiceEndpoint
    query: ServiceEndpoint
    oam: ServiceEndpoint
    snapshot: Mapping[str, Any] = field(default_factory=dict, repr=False)  # read by the snapshot service
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)
    dead_letters: Mapping[str, Any] = field(default_factory=dict, repr=False)  # laredo_core.deadletters.config
    front_door: FrontDoorSettings = field(default_factory=FrontDoorSettings)  # front_door { } and tls { }

    def tables_with_target(self, target_type: str) -> tuple[TableSettings, ...]:
        return tuple(t for t in self.tables if t.targets_of(target_type))


def load_settings(path: str | Path | None, *, env: Mapping[str, str] | None = None,
                  sets: list[str] | None = None) -> LaredoSettings:
    """Load, override and validate; raises ConfigError listing every problem at once."""
    tree = load_tree(path, env=env, sets=sets)
    root = Reader(tree)
    settings = LaredoSettings(
        sources=_sources(root.section("sources")),
        tables=tuple(_table(r) for r in root.sections("tables")),
        stream=_stream(root.section("stream")),
        redis=_redis(root.section("redis")),
        telemetry=_telemetry(root.section("telemetry")),
        ingest=_endpoint(root.section("ingest"), grpc=False, health_port=8081),
        fanout=_endpoint(root.section("fanout"), grpc_port=4002, health_port=8082),
        query=_endpoint(root.section("query"), grpc_port=4003, health_port=8083),
        oam=_endpoint(root.section("oam"), grpc_port=_legacy_grpc_port(root), health_port=8084),
        snapshot=root.section("snapshot").tree,
        raw=tree,
        dead_letters=root.section("dead_letters").tree,
        front_door=parse_front_door(tree, root.problems),
    )
    for shared in ("front_door", "tls", "auth"):
        root.raw(shared, None)
    for table in settings.tables:
        if table.source_id not in settings.sources:
            known = ", ".join(settings.sources) or "none"
            root.problems.append(f"tables: {table.table} names source {table.source_id!r}, "
                                 f"which is not defined under sources (defined: {known})")
    root.check_unknown()
    root.raise_if_problems()
    return settings


def _sources(r: Reader) -> dict[str, SourceSettings]:
    result = {}
    for source_id in list(r.tree):
        s = r.section(source_id)
        slot_name = s.string("slot_name", f"laredo_{source_id}")
        publication = s.section("publication")
        baseline = s.section("baseline")
        reconnect = s.section("reconnect")
        result[source_id] = SourceSettings(
            options=s.tree,
            source_id=source_id,
            type=s.string("type", choices=SOURCE_TYPES),
            connection=s.string("connection"),
            slot_mode=s.string("slot_mode", "stateful", choices=SLOT_MODES),
            slot_name=slot_name,
            always_baseline=s.boolean("always_baseline", False),
            publication_name=publication.string("name", f"{slot_name}_pub"),
            publication_create=publication.boolean("create", True),
            baseline_chunk_rows=baseline.integer("chunk_rows", 2000, minimum=1),
            status_interval=s.duration("status_interval", 10.0),
            reconnect=ReconnectSettings(
                initial_backoff=reconnect.duration("initial_backoff", 1.0),
                max_backoff=reconnect.duration("max_backoff", 30.0),
                multiplier=reconnect.number("multiplier", 2.0, minimum=1.0),
                max_attempts=reconnect.integer("max_attempts", 0, minimum=0),
            ),
        )
        for sub in (baseline, reconnect):
            sub.check_unknown()
    return result


def _table(r: Reader) -> TableSettings:
    source_id, schema, name = r.string("source"), r.string("schema", "public"), r.string("table")
    targets = []
    for t in r.sections("targets"):
        target_type = t.string("type", choices=TARGET_TYPES)
        options = {k: v for k, v in t.tree.items() if k != "type"}
        targets.append(TargetSettings(target_type, options, t.path))
    if not targets:
        r.problem("targets", "at least one target is required (type = replication-fanout or indexed-memory)")
    r.check_unknown(also_known=("ttl", "validation"))
    return TableSettings(source_id, TableId(schema, name), tuple(targets))


def _stream(r: Reader) -> StreamSettings:
    urls = r.string_list("nats_url", ["nats://127.0.0.1:4222"])
    settings = StreamSettings(
        nats_urls=_nats_servers(r, urls),
        subject_prefix=r.string("subject_prefix", "laredo"),
        replicas=r.integer("replicas", 1, minimum=1, maximum=5),
        max_age=r.duration("max_age", 0.0),
        max_bytes=r.integer("max_bytes", -1, minimum=-1),
        duplicate_window=r.duration("duplicate_window", 120.0),
        max_batch_changes=r.integer("max_batch_changes", 1000, minimum=1),
        max_batch_bytes=r.size("max_batch_bytes", 512 * 1024),
        max_pending_acks=r.integer("max_pending_acks", 4000, minimum=1),
    )
    for url in urls:
        if not url.startswith(("nats://", "tls://", "ws://", "wss://")):
            r.problem("nats_url", f"expected a URL like nats://host:4222, got {url!r}")
    r.check_unknown()
    return settings


def _nats_servers(r: Reader, urls: list[str]) -> NatsServers:
    """`nats_url` with `tls { ca, cert, key }` and the credentials: `user` and `password`, or `token`."""
    servers = NatsServers(urls, read_client_tls(r.section("tls")), r.string("user", ""), r.string("password", ""),
                          r.string("token", ""))
    if servers.password and not servers.user:
        r.problem("password", "set user too (user and password go together)")
    if servers.token and servers.user:
        r.problem("token", "set either token or user and password, not both")
    return servers


def _redis(r: Reader) -> RedisSettings:
    configured = r.string("url", "redis://127.0.0.1:6379/0")
    tls = read_client_tls(r.section("tls"))
    settings = RedisSettings(_redis_url(configured, tls), r.string("key_prefix", "laredo"), tls)
    if not configured.startswith(("redis://", "rediss://", "unix://")):
        r.problem("url", f"expected a URL like redis://host:6379/0, got {configured!r}")
    elif tls.configured and not configured.startswith("rediss://"):
        r.problem("tls", f"TLS needs a rediss:// URL; redis.url is {configured.split('://')[0]}://")
    r.check_unknown()
    return settings


def _redis_url(url: str, tls: ClientTls) -> str:
    """The URL with redis.tls's files as the query parameters redis-py reads (ssl_ca_certs, ssl_certfile, ...)."""
    files = {"ssl_ca_certs": tls.ca, "ssl_certfile": tls.cert, "ssl_keyfile": tls.key}
    query = urlencode({name: path for name, path in files.items() if path})
    if not query or not url.startswith("rediss://"):
        return url
    return f"{url}{'&' if '?' in url else '?'}{query}"


def _telemetry(r: Reader) -> TelemetrySettings:
    settings = TelemetrySettings(
        exporter=r.string("exporter", "none", choices=EXPORTERS),
        otlp_endpoint=r.string("otlp_endpoint", "http://127.0.0.1:4317"),
        otlp_protocol=r.string("otlp_protocol", "grpc", choices=("grpc", "http")),
        sample_ratio=r.number("sample_ratio", 1.0, minimum=0.0, maximum=1.0),
        service_namespace=r.string("service_namespace", "laredo"),
    )
    r.check_unknown()
    return settings


def _endpoint(r: Reader, *, grpc: bool = True, grpc_port: int = 0, health_port: int = 0) -> ServiceEndpoint:
    g = r.section("grpc") if grpc else None
    return ServiceEndpoint(
        grpc_host=g.string("host", DEFAULT_HOST) if g else "",
        grpc_port=g.integer("port", grpc_port, minimum=0, maximum=65535) if g else 0,
        health_host=r.string("health_host", DEFAULT_HOST),
        health_port=r.integer("health_port", health_port, minimum=0, maximum=65535),
        instance_id=r.string("instance_id", ""),
        drain_grace=r.duration("drain_grace", 0.0),
        options=r.tree,
    )


def _legacy_grpc_port(root: Reader) -> int:
    """Upstream's top-level grpc.port names the OAM port; oam.grpc.port wins when both are set."""
    return root.section("grpc").integer("port", 4001, minimum=0, maximum=65535)


def service_reader(options: Mapping[str, Any], path: str, problems: list[str], *,
                   known: tuple[str, ...] = ()) -> Reader:
    """A Reader over a service's (or source's) own section, for the keys only that service reads.

    `known` keys count as read (they are validated by load_settings). Read the extra keys from the
    reader, then call `check_unknown()` so a typo in the section is reported with its path.
    """
    reader = Reader(options, path, problems)
    for key in known:
        reader.raw(key, None)
    if "grpc" in known and isinstance(options.get("grpc"), Mapping):
        reader.section("grpc").check_unknown(also_known=("host", "port"))
    return reader
