"""The SnapshotStore port on S3 (MinIO in production) through the minio SDK.

Keys: <prefix>/<schema>.<table>/<snapshot_id>/{rows-*.jsonl or .parquet, manifest.json}. An object appears whole
or not at all, and the manifest is put last. The bucket is created on first use when missing. The
SDK is blocking, so every call runs in a thread; its errors become SnapshotStoreUnavailable.
"""

from __future__ import annotations

import asyncio
import io
import logging
from dataclasses import dataclass
from typing import Any

import urllib3
from minio import Minio
from minio.deleteobjects import DeleteObject
from minio.error import MinioException, S3Error

from laredo_kernel.changes import TableId

from laredo_core.snapshots.errors import SnapshotCorrupt, SnapshotNotFound, SnapshotStoreUnavailable
from laredo_core.snapshots.format import (
    MANIFEST_NAME,
    SnapshotManifest,
    manifest_from_json,
    manifest_to_json,
    table_directory,
    table_from_directory,
)
from laredo_core.snapshots.memory_store import newest_first

log = logging.getLogger(__name__)
_MISSING = ("NoSuchKey", "NoSuchObject")
_FAILURES = (MinioException, urllib3.exceptions.HTTPError, OSError, ValueError)


@dataclass(frozen=True, slots=True)
class S3Location:
    endpoint: str  # host:port, no scheme
    bucket: str
    prefix: str = "laredo/fanout-snapshots"
    access_key: str = ""
    secret_key: str = ""
    region: str = "us-east-1"
    secure: bool = True
    ca_file: str = ""  # PEM CA that verifies the endpoint (a private CA); empty: the system's CAs
    retries: int = 3  # per call, with backoff, for transient connection failures
    timeout: float = 30.0  # seconds to connect and per read


class S3SnapshotStore:
    def __init__(self, location: S3Location) -> None:
        self._location = location
        http = urllib3.PoolManager(
            timeout=urllib3.Timeout(connect=min(5.0, location.timeout), read=location.timeout),
            retries=urllib3.Retry(total=location.retries, backoff_factor=0.2,
                                  status_forcelist=(500, 502, 503, 504)),
            cert_reqs="CERT_REQUIRED", ca_certs=location.ca_file or None)
        self._client = Minio(location.endpoint, access_key=location.access_key or None,
                             secret_key=location.secret_key or None, secure=location.secure,
                             region=location.region or None, http_client=http)
        self._bucket_checked = False

    def _key(self, table: TableId, snapshot_id: str, name: str = "") -> str:
        if not snapshot_id or "/" in snapshot_id:
            raise SnapshotNotFound(snapshot_id)
        return f"{self._table_prefix(table)}{snapshot_id}/{name}"

    def _root(self) -> str:
        prefix = self._location.prefix.strip("/")
        return f"{prefix}/" if prefix else ""

    def _table_prefix(self, table: TableId) -> str:
        return f"{self._root()}{table_directory(table)}/"

    async def write_part(self, table: TableId, snapshot_id: str, name: str, data: bytes) -> None:
        await self._call(self._put, self._key(table, snapshot_id, name), data)

    async def write_manifest(self, manifest: SnapshotManifest) -> None:
        await self._call(self._put, self._key(manifest.table, manifest.snapshot_id, MANIFEST_NAME),
                         manifest_to_json(manifest))

    async def list_snapshots(self, table: TableId) -> list[SnapshotManifest]:
        return await self._call(self._list, table)

    async def read_manifest(self, table: TableId, snapshot_id: str) -> SnapshotManifest | None:
        try:
            key = self._key(table, snapshot_id, MANIFEST_NAME)
        except SnapshotNotFound:
            return None
        data = await self._call(self._get, key)
        return manifest_from_json(data, self._url(key)) if data is not None else None

    async def list_tables(self) -> list[TableId]:
        return await self._call(self._tables)

    async def read_part(self, table: TableId, snapshot_id: str, name: str) -> bytes:
        data = await self._call(self._get, self._key(table, snapshot_id, name))
        if data is None:
            raise SnapshotNotFound(f"{snapshot_id}/{name}")
        return data

    async def delete_snapshot(self, table: TableId, snapshot_id: str) -> None:
        await self._call(self._delete, self._key(table, snapshot_id, MANIFEST_NAME), self._key(table, snapshot_id))

    def _url(self, key: str) -> str:
        return f"s3://{self._location.bucket}/{key}"

    def _ensure_bucket(self) -> None:
        if self._bucket_checked:
            return
        if not self._client.bucket_exists(self._location.bucket):
            log.info("creating bucket %s for fan-out snapshots", self._location.bucket)
            try:
                self._client.make_bucket(self._location.bucket)
            except S3Error as exc:
                if exc.code not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                    raise
        self._bucket_checked = True

    def _put(self, key: str, data: bytes) -> None:
        self._ensure_bucket()
        self._client.put_object(self._location.bucket, key, io.BytesIO(data), len(data),
                                content_type=_content_type(key))

    def _get(self, key: str) -> bytes | None:
        try:
            response = self._client.get_object(self._location.bucket, key)
        except S3Error as exc:
            if exc.code in _MISSING or exc.code == "NoSuchBucket":
                return None
            raise
        try:
            return response.read()
        finally:
            response.close()
            response.release_conn()

    def _objects(self, prefix: str, *, recursive: bool) -> list[Any]:
        """The objects under `prefix` ([] while the bucket does not exist)."""
        try:
            return list(self._client.list_objects(self._location.bucket, prefix=prefix, recursive=recursive))
        except S3Error as exc:
            if exc.code == "NoSuchBucket":
                return []
            raise

    def _list(self, table: TableId) -> list[SnapshotManifest]:
        manifests = []
        for item in self._objects(self._table_prefix(table), recursive=True):
            if item.object_name is None or not item.object_name.endswith("/" + MANIFEST_NAME):
                continue
            data = self._get(item.object_name)
            if data is None:
                continue  # deleted meanwhile
            try:
                manifests.append(manifest_from_json(data, self._url(item.object_name)))
            except SnapshotCorrupt as exc:
                log.error("ignoring snapshot %s: %s", self._url(item.object_name), exc)
        return newest_first(manifests)

    def _tables(self) -> list[TableId]:
        root = self._root()
        # Not recursive: one entry per "<schema>.<table>/" below the prefix, however many snapshots it has.
        found = (table_from_directory(item.object_name[len(root):].rstrip("/"))
                 for item in self._objects(root, recursive=False)
                 if item.object_name and item.object_name.endswith("/"))
        return [table for table in found if table is not None]

    def _delete(self, manifest_key: str, directory: str) -> None:
        try:
            self._client.remove_object(self._location.bucket, manifest_key)  # invisible first
        except S3Error as exc:
            if exc.code == "NoSuchBucket":
                return
            raise
        keys = [DeleteObject(o.object_name) for o in self._objects(directory, recursive=True) if o.object_name]
        for error in self._client.remove_objects(self._location.bucket, keys):
            log.warning("could not delete %s: %s", error.name, error.message)

    async def _call(self, function, *args):  # type: ignore[no-untyped-def]
        try:
            return await asyncio.to_thread(function, *args)
        except _FAILURES as exc:
            raise SnapshotStoreUnavailable(
                f"S3 snapshot store {self._location.endpoint}/{self._location.bucket}: {exc}") from exc


def _content_type(key: str) -> str:
    if key.endswith(".parquet"):
        return "application/vnd.apache.parquet"
    return "application/x-ndjson" if key.endswith(".jsonl") else "application/json"
