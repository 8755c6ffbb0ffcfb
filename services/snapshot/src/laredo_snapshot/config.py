"""Snapshot service settings: the `snapshot { ... }` section and the tables it compacts; read by main.py.

The tables are those whose replication-fanout target has a `snapshot` section (or the ones `snapshot.tables`
names among them): each is compacted into that section's store, with its retention and part size, so
fan-out instances restore from these snapshots and OAM lists them like fan-out's own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from laredo_kernel.changes import TableId
from laredo_core.config import LaredoSettings, Reader
from laredo_kernel.errors import ConfigError
from laredo_core.snapshots.config import read_snapshot_format, read_snapshot_store

from laredo_snapshot.domain.jobs import TableJob

SECTION = "snapshot"
DEFAULT_HEALTH_PORT = 8085
FANOUT_TARGET = "replication-fanout"


@dataclass(frozen=True, slots=True)
class SparkConfig:
    master: str = "local[*]"
    driver_memory: str = "1g"
    conf: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SnapshotConfig:
    tables: tuple[TableJob, ...]
    nats_urls: tuple[str, ...]
    subject_prefix: str
    interval: float = 3600.0
    run_on_start: bool = True
    engine: str = "spark"  # spark | sequential
    partitions: int = 0  # 0 = Spark's default parallelism
    spark: SparkConfig = field(default_factory=SparkConfig)
    health_host: str = "0.0.0.0"
    health_port: int = DEFAULT_HEALTH_PORT
    instance_id: str = ""
    status_interval: float = 5.0


def read_snapshot_config(settings: LaredoSettings) -> SnapshotConfig:
    """The snapshot section and the tables; raises ConfigError listing every problem at once."""
    problems: list[str] = []
    r = Reader(settings.snapshot, SECTION, problems)
    jobs = _table_jobs(settings, problems)
    config = SnapshotConfig(
        tables=_select(jobs, r.string_list("tables", []), r),
        nats_urls=settings.stream.nats_urls,
        subject_prefix=settings.stream.subject_prefix,
        interval=r.duration("interval", 3600.0),
        run_on_start=r.boolean("run_on_start", True),
        engine=r.string("engine", "spark", choices=("spark", "sequential")),
        partitions=r.integer("partitions", 0, minimum=0),
        spark=_spark(r.section("spark")),
        health_host=r.string("health_host", "0.0.0.0"),
        health_port=r.integer("health_port", DEFAULT_HEALTH_PORT, minimum=0, maximum=65535),
        instance_id=r.string("instance_id", ""),
        status_interval=r.duration("status_interval", 5.0),
    )
    if config.interval <= 0:
        r.problem("interval", f"must be positive (use --once for a single pass), got {config.interval:g}s")
    if config.status_interval <= 0:
        r.problem("status_interval", f"must be positive, got {config.status_interval:g}s")
    r.check_unknown()
    if not jobs:
        problems.append(f"tables: no {FANOUT_TARGET} target has a snapshot section, so the snapshot service has "
                        "nothing to compact (add snapshot { store = s3, store_config { ... } } to a target)")
    if problems:
        raise ConfigError(problems)
    return config


def _table_jobs(settings: LaredoSettings, problems: list[str]) -> dict[TableId, TableJob]:
    """Each table with a snapshot section on its replication-fanout target (fan-out checks that section's
    other keys: interval, restore_on_start)."""
    jobs: dict[TableId, TableJob] = {}
    for table in settings.tables_with_target(FANOUT_TARGET):
        for target in table.targets_of(FANOUT_TARGET):
            if "snapshot" not in target.options or table.table in jobs:
                continue
            snapshot = Reader(target.options, target.path, problems).section("snapshot")
            retention = snapshot.section("retention")
            jobs[table.table] = TableJob(
                source_id=table.source_id, table=table.table, store=read_snapshot_store(snapshot),
                keep_count=retention.integer("keep_count", 5, minimum=0),
                max_age=retention.duration("max_age", 0.0),
                part_rows=snapshot.integer("part_rows", 100_000, minimum=1), format=read_snapshot_format(snapshot))
    return jobs


def _select(jobs: dict[TableId, TableJob], wanted: list[str], r: Reader) -> tuple[TableJob, ...]:
    if not wanted:
        return tuple(jobs.values())
    by_name = {str(t): job for t, job in jobs.items()}
    selected = []
    for name in dict.fromkeys(wanted):
        if name in by_name:
            selected.append(by_name[name])
        else:
            r.problem("tables", f"{name!r} has no replication-fanout target with a snapshot section (those that "
                                f"have one: {', '.join(sorted(by_name)) or 'none'})")
    return tuple(selected)


def _spark(r: Reader) -> SparkConfig:
    conf = r.section("conf").tree
    config = SparkConfig(master=r.string("master", "local[*]"), driver_memory=r.string("driver_memory", "1g"),
                         conf=_flatten(conf))
    r.check_unknown()
    return config


def _flatten(tree: Mapping[str, object], prefix: str = "") -> dict[str, str]:
    """HOCON reads `spark.executor.memory = 2g` as nested sections; Spark wants the dotted names back."""
    flat: dict[str, str] = {}
    for name, value in tree.items():
        if isinstance(value, Mapping):
            flat.update(_flatten(value, f"{prefix}{name}."))
        else:
            flat[f"{prefix}{name}"] = str(value).lower() if isinstance(value, bool) else str(value)
    return flat
