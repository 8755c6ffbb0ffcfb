"""SnapshotStore adapters built from StoreConfig, one per distinct configuration (composition roots only).

Kept apart from config.py: this module imports the minio SDK, which the services' inner layers must not.
"""

from __future__ import annotations

from laredo_core.snapshots.config import StoreConfig
from laredo_core.snapshots.local_store import LocalSnapshotStore
from laredo_core.snapshots.s3_store import S3Location, S3SnapshotStore
from laredo_core.snapshots.store import SnapshotStore


def build_snapshot_store(config: StoreConfig) -> SnapshotStore:
    """A LocalSnapshotStore or S3SnapshotStore; nothing connects until the first call."""
    if config.kind == "local":
        return LocalSnapshotStore(config.path)
    return S3SnapshotStore(S3Location(config.endpoint, config.bucket, config.prefix, config.access_key,
                                      config.secret_key, config.region, config.secure, config.ca_file))


class SnapshotStores:
    """One store per distinct configuration, shared by every table that names it."""

    def __init__(self) -> None:
        self._stores: dict[StoreConfig, SnapshotStore] = {}

    def store_for(self, config: StoreConfig) -> SnapshotStore:
        if config not in self._stores:
            self._stores[config] = build_snapshot_store(config)
        return self._stores[config]
