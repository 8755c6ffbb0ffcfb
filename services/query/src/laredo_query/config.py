"""Query settings: the indexed-memory targets, subscriber buffers and endpoints, validated at start-up."""

from __future__ import annotations

import re
from dataclasses import dataclass

from laredo_core.changes import TableId
from laredo_core.config import ENDPOINT_KEYS, LaredoSettings, Reader, ServiceEndpoint, TargetSettings, service_reader
from laredo_core.errors import ConfigError

from laredo_query.application.subscriptions import DEFAULT_BUFFER_SIZE, OverflowPolicy
from laredo_query.domain.indexes import LOOKUP, RESERVED_NAMES, IndexDefinition

TARGET_TYPE = "indexed-memory"
_INDEX_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
QUERY_KEYS = ("subscriber_buffer", "subscriber_overflow")


@dataclass(frozen=True, slots=True)
class TargetConfig:
    source_id: str
    table: TableId
    indexes: tuple[IndexDefinition, ...] = ()  # lookup_fields first, as the unique index named "lookup"


@dataclass(frozen=True, slots=True)
class QueryConfig:
    targets: tuple[TargetConfig, ...]
    nats_urls: tuple[str, ...]
    subject_prefix: str
    endpoint: ServiceEndpoint
    subscriber_buffer: int = DEFAULT_BUFFER_SIZE
    subscriber_overflow: OverflowPolicy = OverflowPolicy.DROP


def read_query_config(settings: LaredoSettings) -> QueryConfig:
    """Every indexed-memory target with its indexes checked; raises ConfigError listing all problems."""
    problems: list[str] = []
    targets: dict[TableId, TargetConfig] = {}
    for table in settings.tables_with_target(TARGET_TYPE):
        for target in table.targets_of(TARGET_TYPE):
            config = TargetConfig(table.source_id, table.table, _indexes(target, problems))
            if config.table in targets:
                problems.append(f"{target.path}: a second {TARGET_TYPE} target for {config.table}; queries "
                                "name tables by schema.table, so keep one (it can hold several indexes)")
                continue
            targets[config.table] = config
    section = service_reader(settings.query.options, "query", problems, known=ENDPOINT_KEYS)
    buffer = section.integer("subscriber_buffer", DEFAULT_BUFFER_SIZE, minimum=1)
    overflow = section.string("subscriber_overflow", OverflowPolicy.DROP.value,
                              choices=tuple(p.value for p in OverflowPolicy))
    section.check_unknown()
    if problems:
        raise ConfigError(problems)
    return QueryConfig(tuple(targets.values()), settings.stream.nats_urls, settings.stream.subject_prefix,
                       settings.query, buffer, OverflowPolicy(overflow))


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
    r.check_unknown()
    return tuple(definitions)


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
