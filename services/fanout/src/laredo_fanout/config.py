"""Fan-out settings: the replication-fanout targets and endpoints, validated at start-up; read by main.py."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from laredo_core.changes import TableId
from laredo_core.config import ENDPOINT_KEYS, LaredoSettings, Reader, TableSettings, TargetSettings, service_reader
from laredo_core.errors import ConfigError

log = logging.getLogger(__name__)

TARGET_TYPE = "replication-fanout"
#: Keys of later features: accepted so configurations written for them load, but ignored for now.
LATER_FEATURE_KEYS = ("snapshot", "client_buffer", "grpc")


@dataclass(frozen=True, slots=True)
class TargetConfig:
    source_id: str
    table: TableId
    journal_max_entries: int = 100_000
    journal_max_age: float = 24 * 3600.0  # seconds; 0 = no age limit
    heartbeat_interval: float = 5.0
    max_clients: int = 0  # 0 = unlimited


@dataclass(frozen=True, slots=True)
class FanoutConfig:
    targets: tuple[TargetConfig, ...]
    nats_urls: tuple[str, ...]
    subject_prefix: str
    grpc_host: str
    grpc_port: int
    health_host: str
    health_port: int
    drain_grace: float


def read_fanout_config(settings: LaredoSettings) -> FanoutConfig:
    """Every replication-fanout target, with its options checked; raises ConfigError listing all problems."""
    problems: list[str] = []
    targets: dict[TableId, TargetConfig] = {}
    for table in settings.tables_with_target(TARGET_TYPE):
        for target in table.targets_of(TARGET_TYPE):
            config = _target(table, target, problems)
            if config.table in targets:
                problems.append(f"{target.path}: a second {TARGET_TYPE} target for {config.table} "
                                f"(sources {targets[config.table].source_id!r} and {config.source_id!r}); "
                                "Sync routes by schema.table, keep one")
                continue
            targets[config.table] = config
    service_reader(settings.fanout.options, "fanout", problems, known=ENDPOINT_KEYS).check_unknown()
    if not targets:
        problems.append(f"tables: no table has a target of type {TARGET_TYPE}; the fan-out service has "
                        "nothing to serve (add targets = [{ type = replication-fanout }] to a table)")
    if problems:
        raise ConfigError(problems)
    endpoint = settings.fanout
    return FanoutConfig(
        targets=tuple(targets.values()),
        nats_urls=settings.stream.nats_urls,
        subject_prefix=settings.stream.subject_prefix,
        grpc_host=endpoint.grpc_host,
        grpc_port=endpoint.grpc_port,
        health_host=endpoint.health_host,
        health_port=endpoint.health_port,
        drain_grace=endpoint.drain_grace,
    )


def _target(table: TableSettings, target: TargetSettings, problems: list[str]) -> TargetConfig:
    r = Reader(target.options, target.path, problems)
    journal = r.section("journal")
    grpc_max_clients = _grpc_max_clients(r)
    config = TargetConfig(
        source_id=table.source_id,
        table=table.table,
        journal_max_entries=journal.integer("max_entries", 100_000, minimum=1),
        journal_max_age=journal.duration("max_age", 24 * 3600.0),
        heartbeat_interval=r.duration("heartbeat_interval", 5.0),
        max_clients=r.integer("max_clients", grpc_max_clients, minimum=0),
    )
    if config.heartbeat_interval <= 0:
        r.problem("heartbeat_interval", f"must be positive, got {config.heartbeat_interval}")
    journal.check_unknown()
    r.check_unknown(also_known=LATER_FEATURE_KEYS)
    ignored = [k for k in LATER_FEATURE_KEYS if k in target.options]
    if ignored:
        log.info("%s: %s not supported by this release yet; ignored", target.path, ", ".join(ignored))
    return config


def _grpc_max_clients(r: Reader) -> int:
    """The specification's layout puts max_clients under grpc { }; honour it when set there."""
    grpc = r.tree.get("grpc")
    if isinstance(grpc, dict) and "max_clients" in grpc:
        return Reader(grpc, r.key("grpc"), r.problems).integer("max_clients", 0, minimum=0)
    return 0
