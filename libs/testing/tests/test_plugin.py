"""The pytest fixtures: per-test databases and names on top of session-wide servers."""

from __future__ import annotations

import re

import nats
import psycopg
import pytest
import redis
from minio import Minio

from laredo_testing.plugin import PgServer
from laredo_testing.servers import S3Endpoint

pytestmark = pytest.mark.integration


def test_unique_name_is_a_short_identifier(unique_name: str) -> None:
    assert re.fullmatch(r"[a-z][a-z0-9_]{2,30}", unique_name)


def test_markers_are_registered(pytestconfig: pytest.Config) -> None:
    declared = {line.split(":", 1)[0] for line in pytestconfig.getini("markers")}
    assert {"integration", "slow"} <= declared


def test_pg_dsn_is_a_fresh_logical_database(pg_dsn: str, unique_name: str) -> None:
    with psycopg.connect(pg_dsn) as conn:
        assert conn.execute("SELECT current_database()").fetchone() == (unique_name,)
        assert conn.execute("SHOW wal_level").fetchone() == ("logical",)
        tables = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone()
        assert tables == (0,)


def test_pg_dsn_allows_logical_replication_connections(pg_dsn: str, unique_name: str) -> None:
    with psycopg.connect(pg_dsn + " replication=database", autocommit=True) as conn:
        row = conn.execute(f"CREATE_REPLICATION_SLOT {unique_name} LOGICAL pgoutput").fetchone()
    assert row is not None and row[0] == unique_name


def test_pg_dsn_teardown_leaves_no_databases_or_slots(pg_server: PgServer) -> None:
    # Runs after the tests above in file order; their slots and databases must be gone.
    with psycopg.connect(pg_server.dsn) as conn:
        slots = conn.execute("SELECT count(*) FROM pg_replication_slots").fetchone()
        extra = conn.execute("SELECT count(*) FROM pg_database WHERE datname ~ '^t[0-9a-f]{12}$'").fetchone()
    assert slots == (0,)
    assert extra == (0,)


async def test_nats_url_serves_jetstream(nats_url: str, unique_name: str) -> None:
    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        await js.add_stream(name=unique_name, subjects=[f"{unique_name}.>"])
        ack = await js.publish(f"{unique_name}.x", b"1")
        assert ack.stream == unique_name
    finally:
        await nc.close()


def test_redis_url_answers(redis_url: str, unique_name: str) -> None:
    with redis.Redis.from_url(redis_url) as client:
        client.set(f"{unique_name}:k", "v", ex=60)
        assert client.get(f"{unique_name}:k") == b"v"


def test_s3_endpoint_accepts_the_unique_name_as_a_bucket(s3_endpoint: S3Endpoint, unique_name: str) -> None:
    client = Minio(s3_endpoint.endpoint, access_key=s3_endpoint.access_key,
                   secret_key=s3_endpoint.secret_key, region=s3_endpoint.region,
                   secure=s3_endpoint.secure)
    client.make_bucket(unique_name)
    assert client.bucket_exists(unique_name)
