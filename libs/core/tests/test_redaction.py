"""The redaction rule: connection strings, trees by key name, known secret values, the log filter."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from laredo_core import redaction
from laredo_core.coordination.heartbeat import InstanceHeartbeat
from laredo_core.coordination.memory import InMemoryCoordinationStore
from laredo_core.redaction import (
    REDACTED,
    Redactor,
    install_log_filter,
    is_secret_key,
    redact_tree,
    redact_url,
    secret_values,
)


@pytest.fixture
def activated() -> Iterator[None]:
    """Restores the process's Redactor after a test that activates one."""
    before = redaction.active()
    yield
    redaction.activate(before)


@pytest.mark.parametrize(("text", "expected"), [
    ("postgresql://app:s3cr%40t@db:5432/x?sslmode=require", "postgresql://app:***@db:5432/x?sslmode=require"),
    ("postgres://app:pw@db/x", "postgres://app:***@db/x"),
    ("host=db port=5432 password=hunter22 dbname=x", "host=db port=5432 password=*** dbname=x"),
    ("host=db password='a b\\' c' user=u", "host=db password='***' user=u"),
    ("host=db PASSWORD = x1 user=u", "host=db PASSWORD = *** user=u"),
    ("nats://alice:wonder@n1:4222, nats://tok3n@n2:4222", "nats://alice:***@n1:4222, nats://***@n2:4222"),
    ("tls://tok3n@n2:4222", "tls://***@n2:4222"),
    ("redis://:pw@r:6379/0", "redis://:***@r:6379/0"),
    ("rediss://default:pw@r:6380/1", "rediss://default:***@r:6380/1"),
    ("redis://:p@ss@host:6379/0", "redis://:***@host:6379/0"),
    ("https://h/x?access_token=abc&x=1", "https://h/x?access_token=***&x=1"),
    ("postgresql://db/x?password=pw&sslmode=disable", "postgresql://db/x?password=***&sslmode=disable"),
    ("Authorization: Bearer abcdefghijk", "Authorization: Bearer ***"),
    ("sent bearer abcdefghijk to the server", "sent bearer *** to the server"),
    ('{"secret_key": "zzz", "a": 1}', '{"secret_key": "***", "a": 1}'),
    ("{'password': 'p', 'user': 'u'}", "{'password': '***', 'user': 'u'}"),
    ("store_config { access_key = AKIA1234, bucket = b }", "store_config { access_key = ***, bucket = b }"),
])
def test_credentials_in_connection_strings_and_pairs_are_redacted(text: str, expected: str) -> None:
    assert redact_url(text) == expected
    assert redact_url(expected) == expected, "redacting twice changes nothing"


@pytest.mark.parametrize("text", [
    'password authentication failed for user "app"',
    "postgresql://app@db:5432/x",
    "redis://r:6379/0",
    "nats://127.0.0.1:4222",
    "token: missing; pass --token",
    "s3://bucket/laredo/fanout-snapshots",
    "user@example.com wrote 3 rows",
])
def test_text_without_credentials_is_left_alone(text: str) -> None:
    assert redact_url(text) == text


@pytest.mark.parametrize("name", ["secret_key", "access_key", "SECRET_KEY", "accessKey", "password", "DB_PASSWORD",
                                  "passwd", "token", "tokens", "x-auth-token", "api_key", "credentials",
                                  "Authorization", "private_key", "client_secret", "passphrase", "cookie"])
def test_secret_key_names(name: str) -> None:
    assert is_secret_key(name)


@pytest.mark.parametrize("name", ["key", "key_prefix", "bucket", "endpoint", "connection", "url", "nats_url", "cert",
                                  "client_ca", "user", "region", "path"])
def test_ordinary_key_names(name: str) -> None:
    assert not is_secret_key(name)


def test_a_tree_keeps_its_shape_and_hides_secret_named_values_at_any_depth() -> None:
    tree = {
        "sources": {"pg": {"connection": "postgresql://app:pw1@db:5432/x", "slot_name": "s"}},
        "tables": [{"targets": [{"type": "replication-fanout", "snapshot": {"store": "s3", "store_config": {
            "Access_Key": "AKIAEXAMPLE", "SECRET_KEY": "wJalr", "bucket": "b", "endpoint": "minio:9000"}}}]}],
        "redis": {"url": "redis://:pw2@r:6379/0"},
        "auth": {"tokens": [{"value": "tok-1", "roles": ["admin"]}], "jwt": {"issuer": "https://issuer"}},
        "unset": {"password": "", "token": None, "use_token": True},
    }
    shown = redact_tree(tree)
    assert shown["sources"]["pg"] == {"connection": "postgresql://app:***@db:5432/x", "slot_name": "s"}
    store = shown["tables"][0]["targets"][0]["snapshot"]["store_config"]
    assert store == {"Access_Key": REDACTED, "SECRET_KEY": REDACTED, "bucket": "b", "endpoint": "minio:9000"}
    assert shown["redis"]["url"] == "redis://:***@r:6379/0"
    assert shown["auth"] == {"tokens": [{"value": REDACTED, "roles": [REDACTED]}], "jwt": {"issuer": "https://issuer"}}
    assert shown["unset"] == {"password": "", "token": None, "use_token": True}, "unset secrets stay visibly unset"
    assert tree["redis"]["url"] == "redis://:pw2@r:6379/0", "the input is not modified"


def test_secret_values_come_from_keys_urls_files_and_environment(tmp_path: Path) -> None:
    token_file = tmp_path / "admin.token"
    token_file.write_text("file-token-0123456789\n")
    listing = tmp_path / "tokens.txt"
    listing.write_text("ci:read:listed-token-0123456789\n")
    tree = {
        "sources": {"pg": {"connection": "postgresql://app:s3cr%40t@db/x"},
                    "kv": {"connection": "host=db password=kvpass dbname=x"}},
        "stream": {"nats_url": ["nats://alice:wonderland@n1:4222", "nats://natstoken@n2:4222"]},
        "redis": {"url": "redis://:redispass@r:6379/0"},
        "store_config": {"access_key": "AKIAEXAMPLE", "secret_key": "wJalrXUtnFEMI"},
        "auth": {"tokens": [{"file": str(token_file), "roles": ["admin"]},
                            {"env": "LAREDO_TEST_TOKEN", "role": "read"},
                            {"value": "literal-token-01", "name": "ops"},
                            {"file": str(tmp_path / "missing")}],
                 "token_files": [str(listing)]},
        "oam": {"grpc": {"host": "127.0.0.1"}},
    }
    found = secret_values(tree, {"LAREDO_TEST_TOKEN": "env-token-0123456789"})
    for secret in ("s3cr%40t", "s3cr@t", "kvpass", "wonderland", "natstoken", "redispass", "AKIAEXAMPLE",
                   "wJalrXUtnFEMI", "file-token-0123456789", "env-token-0123456789", "literal-token-01",
                   "listed-token-0123456789"):
        assert secret in found, secret
    for not_secret in ("admin", "read", "ops", "127.0.0.1", "app", "alice", str(token_file)):
        assert not_secret not in found, not_secret


def test_a_redactor_scrubs_known_values_wherever_they_appear() -> None:
    redactor = Redactor.from_tree({"stream": {"nats_url": "nats://alice:wonderland@n1:4222"},
                                   "x": {"secret_key": "wJalrXUtnFEMI", "token": "ab"}})
    assert redactor.text("connected to NATS at alice:wonderland@n1:4222") == "connected to NATS at alice:***@n1:4222"
    assert redactor.text("S3 said: signature wJalrXUtnFEMI invalid") == "S3 said: signature *** invalid"
    assert redactor.text("about tab") == "about tab", "values shorter than MIN_SECRET_LENGTH are not searched for"
    assert redactor.tree({"error": "wJalrXUtnFEMI!"}) == {"error": "***!"}


def test_the_log_filter_scrubs_messages_arguments_and_tracebacks(activated: None) -> None:
    redaction.activate(Redactor(["wJalrXUtnFEMI"]))
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    install_log_filter([handler])
    install_log_filter([handler])
    assert len(handler.filters) == 1, "installing twice adds one filter"
    logger = logging.getLogger("test_redaction.filter")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("NATS %s failed", "nats://alice:wonderland@n1:4222")
        try:
            raise ConnectionError("S3 refused key wJalrXUtnFEMI at postgresql://app:pw1@db/x")
        except ConnectionError:
            logger.exception("upload failed")
    finally:
        logger.removeHandler(handler)
    written = out.getvalue()
    assert "NATS nats://alice:***@n1:4222 failed" in written
    assert "ConnectionError: S3 refused key *** at postgresql://app:***@db/x" in written
    for secret in ("wonderland", "wJalrXUtnFEMI", "pw1"):
        assert secret not in written


async def test_the_heartbeat_stores_a_scrubbed_status(activated: None) -> None:
    redaction.activate(Redactor(["wJalrXUtnFEMI"]))
    store = InMemoryCoordinationStore()
    status = {"phase": "reconnecting",
              "last_error": "cannot connect to NATS at nats://alice:wonderland@n1:4222 with wJalrXUtnFEMI"}
    heartbeat = InstanceHeartbeat(store, "ingest", "i1", lambda: status, interval=1.0, ttl=3.0)
    assert await heartbeat.beat()
    [stored] = await store.instances("ingest")
    assert stored.status["last_error"] == "cannot connect to NATS at nats://alice:***@n1:4222 with ***"
