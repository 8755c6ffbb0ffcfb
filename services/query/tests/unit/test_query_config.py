"""Query configuration: indexed-memory targets and their indexes, validated with every problem named."""

from __future__ import annotations

from pathlib import Path

import pytest

from laredo_core.config import load_settings
from laredo_kernel.errors import ConfigError
from laredo_query.application.subscriptions import OverflowPolicy
from laredo_query.config import read_query_config
from laredo_query.domain.indexes import IndexDefinition

SOURCES = 'sources { pg { type = postgresql, connection = "host=db" } }\n'


def settings(tmp_path: Path, text: str):  # noqa: ANN201
    path = tmp_path / "laredo.conf"
    path.write_text(SOURCES + text)
    return load_settings(path, env={})


def test_targets_indexes_and_subscriber_options_are_read(tmp_path: Path) -> None:
    config = read_query_config(settings(tmp_path, """
tables = [
  { source = pg, table = users, targets = [ { type = replication-fanout },
    { type = indexed-memory, lookup_fields = [email],
      indexes = [ { name = by_team, fields = [team_id, role] },
                  { name = by_badge, fields = badge, unique = true } ] } ] }
  { source = pg, schema = sales, table = orders, targets = [ { type = indexed-memory } ] }
]
query { grpc { port = 0 }, subscriber_buffer = 64, subscriber_overflow = close }
"""))
    users, orders = config.targets
    assert str(users.table) == "public.users" and users.indexes == (
        IndexDefinition("lookup", ("email",), True), IndexDefinition("by_team", ("team_id", "role"), False),
        IndexDefinition("by_badge", ("badge",), True))
    assert str(orders.table) == "sales.orders" and orders.indexes == ()
    assert (config.subscriber_buffer, config.subscriber_overflow) == (64, OverflowPolicy.CLOSE)
    assert config.endpoint.grpc_port == 0


def test_every_problem_is_reported_at_once_with_its_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        read_query_config(settings(tmp_path, """
tables = [
  { source = pg, table = users, targets = [
    { type = indexed-memory, lookup_fields = [], lookup = x,
      indexes = [ { name = primary, fields = [a] }, { name = "bad name", fields = [a] }, { name = ok, fields = [a, a] },
                  { name = twice, fields = [a] }, { name = twice, fields = [b] }, { fields = [c] },
                  { name = nofields } ] },
    { type = indexed-memory } ] }
]
query { subscriber_buffer = 0, subscriber_overflow = block, colour = red }
"""))
    problems = "\n".join(caught.value.problems)
    for expected in ("tables[0].targets[0].lookup_fields: must name at least one column",
                     "tables[0].targets[0].lookup: unknown key",
                     "tables[0].targets[0].indexes[0].name: 'primary' is reserved",
                     "tables[0].targets[0].indexes[1].name: 'bad name' is not a valid index name",
                     "tables[0].targets[0].indexes[2].fields: names column(s) a more than once",
                     "tables[0].targets[0].indexes[4].name: a second index named 'twice'",
                     "tables[0].targets[0].indexes[5].name: is required",
                     "tables[0].targets[0].indexes[6].fields: is required",
                     "tables[0].targets[1]: a second indexed-memory target for public.users",
                     "query.subscriber_buffer: must be at least 1",
                     "query.subscriber_overflow: expected one of drop, close",
                     "query.colour: unknown key"):
        assert expected in problems, f"{expected!r} not in:\n{problems}"


def test_no_indexed_memory_target_is_allowed(tmp_path: Path) -> None:
    config = read_query_config(settings(tmp_path, "tables = [ { source = pg, table = t, targets = "
                                                  "[ { type = replication-fanout } ] } ]\n"))
    assert config.targets == ()


def test_snapshot_store_and_restore_on_start(tmp_path: Path) -> None:
    fanout = '{ type = replication-fanout, snapshot { store = local, store_config { path = "/fanout" } } }'
    config = read_query_config(settings(tmp_path, f"""
tables = [
  {{ source = pg, table = own, targets = [ {fanout}, {{ type = indexed-memory,
     snapshot {{ store = local, store_config {{ path = "/own" }}, restore_on_start = false }} }} ] }}
  {{ source = pg, table = inherited, targets = [ {fanout}, {{ type = indexed-memory }} ] }}
  {{ source = pg, table = switched_off, targets = [ {fanout},
     {{ type = indexed-memory, snapshot {{ restore_on_start = false }} }} ] }}
  {{ source = pg, table = default_store, targets = [ {{ type = indexed-memory, snapshot {{ }} }} ] }}
  {{ source = pg, table = none, targets = [ {{ type = indexed-memory }} ] }}
]
"""))
    found = {t.table.name: (t.snapshot_store.path if t.snapshot_store else None, t.restore_on_start)
             for t in config.targets}
    assert found == {"own": ("/own", False), "inherited": ("/fanout", True), "switched_off": ("/fanout", False),
                     "default_store": ("/var/lib/laredo/fanout-snapshots", True), "none": (None, True)}


def test_snapshot_section_problems_are_reported(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        read_query_config(settings(tmp_path, """
tables = [ { source = pg, table = t, targets = [ { type = indexed-memory,
  snapshot { store = s3, restore_on_start = maybe, interval = 5m } } ] } ]
"""))
    problems = "\n".join(caught.value.problems)
    for expected in ("tables[0].targets[0].snapshot.restore_on_start", "tables[0].targets[0].snapshot.interval",
                     "bucket"):
        assert expected in problems
