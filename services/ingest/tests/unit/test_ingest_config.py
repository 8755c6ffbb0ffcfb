"""Choosing the source and reading its options; the connection string carries the session settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from laredo_kernel.changes import TableId
from laredo_core.config import load_settings
from laredo_kernel.errors import ConfigError

from laredo_ingest.adapters.pg_connection import describe_dsn, session_conninfo
from laredo_ingest.config import ingest_options
from laredo_ingest.domain.start_plan import SlotMode
from laredo_ingest.main import build, cli

TWO_SOURCES = """
sources {
  a { type = postgresql, connection = "host=db1 dbname=app", slot_mode = ephemeral,
      publication { name = pub_a, create = false }, baseline { chunk_rows = 10 }, status_interval = 2s }
  b { type = postgresql, connection = "host=db2 dbname=app" }
}
tables = [
  { source = a, table = users, targets = [{ type = replication-fanout }] }
  { source = a, schema = shop, table = orders, targets = [{ type = replication-fanout }] }
  { source = b, table = things, targets = [{ type = replication-fanout }] }
]
stream { subject_prefix = cdc, max_batch_changes = 50, duplicate_window = 5m, replicas = 1 }
"""


def settings(tmp_path: Path, text: str):
    path = tmp_path / "laredo.conf"
    path.write_text(text)
    return load_settings(path, env={})


def test_the_chosen_source_brings_its_tables_and_options(tmp_path: Path) -> None:
    options = ingest_options(settings(tmp_path, TWO_SOURCES), "a")
    assert options.tables == (TableId("public", "users"), TableId("shop", "orders"))
    assert options.slot_mode is SlotMode.EPHEMERAL and options.slot_name == "laredo_a"
    assert (options.publication_name, options.publication_create) == ("pub_a", False)
    assert (options.baseline_chunk_rows, options.status_interval, options.max_batch_changes) == (10, 2.0, 50)
    spec = options.stream_spec()
    assert spec.name == "CDC_A" and spec.subjects == ("cdc.a.>",) and spec.duplicate_window == 300.0


@pytest.mark.parametrize(("text", "source", "complaint"), [
    (TWO_SOURCES, None, "pass --source ID"),
    (TWO_SOURCES, "c", "no such source"),
    ("sources { a { type = pg, connection = \"x\", slot_name = Bad-Name } }\n"
     "tables = [{ source = a, table = t, targets = [{ type = replication-fanout }] }]", None, "slot_name"),
    ("sources { a { type = pg, connection = \"x\" } }", None, "no table names source 'a'"),
    ("", None, "no source is configured"),
])
def test_choosing_a_source_explains_what_is_wrong(tmp_path: Path, text: str, source: str | None,
                                                  complaint: str) -> None:
    with pytest.raises(ConfigError, match=complaint):
        ingest_options(settings(tmp_path, text), source)


def test_build_connects_to_nothing(tmp_path: Path) -> None:
    app = build(settings(tmp_path, TWO_SOURCES), source_id="b")
    assert app.status.phase.value == "starting" and app.confirmed_lsn == 0 and app.status.published_messages == 0


def test_cli_checks_the_config_and_rejects_an_ambiguous_source(tmp_path: Path, capsys) -> None:
    path = tmp_path / "laredo.conf"
    path.write_text(TWO_SOURCES)
    assert cli(["--config", str(path), "--check-config"]) == 0
    assert cli(["--config", str(path), "--log-level", "error"]) == 2
    assert "pass --source ID" in capsys.readouterr().err


def test_session_settings_join_existing_options_and_the_password_never_shows() -> None:
    conninfo = session_conninfo("host=db port=5433 dbname=app user=u password=pw options='-c work_mem=8MB'")
    assert "-c work_mem=8MB -c DateStyle=ISO,\\\\ YMD" in conninfo
    assert "-c TimeZone=UTC" in conninfo and "-c bytea_output=hex" in conninfo
    assert describe_dsn("host=db port=5433 dbname=app user=u password=pw") == "db:5433/app as u"
