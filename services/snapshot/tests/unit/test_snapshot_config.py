"""The snapshot section and the tables it compacts: read from the fan-out targets' snapshot sections."""

from __future__ import annotations

from pathlib import Path

import pytest

from laredo_kernel.changes import TableId
from laredo_core.config import load_settings
from laredo_kernel.errors import ConfigError
from laredo_snapshot.config import read_snapshot_config
from laredo_snapshot.main import build

ROOT = Path(__file__).resolve().parents[4]


def settings(tmp_path: Path, snapshot: str = "", target_snapshot: str = "", more_tables: str = ""):
    path = tmp_path / "laredo.conf"
    path.write_text(f"""
sources {{ pg {{ type = postgresql, connection = "host=127.0.0.1" }} }}
tables = [
  {{ source = pg, table = items, targets = [ {{ type = replication-fanout, {target_snapshot} }} ] }}
  {{ source = pg, table = plain, targets = [ {{ type = replication-fanout }} ] }}
  {more_tables}
]
stream {{ nats_url = "nats://nats:4222", subject_prefix = app }}
snapshot {{ {snapshot} }}
""")
    return load_settings(path, env={})


S3 = ('snapshot { store = s3, part_rows = 500, serializer = parquet, retention { keep_count = 3, max_age = 1h }, '
      'store_config { endpoint = "http://minio:9000", bucket = snaps, prefix = p } }')


def test_tables_are_the_fanout_targets_with_a_snapshot_section(tmp_path: Path) -> None:
    config = read_snapshot_config(settings(tmp_path, "interval = 10m, partitions = 4", S3))
    (job,) = config.tables
    assert job.table == TableId("public", "items") and job.source_id == "pg"
    assert (job.store.kind, job.store.endpoint, job.store.bucket, job.store.prefix, job.store.secure) == (
        "s3", "minio:9000", "snaps", "p", False)
    assert (job.keep_count, job.max_age, job.part_rows, job.format) == (3, 3600.0, 500, "parquet")
    assert (config.interval, config.partitions, config.engine) == (600.0, 4, "spark")
    assert config.nats_urls == ("nats://nats:4222",) and config.subject_prefix == "app"


def test_spark_settings_keep_dotted_names(tmp_path: Path) -> None:
    config = read_snapshot_config(settings(
        tmp_path, 'spark { master = "spark://spark-master:7077", driver_memory = 2g, '
                  'conf { spark.executor.memory = 3g, "spark.sql.shuffle.partitions" = 8 } }', S3))
    assert config.spark.master == "spark://spark-master:7077" and config.spark.driver_memory == "2g"
    assert config.spark.conf == {"spark.executor.memory": "3g", "spark.sql.shuffle.partitions": "8"}


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as error:
        read_snapshot_config(settings(tmp_path, "intervall = 5m, engine = flink, tables = [public.plain], "
                                                "interval = 0", S3))
    text = "\n".join(error.value.problems)
    assert "snapshot.intervall: unknown key" in text
    assert "snapshot.engine: expected one of spark, sequential" in text
    assert "snapshot.tables: 'public.plain' has no replication-fanout target with a snapshot section" in text
    assert "snapshot.interval: must be positive" in text


def test_without_any_snapshot_section_there_is_nothing_to_compact(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="nothing to compact"):
        read_snapshot_config(settings(tmp_path))


def test_the_example_configurations_are_valid() -> None:
    for path in (ROOT / "examples" / "laredo.conf", ROOT / "examples" / "compose" / "laredo.conf"):
        config = read_snapshot_config(load_settings(path, env={}))
        assert config.tables, path


def test_build_wires_without_connecting(tmp_path: Path) -> None:
    app = build(settings(tmp_path, "engine = sequential", S3))
    assert [c.job.table for c in app.service._compactions.values()] == [TableId("public", "items")]
    assert app.coordinator is None  # no redis section
