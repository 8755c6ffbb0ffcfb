"""Snapshot store configuration: `store` and `store_config` of a snapshot section, defaults, problems, location."""

from __future__ import annotations

import pytest

from laredo_core.config.reader import Reader
from laredo_core.snapshots.config import DEFAULT_SNAPSHOT_PATH, StoreConfig, read_snapshot_store
from laredo_core.snapshots.factory import SnapshotStores, build_snapshot_store
from laredo_core.snapshots.local_store import LocalSnapshotStore
from laredo_core.snapshots.s3_store import S3SnapshotStore


def read(section: dict[str, object]) -> tuple[StoreConfig, list[str]]:
    problems: list[str] = []
    return read_snapshot_store(Reader(section, "tables[0].targets[0].snapshot", problems)), problems


def test_local_is_the_default() -> None:
    config, problems = read({})
    assert problems == [] and config == StoreConfig(kind="local", path=DEFAULT_SNAPSHOT_PATH)
    assert config.location == DEFAULT_SNAPSHOT_PATH
    assert read({"store": "local", "store_config": {"path": "/data/snaps"}})[0].location == "/data/snaps"


def test_s3_values_and_the_scheme_of_the_endpoint() -> None:
    config, problems = read({"store": "minio", "store_config": {
        "bucket": "snaps", "prefix": "/prod/fanout/", "endpoint": "http://minio:9000/", "access_key": "ak",
        "secret_key": "sk", "region": "eu-west-1"}})
    assert problems == []
    assert config == StoreConfig(kind="s3", bucket="snaps", prefix="/prod/fanout/", endpoint="minio:9000",
                                 access_key="ak", secret_key="sk", region="eu-west-1", secure=False)
    assert config.location == "s3://snaps/prod/fanout" and "sk" not in repr(config)
    secure, _ = read({"store": "s3", "store_config": {"bucket": "b", "endpoint": "s3.amazonaws.com", "prefix": ""}})
    assert secure.secure and secure.location == "s3://b"


def test_every_problem_names_its_key() -> None:
    _, problems = read({"store": "s3", "store_config": {"endpoint": "ftp://x", "colour": "blue"}})
    text = "\n".join(problems)
    for expected in ("snapshot.store_config.bucket: is required for store = s3",
                     "snapshot.store_config.endpoint: scheme must be http:// or https://",
                     "snapshot.store_config.colour: unknown key"):
        assert expected in text, text
    _, problems = read({"store": "ftp"})
    assert problems and "snapshot.store: expected one of local, s3, minio" in problems[0]
    _, problems = read({"store": "s3"})
    assert any("store_config.endpoint: is required for store = s3" in p for p in problems)


def test_the_factory_builds_one_store_per_configuration(tmp_path: object) -> None:
    local = StoreConfig(path=str(tmp_path))
    s3 = StoreConfig(kind="s3", bucket="b", endpoint="127.0.0.1:9", secure=False)
    assert isinstance(build_snapshot_store(local), LocalSnapshotStore)
    assert isinstance(build_snapshot_store(s3), S3SnapshotStore)
    stores = SnapshotStores()
    assert stores.store_for(local) is stores.store_for(StoreConfig(path=str(tmp_path)))
    assert stores.store_for(s3) is not stores.store_for(local)


@pytest.mark.parametrize("kind", ["local", "s3"])
def test_store_kinds_are_normalised(kind: str) -> None:
    config, _ = read({"store": kind, "store_config": {"bucket": "b", "endpoint": "e:1"} if kind == "s3" else {}})
    assert config.kind == kind
