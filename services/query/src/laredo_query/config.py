"""Query settings: the indexed-memory targets, subscriber buffers and endpoints, validated at start-up."""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass

from laredo_kernel.changes import TableId
from laredo_core.config import (ENDPOINT_KEYS, LaredoSettings, Reader, ServiceEndpoint, TableSettings, TargetSettings,
                                service_reader)
from laredo_kernel.errors import ConfigError
from laredo_core.snapshots.config import StoreConfig, read_snapshot_store

from laredo_query.application.subscriptions import DEFAULT_BUFFER_SIZE, OverflowPolicy
from laredo_query.domain.indexes import LOOKUP, RESERVED_NAMES, IndexDefinition

TARGET_TYPE = "indexed-memory"
_INDEX_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
DEFAULT_STATUS_INTERVAL = 5.0
_HOST_PORT = re.compile(r"(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.-]+):\d{1,5}")


@dataclass(frozen=True, slots=True)
class TargetConfig:
    source_id: str
    table: TableId
    indexes: tuple[IndexDefinition, ...] = ()  # lookup_fields first, as the unique index named "lookup"
    snapshot_store: StoreConfig | None = None  # where restores and replays read the table's snapshots
    restore_on_start: bool = True  # start from the newest usable snapshot in snapshot_store (when there is one)


@dataclass(frozen=True, slots=True)
class QueryConfig:
    targets: tuple[TargetConfig, ...]
    nats_urls: tuple[str, ...]
    subject_prefix: str
    endpoint: ServiceEndpoint
    subscriber_buffer: int = DEFAULT_BUFFER_SIZE
    subscriber_overflow: OverflowPolicy = OverflowPolicy.DROP
    status_interval: float = DEFAULT_STATUS_INTERVAL
    # host:port at which OAM (and other instances) reach this instance's gRPC port; "" = derived from it
    advertise_address: str = ""


def read_query_config(settings: LaredoSettings) -> QueryConfig:
    """Every indexed-memory target with its indexes checked; raises ConfigError listing all problems."""
    problems: list[str] = []
    targets: dict[TableId, TargetConfig] = {}
    for table in settings.tables_with_target(TARGET_TYPE):
        for target in table.targets_of(TARGET_TYPE):
            config = TargetConfig(table.source_id, table.table, _indexes(target, problems),
                                  *_snapshot(table, target, problems))
            if config.table in targets:
                problems.append(f"{target.path}: a second {TARGET_TYPE} target for {config.table}; queries "
                                "name tables by schema.table, so keep one (it can hold several indexes)")
                continue
            targets[config.table] = config
    section = service_reader(settings.query.options, "query", problems, known=ENDPOINT_KEYS)
    buffer = section.integer("subscriber_buffer", DEFAULT_BUFFER_SIZE, minimum=1)
    overflow = section.string("subscriber_overflow", OverflowPolicy.DROP.value,
                              choices=tuple(p.value for p in OverflowPolicy))
    status_interval = section.duration("status_interval", DEFAULT_STATUS_INTERVAL)
    if not status_interval > 0 and not any("status_interval" in p for p in problems):
        section.problem("status_interval", f"must be a positive duration such as 5s, got {status_interval:g}s")
    advertise = section.string("advertise_address", "")
    if advertise and not _HOST_PORT.fullmatch(advertise):
        section.problem("advertise_address", f"expected host:port (how OAM reaches this instance), got {advertise!r}")
    section.check_unknown()
    if problems:
        raise ConfigError(problems)
    return QueryConfig(tuple(targets.values()), settings.stream.nats_urls, settings.stream.subject_prefix,
                       settings.query, buffer, OverflowPolicy(overflow), status_interval, advertise)


def advertised_address(config: QueryConfig, bound_port: int) -> str:
    """Where others reach this instance: the configured address, else the listen host (or, when it listens on
    every interface, this machine's name) with the bound port."""
    if config.advertise_address:
        return config.advertise_address
    host = config.endpoint.grpc_host
    if host in ("", "0.0.0.0", "::", "[::]"):
        host = socket.gethostname()
    return f"[{host}]:{bound_port}" if ":" in host else f"{host}:{bound_port}"


def _indexes(target: TargetSettings, problems: list[str]) -> tuple[IndexDefinition, ...]:
    r = Reader(target.options, target.path, problems)
    definitions: list[IndexDefinition] = []
    lookup_fields = _fields(r, "lookup_fields", required=False)
    if lookup_fields:
        definitions.append(IndexDefinition(LOOKUP, lookup_fields, unique=True))
    for index in r.sections("indexes"):
        name = index.string("name")
        fields = _fields(index, "fields", required=True)
        unique = index.boolean("unique", False)
        index.check_unknown()
        if name and not _INDEX_NAME.fullmatch(name):
            index.problem("name", f"{name!r} is not a valid index name: use letters, digits, '_', '.', '-', "
                                  "starting with a letter or '_'")
        elif name in RESERVED_NAMES:
            index.problem("name", f"{name!r} is reserved ('primary' is the primary key, 'lookup' the "
                                  "lookup_fields index); choose another name")
        elif name and any(d.name == name for d in definitions):
            index.problem("name", f"a second index named {name!r}; index names must be unique per table")
        elif name and fields:
            definitions.append(IndexDefinition(name, fields, unique))
    r.check_unknown(also_known=("snapshot",))
    return tuple(definitions)


def _snapshot(table: TableSettings, target: TargetSettings, problems: list[str]) -> tuple[StoreConfig | None, bool]:
    """The snapshot store and restore_on_start of the target: its own `snapshot { store, store_config }`, else
    the store of the table's fan-out target (whose other snapshot keys fan-out checks), else a `snapshot`
    section's default (local) store, else none."""
    r = Reader(target.options, target.path, problems)
    if not r.has("snapshot"):
        return _fanout_store(table), True
    section = r.section("snapshot")
    restore = section.boolean("restore_on_start", True)
    own = section.has("store") or section.has("store_config")
    store = (_fanout_store(table) if not own else None) or read_snapshot_store(section)
    section.check_unknown()
    return store, restore


def _fanout_store(table: TableSettings) -> StoreConfig | None:
    for fanout in table.targets_of("replication-fanout"):
        reader = Reader(fanout.options, fanout.path, [])
        if reader.has("snapshot"):
            return read_snapshot_store(reader.section("snapshot"))
    return None


def _fields(r: Reader, key: str, *, required: bool) -> tuple[str, ...]:
    if not required and not r.has(key):
        return ()
    fields = r.string_list(key) if required else r.string_list(key, [])
    if r.has(key) and not fields:
        r.problem(key, "must name at least one column, e.g. [email]")
    duplicates = sorted({f for f in fields if fields.count(f) > 1})
    if duplicates:
        r.problem(key, f"names column(s) {', '.join(duplicates)} more than once")
    return tuple(fields)
