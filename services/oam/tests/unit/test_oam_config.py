"""OAM settings: command_timeout, redis, the catalog from sources and tables; every problem named."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import json_format
from laredo_kernel.changes import TableId
from laredo_core.config import load_settings
from laredo_kernel.errors import ConfigError

from laredo_oam.config import read_oam_config
from laredo_oam.domain.views import TableListing
from laredo_oam.entrypoints.grpc import mappers


def settings_with(tmp_path: Path, oam: str) -> object:
    path = tmp_path / "laredo.conf"
    path.write_text(f"""
sources {{ pg {{ type = postgresql, connection = "host=127.0.0.1 dbname=app password=secret" }} }}
tables = [ {{ source = pg, table = users, targets = [ {{ type = replication-fanout }} ] }} ]
redis {{ url = "redis://127.0.0.1:6390/0", key_prefix = lar }}
oam {{ {oam} }}
""")
    return load_settings(path, env={})


def test_defaults_and_catalog(tmp_path: Path) -> None:
    config = read_oam_config(settings_with(tmp_path, ""))
    assert (config.redis_url, config.redis_key_prefix, config.command_timeout) == (
        "redis://127.0.0.1:6390/0", "lar", 10.0)
    [source] = config.catalog.sources
    assert source.source_id == "pg" and "secret" not in str(source.details)
    assert [p.pipeline_id for p in config.catalog.pipelines()] == ["pg:public.users:replication-fanout"]
    assert config.catalog.tables[0].table == TableId("public", "users")


def test_command_timeout(tmp_path: Path) -> None:
    assert read_oam_config(settings_with(tmp_path, "command_timeout = 2500ms")).command_timeout == 2.5


@pytest.mark.parametrize(("oam", "message"), [
    ("command_timeout = 0s", "oam.command_timeout: must be a positive duration"),
    ("command_timeout = soon", "oam.command_timeout: expected a duration"),
    ("comand_timeout = 5s", "oam.comand_timeout"),
])
def test_problems_are_named(tmp_path: Path, oam: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        read_oam_config(settings_with(tmp_path, oam))


def test_target_options_are_shown_as_json_values_with_durations_in_seconds(tmp_path: Path) -> None:
    path = tmp_path / "laredo.conf"
    path.write_text(f"""
sources {{ pg {{ type = postgresql, connection = "host=127.0.0.1 dbname=app" }} }}
tables = [ {{ source = pg, table = users, targets = [ {{ type = replication-fanout, heartbeat_interval = 5s,
  journal {{ max_age = 10 minutes }},
  snapshot {{ interval = 1h, store = local, store_config {{ path = "{tmp_path}" }} }} }} ] }} ]
""")
    config = read_oam_config(load_settings(path, env={}))
    [listing] = [TableListing(t) for t in config.catalog.tables]
    [table_config] = mappers.table_configs(listing, config.catalog.source("pg"))
    shown = json_format.MessageToDict(table_config.target_config)
    assert (shown["heartbeat_interval"], shown["journal"], shown["snapshot"]["interval"]) == (
        5.0, {"max_age": 600.0}, 3600.0)
    assert "relativedelta" not in str(table_config)
