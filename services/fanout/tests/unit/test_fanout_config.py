"""Fan-out target options: defaults, values, later-feature keys accepted, every problem reported at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from laredo_kernel.changes import TableId
from laredo_core.config import LaredoSettings, load_settings
from laredo_kernel.errors import ConfigError
from laredo_core.snapshots.config import StoreConfig
from laredo_fanout.application.snapshots import SnapshotPolicy
from laredo_fanout.config import read_fanout_config
from laredo_fanout.domain.client_buffer import BufferLimits, BufferPolicy

ROOT = Path(__file__).resolve().parents[4]


def settings_with(tmp_path: Path, targets: str, extra: str = "") -> LaredoSettings:
    path = tmp_path / "laredo.conf"
    path.write_text(f"""
sources {{ main {{ type = postgresql, connection = "host=127.0.0.1 dbname=app" }} }}
tables = [ {{ source = main, table = items, targets = [ {targets} ] }} {extra} ]
fanout {{ grpc {{ host = 127.0.0.1, port = 0 }}, health_port = 0 }}
""")
    return load_settings(path, env={})


def test_defaults(tmp_path: Path) -> None:
    config = read_fanout_config(settings_with(tmp_path, "{ type = replication-fanout }"))
    (target,) = config.targets
    assert (target.source_id, target.table) == ("main", TableId("public", "items"))
    limits = target.limits
    assert (limits.journal_max_entries, limits.journal_max_age, limits.heartbeat_interval, limits.max_clients) == (
        100_000, 86_400.0, 5.0, 0)
    assert (config.endpoint.grpc_host, config.endpoint.grpc_port, config.endpoint.health_port) == ("127.0.0.1", 0, 0)
    assert config.subject_prefix == "laredo"


def test_values_of_every_key(tmp_path: Path) -> None:
    config = read_fanout_config(settings_with(tmp_path, """{
        type = replication-fanout
        journal { max_entries = 50, max_age = 10m }
        heartbeat_interval = 250ms
        snapshot { interval = 5m, store = local }
        client_buffer { max_size = 50000, policy = drop_disconnect }
        grpc { port = 4002, max_clients = 7 }
    }"""))
    (target,) = config.targets
    limits = target.limits
    assert (limits.journal_max_entries, limits.journal_max_age, limits.heartbeat_interval) == (50, 600.0, 0.25)
    assert limits.max_clients == 7  # the specification's grpc { max_clients } layout
    assert limits.buffer == BufferLimits(50_000, BufferPolicy.DROP_DISCONNECT)
    assert target.snapshot == SnapshotPolicy(interval=300.0, store=StoreConfig(kind="local"))


def test_defaults_without_snapshot_and_buffer_sections(tmp_path: Path) -> None:
    (target,) = read_fanout_config(settings_with(tmp_path, "{ type = replication-fanout }")).targets
    assert target.snapshot is None and target.limits.buffer == BufferLimits(50_000, BufferPolicy.DROP_DISCONNECT)


def test_s3_snapshot_store_and_slow_down_policy(tmp_path: Path) -> None:
    (target,) = read_fanout_config(settings_with(tmp_path, """{
        type = replication-fanout
        client_buffer { max_size = 100, policy = slow_down }
        snapshot {
          interval = 30s, store = s3, serializer = parquet, part_rows = 1000, restore_on_start = false
          store_config { bucket = snaps, prefix = "prod/fanout", endpoint = "http://minio:9000",
                         access_key = ak, secret_key = sk, region = eu-west-1 }
          retention { keep_count = 3, max_age = 1h }
        }
    }""")).targets
    assert target.limits.buffer == BufferLimits(100, BufferPolicy.SLOW_DOWN)
    assert target.snapshot == SnapshotPolicy(
        interval=30.0, keep_count=3, max_age=3600.0, part_rows=1000, restore_on_start=False, format="parquet",
        store=StoreConfig(kind="s3", bucket="snaps", prefix="prod/fanout", endpoint="minio:9000", access_key="ak",
                          secret_key="sk", region="eu-west-1", secure=False))


def test_snapshot_and_buffer_problems(tmp_path: Path) -> None:
    settings = settings_with(tmp_path, """{
        type = replication-fanout
        client_buffer { max_size = 0, policy = block_forever }
        snapshot { store = s3, serializer = csv, store_config { endpoint = "ftp://x" }, retention { keep = 1 } }
    }""")
    with pytest.raises(ConfigError) as caught:
        read_fanout_config(settings, drain_grace="soonish")
    text = "\n".join(caught.value.problems)
    for expected in ("client_buffer.max_size: must be at least 1", "client_buffer.policy: expected one of",
                     "snapshot.serializer: expected one of jsonl, parquet", "store_config.bucket: is required",
                     "store_config.endpoint: scheme must be http:// or https://", "retention.keep: unknown key",
                     "--drain-grace: expected a duration"):
        assert expected in text, text


def test_drain_grace_flag_overrides_the_file(tmp_path: Path) -> None:
    settings = settings_with(tmp_path, "{ type = replication-fanout }")
    assert read_fanout_config(settings).endpoint.drain_grace == 0.0
    assert read_fanout_config(settings, drain_grace="15s").endpoint.drain_grace == 15.0


def test_top_level_max_clients_wins(tmp_path: Path) -> None:
    config = read_fanout_config(settings_with(
        tmp_path, "{ type = replication-fanout, max_clients = 3, grpc { max_clients = 7 } }"))
    assert config.targets[0].limits.max_clients == 3


def test_every_problem_is_reported_with_its_key(tmp_path: Path) -> None:
    settings = settings_with(tmp_path, """{
        type = replication-fanout
        journal { max_entries = 0, max_age = soon, extra = 1 }
        heartbeat_interval = 0s
        max_client = 5
    }""")
    with pytest.raises(ConfigError) as caught:
        read_fanout_config(settings)
    text = "\n".join(caught.value.problems)
    for expected in ("targets[0].journal.max_entries: must be at least 1",
                     "targets[0].journal.max_age: expected a duration",
                     "targets[0].journal.extra: unknown key",
                     "targets[0].heartbeat_interval: must be positive",
                     "targets[0].max_client: unknown key"):
        assert expected in text, text


def test_no_fanout_target_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no table has a target of type replication-fanout"):
        read_fanout_config(settings_with(tmp_path, "{ type = indexed-memory }"))


def test_two_targets_for_one_table_are_an_error(tmp_path: Path) -> None:
    settings = settings_with(tmp_path, "{ type = replication-fanout }",
                             extra=", { source = main, table = items, targets = [ { type = replication-fanout } ] }")
    with pytest.raises(ConfigError, match="a second replication-fanout target for public.items"):
        read_fanout_config(settings)


def test_the_example_configuration_is_valid_for_fanout() -> None:
    config = read_fanout_config(load_settings(ROOT / "examples" / "laredo.conf", env={}))
    assert [str(t.table) for t in config.targets] == ["public.demo_items"]
