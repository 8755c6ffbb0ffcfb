"""OAM settings: the coordination store, the command timeout and the configured catalog; validated at start-up."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from laredo_kernel.changes import TableId
from laredo_core.config import ENDPOINT_KEYS, LaredoSettings, Reader, json_values, service_reader
from laredo_kernel.errors import ConfigError
from laredo_core.snapshots.config import StoreConfig, read_snapshot_store

from laredo_oam.domain.catalog import Catalog, ConfiguredSource, ConfiguredTable, ConfiguredTarget

DEFAULT_COMMAND_TIMEOUT = 10.0


@dataclass(frozen=True, slots=True)
class QueryRoutingConfig:
    """OAM's address also answers the Query service, sent on to ready query instances (front door only)."""

    enabled: bool = True
    refresh: float = 2.0  # how often the ready instances are read from the coordination store
    tls_ca: str = ""  # set: query instances are reached over TLS, their certificates signed by this CA
    tls_cert: str = ""  # OAM's client certificate, for query ports that require one
    tls_key: str = ""
    tls_server_name: str = ""  # the name their certificates carry, when it is not the address's host


@dataclass(frozen=True, slots=True)
class OamConfig:
    redis_url: str
    redis_key_prefix: str
    catalog: Catalog
    command_timeout: float = DEFAULT_COMMAND_TIMEOUT
    #: The snapshot store of each table whose replication-fanout target has a `snapshot` section.
    snapshot_stores: Mapping[TableId, StoreConfig] = field(default_factory=dict)
    #: The change stream WatchStatus reads row changes from (stream.nats_url, stream.subject_prefix).
    nats_urls: tuple[str, ...] = ()
    subject_prefix: str = "laredo"
    query_routing: QueryRoutingConfig = field(default_factory=QueryRoutingConfig)


def read_oam_config(settings: LaredoSettings) -> OamConfig:
    """The OAM section (`oam { command_timeout = 10s }`) and the catalog; ConfigError lists every problem."""
    problems: list[str] = []
    section = service_reader(settings.oam.options, "oam", problems, known=ENDPOINT_KEYS)
    timeout = section.duration("command_timeout", DEFAULT_COMMAND_TIMEOUT)
    if not timeout > 0 and not any("command_timeout" in p for p in problems):
        section.problem("command_timeout", f"must be a positive duration such as 10s, got {timeout:g}s")
    routing = _query_routing(section.section("query_routing"))
    section.check_unknown()
    stores = snapshot_stores(settings, problems)
    if problems:
        raise ConfigError(problems)
    return OamConfig(settings.redis.url, settings.redis.key_prefix, catalog_from(settings), timeout, stores,
                     nats_urls=settings.stream.nats_urls, subject_prefix=settings.stream.subject_prefix,
                     query_routing=routing)


def _query_routing(r: Reader) -> QueryRoutingConfig:
    """`oam.query_routing { enabled, refresh, tls { ca, cert, key, server_name } }`."""
    tls = r.section("tls")
    config = QueryRoutingConfig(
        enabled=r.boolean("enabled", True), refresh=r.duration("refresh", 2.0),
        tls_ca=tls.string("ca", ""), tls_cert=tls.string("cert", ""), tls_key=tls.string("key", ""),
        tls_server_name=tls.string("server_name", ""))
    if not config.refresh > 0:
        r.problem("refresh", f"must be a positive duration such as 2s, got {config.refresh:g}s")
    if bool(config.tls_cert) != bool(config.tls_key):
        tls.problem("cert", "cert and key go together: set both (the client certificate OAM presents) or neither")
    for key in ("ca", "cert", "key"):
        path = getattr(config, f"tls_{key}")
        if path and not Path(path).is_file():
            tls.problem(key, f"no file at {path!r}")
    if (config.tls_cert or config.tls_server_name) and not config.tls_ca:
        tls.problem("ca", "set ca, the CA that signs the query instances' certificates, to reach them over TLS")
    tls.check_unknown()
    r.check_unknown()
    return config


def snapshot_stores(settings: LaredoSettings, problems: list[str]) -> dict[TableId, StoreConfig]:
    """Each table's snapshot store, read from its replication-fanout target (the fan-out checks the rest)."""
    stores: dict[TableId, StoreConfig] = {}
    for table in settings.tables_with_target("replication-fanout"):
        for target in table.targets_of("replication-fanout"):
            if "snapshot" in target.options and table.table not in stores:
                snapshot = Reader(target.options, target.path, problems).section("snapshot")
                stores[table.table] = read_snapshot_store(snapshot)
    return stores


def catalog_from(settings: LaredoSettings) -> Catalog:
    # Source options shown by ListTables: never the connection string (it may hold a password).
    sources = tuple(
        ConfiguredSource(s.source_id, s.type, s.slot_mode == "stateful",
                         {"slot_mode": s.slot_mode, "slot_name": s.slot_name,
                          "publication_name": s.publication_name})
        for s in settings.sources.values())
    # Targets' options are shown (ListTables): as JSON values, durations in seconds.
    tables = tuple(ConfiguredTable(t.source_id, t.table, tuple(ConfiguredTarget(g.type, json_values(g.options))
                                                               for g in t.targets))
                   for t in settings.tables)
    return Catalog(sources, tables)
