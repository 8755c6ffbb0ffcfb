"""Fan-out target options: defaults, values, later-feature keys accepted, every problem reported at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from laredo_core.changes import TableId
from laredo_core.config import LaredoSettings, load_settings
from laredo_core.errors import ConfigError
from laredo_fanout.config import read_fanout_config

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
    assert (target.journal_max_entries, target.journal_max_age, target.heartbeat_interval, target.max_clients) == (
        100_000, 86_400.0, 5.0, 0)
    assert (config.grpc_host, config.grpc_port, config.health_port) == ("127.0.0.1", 0, 0)
    assert config.subject_prefix == "laredo"


def test_values_and_later_feature_keys_are_accepted(tmp_path: Path) -> None:
    config = read_fanout_config(settings_with(tmp_path, """{
        type = replication-fanout
        journal { max_entries = 50, max_age = 10m }
        heartbeat_interval = 250ms
        snapshot { interval = 5m, store = local }
        client_buffer { max_size = 50000, policy = drop_disconnect }
        grpc { port = 4002, max_clients = 7 }
    }"""))
    (target,) = config.targets
    assert (target.journal_max_entries, target.journal_max_age, target.heartbeat_interval) == (50, 600.0, 0.25)
    assert target.max_clients == 7  # the specification's grpc { max_clients } layout


def test_top_level_max_clients_wins(tmp_path: Path) -> None:
    config = read_fanout_config(settings_with(
        tmp_path, "{ type = replication-fanout, max_clients = 3, grpc { max_clients = 7 } }"))
    assert config.targets[0].max_clients == 3


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
