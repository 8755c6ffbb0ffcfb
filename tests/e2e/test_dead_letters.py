"""Dead letters end to end: what consumers cannot apply is kept, listed, replayed and purged through OAM.

ingest, fan-out, query and OAM run as real processes on a throwaway PostgreSQL, NATS and Redis. Corrupt bytes on
the table's subject and a row that breaks the query service's unique lookup index become dead letters; the
services keep applying the changes after them; once the data is fixed a replay brings the row in.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import nats
import psycopg
import pytest
from google.protobuf import struct_pb2
from google.protobuf.json_format import MessageToDict

from laredo.v1 import oam_pb2, oam_pb2_grpc, query_pb2, query_pb2_grpc
from laredo_core.changes import TableId
from laredo_core.stream.naming import table_subject
from laredo_testing.eventually import eventually

from tests.e2e.harness import ServiceProcess, free_port

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SOURCE = "pg"


@dataclass
class System:
    dsn: str
    nats_url: str
    prefix: str
    table: TableId
    ports: dict[str, int]
    services: dict[str, ServiceProcess]
    channels: dict[str, grpc.aio.Channel] = field(default_factory=dict)

    def pipeline(self, target_type: str) -> str:
        return f"{SOURCE}:{self.table}:{target_type}"

    def channel(self, service: str) -> grpc.aio.Channel:
        if service not in self.channels:
            self.channels[service] = grpc.aio.insecure_channel(f"127.0.0.1:{self.ports[service]}")
        return self.channels[service]

    def oam(self) -> oam_pb2_grpc.TableSyncOAMStub:
        return oam_pb2_grpc.TableSyncOAMStub(self.channel("oam"))

    def query(self) -> query_pb2_grpc.TableSyncQueryStub:
        return query_pb2_grpc.TableSyncQueryStub(self.channel("query"))

    async def close_channels(self) -> None:
        for channel in self.channels.values():
            await channel.close()

    def sql(self, statement: str, params: Any = None) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(statement, params)

    def assert_running(self) -> None:
        for service in self.services.values():
            service.assert_running()


def write_config(path: Path, *, dsn: str, nats_url: str, redis_url: str, prefix: str, table: TableId,
                 ports: dict[str, int], health: dict[str, int]) -> Path:
    path.write_text(f"""
sources {{ {SOURCE} {{ type = postgresql, connection = {json.dumps(dsn)}, slot_name = slot_{prefix},
  status_interval = 1s }} }}
tables = [ {{ source = {SOURCE}, schema = {table.schema}, table = {table.name}, targets = [
  {{ type = replication-fanout }}, {{ type = indexed-memory, lookup_fields = [email] }} ] }} ]
stream {{ nats_url = {json.dumps(nats_url)}, subject_prefix = {prefix} }}
redis {{ url = {json.dumps(redis_url)}, key_prefix = {prefix} }}
ingest {{ health_host = 127.0.0.1, health_port = {health["ingest"]} }}
fanout {{ grpc {{ host = 127.0.0.1, port = {ports["fanout"]} }}, health_host = 127.0.0.1,
  health_port = {health["fanout"]}, status_interval = 1s }}
query {{ grpc {{ host = 127.0.0.1, port = {ports["query"]} }}, health_host = 127.0.0.1,
  health_port = {health["query"]}, status_interval = 1s }}
oam {{ grpc {{ host = 127.0.0.1, port = {ports["oam"]} }}, health_host = 127.0.0.1,
  health_port = {health["oam"]}, command_timeout = 15s }}
""")
    return path


@pytest.fixture
def system(pg_dsn: str, nats_url: str, redis_url: str, unique_name: str, tmp_path: Path) -> Iterator[System]:
    table = TableId("public", unique_name)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:  # email is not unique in the source
        conn.execute(f"CREATE TABLE {table} (id bigint PRIMARY KEY, email text, name text)")
        conn.execute(f"INSERT INTO {table} VALUES (1, 'a@example.com', 'one'), (2, 'b@example.com', 'two')")
    names = ("ingest", "fanout", "query", "oam")
    ports = {n: free_port() for n in ("fanout", "query", "oam")}
    health = {n: free_port() for n in names}
    config = write_config(tmp_path / "laredo.conf", dsn=pg_dsn, nats_url=nats_url, redis_url=redis_url,
                          prefix=unique_name, table=table, ports=ports, health=health)
    services = {n: ServiceProcess(n, config, health[n], tmp_path / f"{n}.log") for n in names}
    try:
        for service in services.values():
            service.start()
        for service in services.values():
            service.wait_ready(90)
        yield System(pg_dsn, nats_url, unique_name, table, ports, services)
    finally:
        for service in reversed(services.values()):
            service.stop()
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                         "WHERE slot_name = %s AND NOT active", (f"slot_{unique_name}",))


async def lookup(system: System, email: str) -> dict[str, Any] | None:
    answer = await system.query().Lookup(query_pb2.LookupRequest(
        schema=system.table.schema, table=system.table.name, key_values=[struct_pb2.Value(string_value=email)]))
    return MessageToDict(answer.row) if answer.found else None


async def letters(system: System, target_type: str, count: int) -> oam_pb2.ListDeadLettersResponse | None:
    request = oam_pb2.ListDeadLettersRequest(pipeline_id=system.pipeline(target_type))
    listed = await system.oam().ListDeadLetters(request)
    return listed if listed.total_count >= count else None


async def test_bad_input_is_kept_listed_replayed_and_purged_while_the_services_keep_running(system: System) -> None:
    try:
        await bad_input_is_kept_listed_replayed_and_purged(system)
    finally:
        await system.close_channels()


async def bad_input_is_kept_listed_replayed_and_purged(system: System) -> None:
    nc = await nats.connect(system.nats_url)
    try:
        await nc.jetstream().publish(table_subject(system.prefix, SOURCE, system.table), b"\xff\x00 not a batch")
    finally:
        await nc.close()
    system.sql(f"INSERT INTO {system.table} VALUES (3, 'a@example.com', 'duplicate email')")  # breaks the lookup
    system.sql(f"INSERT INTO {system.table} VALUES (4, 'd@example.com', 'after')")
    assert await eventually(lambda: lookup(system, "d@example.com"), timeout=30, what="the change after both")

    fanout = await eventually(lambda: letters(system, "replication-fanout", 1), timeout=30, what="fan-out's letter")
    (corrupt,) = fanout.entries
    assert corrupt.action == "UNDECODABLE" and "corrupt change batch" in corrupt.error_message
    assert MessageToDict(corrupt.change_data)["raw_message_base64"]
    query = await eventually(lambda: letters(system, "indexed-memory", 2), timeout=30, what="query's letters")
    assert [e.action for e in query.entries] == ["UNDECODABLE", "INSERT"]
    violation = query.entries[1]
    assert "lookup_fields (email) already holds email='a@example.com' for the row with primary key id=1" in \
        violation.error_message and violation.position
    assert MessageToDict(violation.change_data)["new_values"] == {"id": 3, "email": "a@example.com",
                                                                  "name": "duplicate email"}

    system.sql(f"UPDATE {system.table} SET email = 'z@example.com' WHERE id = 1")  # fix the data
    assert await eventually(lambda: lookup(system, "z@example.com"), timeout=30, what="the fix")
    replayed = await system.oam().ReplayDeadLetters(oam_pb2.ReplayDeadLettersRequest(
        pipeline_id=system.pipeline("indexed-memory")))
    assert (replayed.replayed, replayed.succeeded, replayed.failed) == (2, 1, 1)
    assert (await lookup(system, "a@example.com") or {}).get("name") == "duplicate email"
    remaining = await system.oam().ListDeadLetters(oam_pb2.ListDeadLettersRequest(
        pipeline_id=system.pipeline("indexed-memory")))
    assert [e.action for e in remaining.entries] == ["UNDECODABLE"] and remaining.total_count == 1
    assert "still does not decode" in remaining.entries[0].error_message

    purged = await system.oam().PurgeDeadLetters(oam_pb2.PurgeDeadLettersRequest(
        pipeline_id=system.pipeline("indexed-memory")))
    assert purged.purged == 1
    assert (await letters(system, "indexed-memory", 0)).total_count == 0  # type: ignore[union-attr]
    assert (await letters(system, "replication-fanout", 1)).total_count == 1  # type: ignore[union-attr]

    for pipeline_id, code in (("", grpc.StatusCode.INVALID_ARGUMENT), ("pg:users", grpc.StatusCode.INVALID_ARGUMENT),
                              (f"{SOURCE}:public.nope:indexed-memory", grpc.StatusCode.NOT_FOUND)):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await system.oam().ListDeadLetters(oam_pb2.ListDeadLettersRequest(pipeline_id=pipeline_id))
        assert caught.value.code() == code, caught.value.details()
    system.assert_running()
