"""OAM settings: the coordination store, the command timeout and the configured catalog; validated at start-up."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from laredo_core.changes import TableId
from laredo_core.config import ENDPOINT_KEYS, LaredoSettings, Reader, service_reader
from laredo_core.errors import ConfigError
from laredo_core.snapshots.config import StoreConfig, read_snapshot_store

from laredo_oam.domain.catalog import Catalog, ConfiguredSource, ConfiguredTable, ConfiguredTarget

OAM_KEYS = ("command_timeout",)
DEFAULT_COMMAND_TIMEOUT = 10.0
#: Source options shown by ListTables; never the connection string (it may hold a password).
_SHOWN_SOURCE_KEYS = ("slot_mode", "slot_name", "publication_name")


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


def read_oam_config(settings: LaredoSettings) -> OamConfig:
    """The OAM section (`oam { command_timeout = 10s }`) and the catalog; ConfigError lists every problem."""
    problems: list[str] = []
    section = service_reader(settings.oam.options, "oam", problems, known=ENDPOINT_KEYS)
    timeout = section.duration("command_timeout", DEFAULT_COMMAND_TIMEOUT)
    if not timeout > 0 and not any("command_timeout" in p for p in problems):
        section.problem("command_timeout", f"must be a positive duration such as 10s, got {timeout:g}s")
    section.check_unknown()
    stores = snapshot_stores(settings, problems)
    if problems:
        raise ConfigError(problems)
    return OamConfig(settings.redis.url, settings.redis.key_prefix, catalog_from(settings), timeout, stores,
                     nats_urls=settings.stream.nats_urls, subject_prefix=settings.stream.subject_prefix)


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
    sources = tuple(
        ConfiguredSource(s.source_id, s.type, s.slot_mode == "stateful",
                         {"slot_mode": s.slot_mode, "slot_name": s.slot_name,
                          "publication_name": s.publication_name})
        for s in settings.sources.values())
    tables = tuple(ConfiguredTable(t.source_id, t.table, tuple(ConfiguredTarget(g.type, dict(g.options))
                                                               for g in t.targets))
                   for t in settings.tables)
    return Catalog(sources, tables)
