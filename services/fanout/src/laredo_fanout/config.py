"""Fan-out settings: the replication-fanout targets and endpoints, validated at start-up; read by main.py."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

from laredo_kernel.changes import TableId
from laredo_core.config import (ENDPOINT_KEYS, LaredoSettings, Reader, ServiceEndpoint, TableSettings, TargetSettings,
                                service_reader)
from laredo_core.config.reader import parse_duration
from laredo_kernel.errors import ConfigError
from laredo_core.snapshots.config import read_snapshot_format, read_snapshot_store

from laredo_fanout.application.snapshots import SnapshotPolicy
from laredo_fanout.application.table_replica import ReplicaLimits
from laredo_fanout.domain.client_buffer import BufferLimits, BufferPolicy

log = logging.getLogger(__name__)

TARGET_TYPE = "replication-fanout"


@dataclass(frozen=True, slots=True)
class TargetConfig:
    source_id: str
    table: TableId
    limits: ReplicaLimits
    snapshot: SnapshotPolicy | None = None  # None: no snapshots for this target


@dataclass(frozen=True, slots=True)
class FanoutConfig:
    targets: tuple[TargetConfig, ...]
    nats_urls: tuple[str, ...]
    subject_prefix: str
    endpoint: ServiceEndpoint  # the fanout section, its drain_grace overridden by --drain-grace
    status_interval: float = 5.0  # heartbeat of this instance's status to the coordination store


def read_fanout_config(settings: LaredoSettings, *, drain_grace: str | None = None) -> FanoutConfig:
    """Every replication-fanout target, with its options checked (drain_grace: the --drain-grace flag, which
    overrides fanout.drain_grace); raises ConfigError listing all problems."""
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
    section = service_reader(settings.fanout.options, "fanout", problems, known=ENDPOINT_KEYS)
    status_interval = section.duration("status_interval", 5.0)
    if status_interval <= 0:
        section.problem("status_interval", f"must be positive, got {status_interval}")
    section.check_unknown()
    if not targets:
        problems.append(f"tables: no table has a target of type {TARGET_TYPE}; the fan-out service has "
                        "nothing to serve (add targets = [{ type = replication-fanout }] to a table)")
    grace = _drain_grace(settings.fanout.drain_grace, drain_grace, problems)
    if problems:
        raise ConfigError(problems)
    return FanoutConfig(tuple(targets.values()), settings.stream.nats_urls, settings.stream.subject_prefix,
                        dataclasses.replace(settings.fanout, drain_grace=grace), status_interval)


def _drain_grace(configured: float, flag: str | None, problems: list[str]) -> float:
    """--drain-grace wins over fanout.drain_grace."""
    if flag is None:
        return configured
    parsed = parse_duration(flag)
    if parsed is None or parsed < 0:
        problems.append(f"--drain-grace: expected a duration such as 15s or 500ms, got {flag!r}")
        return configured
    return parsed


def _target(table: TableSettings, target: TargetSettings, problems: list[str]) -> TargetConfig:
    r = Reader(target.options, target.path, problems)
    journal = r.section("journal")
    grpc_max_clients = _grpc_max_clients(r)
    buffer = r.section("client_buffer")
    max_size = buffer.integer("max_size", 50_000, minimum=1)
    policy = buffer.string("policy", BufferPolicy.DROP_DISCONNECT.value, choices=tuple(p.value for p in BufferPolicy))
    catch_up = buffer.duration("catch_up_timeout", 300.0)
    limits = ReplicaLimits(
        journal_max_entries=journal.integer("max_entries", 100_000, minimum=1),
        journal_max_age=journal.duration("max_age", 24 * 3600.0),
        heartbeat_interval=r.duration("heartbeat_interval", 5.0),
        max_clients=r.integer("max_clients", grpc_max_clients, minimum=0),
        buffer=BufferLimits(max(1, max_size), BufferPolicy(policy), max(0.0, catch_up)),  # out of range: reported
        resume_wait=r.duration("resume_wait", 10.0),
    )
    config = TargetConfig(table.source_id, table.table, limits,
                          _snapshot(r.section("snapshot")) if r.has("snapshot") else None)
    if limits.heartbeat_interval <= 0:
        r.problem("heartbeat_interval", f"must be positive, got {limits.heartbeat_interval}")
    if catch_up < 0:
        buffer.problem("catch_up_timeout", f"must not be negative (0: no time limit), got {catch_up}")
    if limits.resume_wait < 0:
        r.problem("resume_wait", f"must not be negative (0: do not wait), got {limits.resume_wait}")
    journal.check_unknown()
    buffer.check_unknown()
    r.check_unknown(also_known=("grpc",))
    return config


def _snapshot(r: Reader) -> SnapshotPolicy:
    retention = r.section("retention")
    config = SnapshotPolicy(
        interval=r.duration("interval", 300.0),
        store=read_snapshot_store(r),
        keep_count=retention.integer("keep_count", 5, minimum=0),
        max_age=retention.duration("max_age", 0.0),
        part_rows=r.integer("part_rows", 100_000, minimum=1),
        restore_on_start=r.boolean("restore_on_start", True),
        format=read_snapshot_format(r),
    )
    retention.check_unknown()
    r.check_unknown()
    return config


def _grpc_max_clients(r: Reader) -> int:
    """The specification's layout puts max_clients under grpc { }; honour it when set there (grpc.port is
    accepted for compatibility: every target is served on fanout.grpc.port)."""
    grpc = r.tree.get("grpc")
    if not isinstance(grpc, dict):
        return 0
    reader = Reader(grpc, r.key("grpc"), r.problems)
    if "port" in grpc:
        reader.integer("port", 0, minimum=0)
        log.info("%s: per-target ports are not supported; the target is served on fanout.grpc.port", r.key("grpc"))
    max_clients = reader.integer("max_clients", 0, minimum=0)
    reader.check_unknown()
    return max_clients
