"""Secrets never leave: a system configured with secrets everywhere answers, logs and reports none of them.

ingest, fan-out, query and OAM run as real processes with a PostgreSQL DSN holding a password, NATS and Redis
that require credentials (given inside their URLs), an S3 snapshot store with access and secret keys, and
bearer tokens read from a file and from the environment. A second ingest is given a wrong NATS password, so
its connection errors (which quote the URLs) reach its log, its status in Redis and OAM's GetStatus. Every
answer of the status RPCs, every health body, every instance status stored in Redis, every log line and the
output of `--check-config` (valid and invalid files) is searched for each configured secret value.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import grpc
import psycopg
import pytest
import redis.asyncio as aioredis
from google.protobuf.json_format import MessageToJson

from laredo.replication.v1 import replication_pb2, replication_pb2_grpc
from laredo.v1 import oam_pb2, oam_pb2_grpc
from laredo_kernel.changes import TableId
from laredo_testing.eventually import eventually
from laredo_testing.servers import LOOPBACK, NatsServer, RedisServer, S3Endpoint

from tests.e2e.harness import BIN, ServiceProcess, create_table, free_port
from tests.e2e.system import SERVICES, SOURCE, SystemConfig, write_config

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PG_PASSWORD = "pg-Pa55word-e2e-7b1c"
NATS_USER, NATS_PASSWORD = "laredo", "nats-Pa55word-e2e-93fd"
WRONG_NATS_PASSWORD = "nats-Wr0ng-password-e2e-55aa"
REDIS_PASSWORD = "redis-Pa55word-e2e-c4d2"
S3_ACCESS_KEY, S3_SECRET_KEY = "AKIASECRETSE2E0TEST", "s3-secret-key-e2e-0f9e8d7c6b5a"
ADMIN_TOKEN, READ_TOKEN = "admin-token-e2e-2f6a9c1d7e3b5a8c", "read-token-e2e-9d4c2b7a1e6f3c0b"
TOKEN_ENV = "LAREDO_E2E_READ_TOKEN"
SECRETS = (PG_PASSWORD, NATS_PASSWORD, WRONG_NATS_PASSWORD, REDIS_PASSWORD, S3_ACCESS_KEY, S3_SECRET_KEY,
           ADMIN_TOKEN, READ_TOKEN)


class NatsWithPassword(NatsServer):
    """nats-server with JetStream that admits one user with a password."""

    def _command(self) -> list[str]:
        return [*super()._command(), "--user", NATS_USER, "--pass", NATS_PASSWORD]


class RedisWithPassword(RedisServer):
    """redis-server that requires AUTH; up once it answers (NOAUTH counts)."""

    def _command(self) -> list[str]:
        return [*super()._command(), "--requirepass", REDIS_PASSWORD]

    def _is_ready(self) -> bool:
        import socket

        with socket.create_connection((LOOPBACK, self.port), timeout=1.0) as conn:
            conn.sendall(b"*1\r\n$4\r\nPING\r\n")
            return conn.recv(64).startswith((b"+PONG", b"-NOAUTH"))


def assert_no_secret(where: str, text: str) -> None:
    leaked = [secret for secret in SECRETS if secret in text]
    assert not leaked, f"{where} contains configured secrets {leaked}:\n{text[-4000:]}"


@dataclass
class SecretSystem:
    config: Path
    ports: dict[str, int]
    health: dict[str, int]
    services: dict[str, ServiceProcess]
    redis_url: str
    prefix: str

    def logs(self) -> dict[str, str]:
        return {name: s.log_path.read_text(errors="replace") for name, s in self.services.items()}


S = TypeVar("S", NatsWithPassword, RedisWithPassword)


def _serving(server: S) -> Iterator[S]:
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def nats_with_password(tmp_path: Path) -> Iterator[NatsWithPassword]:
    (tmp_path / "nats").mkdir()
    yield from _serving(NatsWithPassword(tmp_path / "nats"))


@pytest.fixture
def redis_with_password(tmp_path: Path) -> Iterator[RedisWithPassword]:
    (tmp_path / "redis").mkdir()
    yield from _serving(RedisWithPassword(tmp_path / "redis"))


def _secret_config(tmp_path: Path, *, dsn: str, nats_port: int, redis_url: str, prefix: str, table: TableId,
                   s3: S3Endpoint, token_file: Path) -> tuple[Path, dict[str, int], dict[str, int]]:
    ports = {n: free_port() for n in ("fanout", "query", "oam")}
    health = {n: free_port() for n in SERVICES}
    snapshot = (f'snapshot {{ store = s3, store_config {{ bucket = {prefix}, endpoint = "{s3.url}", '
                f'access_key = "{S3_ACCESS_KEY}", secret_key = "{S3_SECRET_KEY}" }} }}')
    path = write_config(tmp_path / "laredo.conf", dsn=dsn, nats_url=f"nats://{NATS_USER}:{NATS_PASSWORD}@{LOOPBACK}:"
                        f"{nats_port}", redis_url=redis_url, prefix=prefix, table=table, ports=ports,
                        health=health, extra=SystemConfig(fanout_target=snapshot))
    with path.open("a") as config:
        config.write(f"""
auth {{ tokens = [
  {{ name = operator, role = admin, file = "{token_file}" }},
  {{ name = reader, role = read, env = {TOKEN_ENV} }}
] }}
""")
    return path, ports, health


@pytest.fixture
def secret_system(pg_dsn: str, nats_with_password: NatsWithPassword, redis_with_password: RedisWithPassword,
                  s3_endpoint: S3Endpoint, unique_name: str, tmp_path: Path) -> Iterator[SecretSystem]:
    table = TableId("public", unique_name)
    create_table(pg_dsn, str(table), 50)
    token_file = tmp_path / "admin.token"
    token_file.write_text(ADMIN_TOKEN + "\n")
    redis_url = f"redis://:{REDIS_PASSWORD}@{LOOPBACK}:{redis_with_password.port}/0"
    # Trust authentication ignores the password, but every service holds (and could quote) it.
    dsn = f"{pg_dsn} password={PG_PASSWORD}"
    config, ports, health = _secret_config(tmp_path, dsn=dsn, nats_port=nats_with_password.port,
                                           redis_url=redis_url, prefix=unique_name, table=table, s3=s3_endpoint,
                                           token_file=token_file)
    broken_health = free_port()
    broken = tmp_path / "broken-ingest.conf"
    broken.write_text(config.read_text().replace(NATS_PASSWORD, WRONG_NATS_PASSWORD)
                      .replace(f"slot_{unique_name}", f"slot_b{unique_name}") + f"""
ingest {{ instance_id = broken-ingest, leader_election = false, commands = false, health_port = {broken_health} }}
""")
    services = {n: ServiceProcess(n, config, health[n], tmp_path / f"{n}.log") for n in SERVICES}
    services["broken-ingest"] = ServiceProcess("ingest", broken, broken_health, tmp_path / "broken-ingest.log")
    system = SecretSystem(config, ports, health, services, redis_url, unique_name)
    saved = dict(os.environ)
    os.environ[TOKEN_ENV] = READ_TOKEN  # ServiceProcess passes the test's environment on
    try:
        for name in SERVICES:
            services[name].start()
        for name in SERVICES:
            services[name].wait_ready(90)
        services["broken-ingest"].start()  # once the real ingest holds its slot
        yield system
    finally:
        os.environ.clear()
        os.environ.update(saved)
        for service in reversed(services.values()):
            service.stop()
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                         "WHERE slot_name IN (%s, %s) AND NOT active", (f"slot_{unique_name}", f"slot_b{unique_name}"))


def _check_config(service: str, config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / f"laredo-{service}"), "--config", str(config), "--check-config"],
                          capture_output=True, text=True, timeout=60, env={**os.environ, TOKEN_ENV: READ_TOKEN})


def test_check_config_prints_no_secret(tmp_path: Path) -> None:
    token_file = tmp_path / "admin.token"
    token_file.write_text(ADMIN_TOKEN + "\n")
    config, _, _ = _secret_config(
        tmp_path, dsn=f"host={LOOPBACK} port=5432 user=app dbname=app password={PG_PASSWORD}", nats_port=4222,
        redis_url=f"redis://:{REDIS_PASSWORD}@{LOOPBACK}:6379/0", prefix="secrets", table=TableId("public", "t"),
        s3=S3Endpoint(f"{LOOPBACK}:9000", "unused", "unused"), token_file=token_file)
    invalid = tmp_path / "invalid.conf"
    invalid.write_text(config.read_text().replace("redis://", "http://") + f"""
stream {{ nats_urll = "nats://{NATS_USER}:{NATS_PASSWORD}@elsewhere:4222" }}
""")
    for service in SERVICES:
        valid = _check_config(service, config)
        assert valid.returncode == 0, f"laredo-{service}: {valid.stdout}{valid.stderr}"
        assert_no_secret(f"laredo-{service} --check-config of a valid file", valid.stdout + valid.stderr)
        refused = _check_config(service, invalid)
        assert refused.returncode == 2, f"laredo-{service}: {refused.stdout}{refused.stderr}"
        assert "redis.url" in refused.stderr and f"http://:***@{LOOPBACK}" in refused.stderr, refused.stderr
        assert_no_secret(f"laredo-{service} --check-config of an invalid file", refused.stdout + refused.stderr)


async def _oam_answers(system: SecretSystem) -> dict[str, str]:
    metadata = (("authorization", f"Bearer {ADMIN_TOKEN}"),)
    answers: dict[str, str] = {}
    async with grpc.aio.insecure_channel(f"{LOOPBACK}:{system.ports['oam']}") as channel:
        stub = oam_pb2_grpc.TableSyncOAMStub(channel)
        calls = {
            "ListTables": stub.ListTables(oam_pb2.ListTablesRequest(), metadata=metadata, timeout=10),
            "GetStatus": stub.GetStatus(oam_pb2.GetStatusRequest(), metadata=metadata, timeout=10),
            "GetSourceInfo": stub.GetSourceInfo(oam_pb2.GetSourceInfoRequest(), metadata=metadata, timeout=10),
            "GetTableStatus": stub.GetTableStatus(oam_pb2.GetTableStatusRequest(table=system.prefix),
                                                  metadata=metadata, timeout=10),
            "CheckReady": stub.CheckReady(oam_pb2.CheckReadyRequest(), metadata=metadata, timeout=10),
            "ListSnapshots": stub.ListSnapshots(oam_pb2.ListSnapshotsRequest(), metadata=metadata, timeout=10),
        }
        for name, call in calls.items():
            answers[name] = MessageToJson(await call)
        try:
            await stub.GetPipelineStatus(oam_pb2.GetPipelineStatusRequest(pipeline_id=f"x:{ADMIN_TOKEN}"),
                                         metadata=metadata, timeout=10)
        except grpc.aio.AioRpcError as exc:
            answers["GetPipelineStatus error"] = f"{exc.code().name}: {exc.details()}"
    async with grpc.aio.insecure_channel(f"{LOOPBACK}:{system.ports['fanout']}") as channel:
        status = await replication_pb2_grpc.TableSyncReplicationStub(channel).GetReplicationStatus(
            replication_pb2.GetReplicationStatusRequest(schema="public", table=system.prefix), metadata=(("authorization", f"Bearer {READ_TOKEN}"),),
            timeout=10)
        answers["GetReplicationStatus"] = MessageToJson(status)
    return answers


async def _stored_statuses(system: SecretSystem) -> dict[str, str]:
    client = aioredis.from_url(system.redis_url)
    try:
        stored = {}
        async for key in client.scan_iter(match=f"{system.prefix}*", count=500):
            kind = await client.type(key)
            if kind == b"string":
                stored[key.decode()] = (await client.get(key) or b"").decode(errors="replace")
            elif kind == b"hash":
                stored[key.decode()] = json.dumps({k.decode(): v.decode(errors="replace")
                                                   for k, v in (await client.hgetall(key)).items()})
        return stored
    finally:
        await client.aclose()


def _health_bodies(system: SecretSystem) -> dict[str, str]:
    bodies = {}
    for name, service in system.services.items():
        for probe in ("live", "ready"):
            try:
                with urllib.request.urlopen(f"http://{LOOPBACK}:{service.health_port}/health/{probe}",
                                            timeout=5) as response:
                    bodies[f"{name} {probe}"] = response.read().decode()
            except urllib.error.HTTPError as exc:  # 503 while not ready: the body still counts
                bodies[f"{name} {probe}"] = exc.read().decode()
    return bodies


async def test_no_answer_status_or_log_line_holds_a_secret(secret_system: SecretSystem) -> None:
    system = secret_system

    async def broken_ingest_reported() -> bool:
        return any("broken-ingest" in key + value for key, value in (await _stored_statuses(system)).items())

    await eventually(broken_ingest_reported, timeout=60,
                     what="the ingest with the wrong NATS password stores its status in Redis")
    answers = await _oam_answers(system)
    for name, answer in answers.items():
        assert_no_secret(f"the answer of {name}", answer)
    listed = json.loads(answers["ListTables"])
    [store] = [t["targetConfig"]["snapshot"]["store_config"] for t in listed["tables"]
               if "snapshot" in t.get("targetConfig", {})]
    assert (store["access_key"], store["secret_key"]) == ("***", "***"), store
    assert answers["GetPipelineStatus error"].startswith("INVALID_ARGUMENT"), answers["GetPipelineStatus error"]

    stored = await _stored_statuses(system)
    for key, value in stored.items():
        assert_no_secret(f"Redis key {key}", value)
    for name, body in _health_bodies(system).items():
        assert_no_secret(f"the health body of {name}", body)

    logs = system.logs()
    for name, log in logs.items():
        assert_no_secret(f"the log of {name}", log)
    assert f"nats://{NATS_USER}:***@" in logs["fanout"], f"fan-out logs its NATS URLs, redacted:\n{logs['fanout']}"
    assert "Authorization Violation" in logs["broken-ingest"], logs["broken-ingest"][-3000:]
    for service in system.services.values():
        service.stop()
    for name, log in system.logs().items():
        assert_no_secret(f"the log of {name} after stopping", log)
