"""The SnapshotStore port on S3 (MinIO in production) through the minio SDK, which is blocking (run in threads).

Keys: <prefix>/<schema>.<table>/<snapshot_id>/<file>; an object appears whole or not at all. The bucket is created
on first use when missing.
"""

from __future__ import annotations

import io
import logging
from dataclasses import dataclass
from typing import Any

import urllib3
from minio import Minio
from minio.deleteobjects import DeleteObject
from minio.error import MinioException, S3Error

from laredo_kernel.changes import TableId

from laredo_core.snapshots.file_store import FileSnapshotStore
from laredo_core.snapshots.errors import SnapshotNotFound
from laredo_core.snapshots.format import MANIFEST_NAME, table_directory, table_from_directory

log = logging.getLogger(__name__)
_MISSING = ("NoSuchKey", "NoSuchObject")


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


class S3SnapshotStore(FileSnapshotStore):
    _failures = (MinioException, urllib3.exceptions.HTTPError, OSError, ValueError)

    def __init__(self, location: S3Location) -> None:
        self._location = location
        self._name = f"S3 snapshot store {location.endpoint}/{location.bucket}"
        http = urllib3.PoolManager(
            timeout=urllib3.Timeout(connect=min(5.0, location.timeout), read=location.timeout),
            retries=urllib3.Retry(total=location.retries, backoff_factor=0.2,
                                  status_forcelist=(500, 502, 503, 504)),
            cert_reqs="CERT_REQUIRED", ca_certs=location.ca_file or None)
        self._client = Minio(location.endpoint, access_key=location.access_key or None,
                             secret_key=location.secret_key or None, secure=location.secure,
                             region=location.region or None, http_client=http)
        self._bucket_checked = False

    def _where(self, table: TableId, snapshot_id: str, name: str = "") -> str:
        if not snapshot_id or "/" in snapshot_id:
            raise SnapshotNotFound(snapshot_id)
        return f"{self._table_prefix(table)}{snapshot_id}/{name}"

    def _root(self) -> str:
        prefix = self._location.prefix.strip("/")
        return f"{prefix}/" if prefix else ""

    def _table_prefix(self, table: TableId) -> str:
        return f"{self._root()}{table_directory(table)}/"

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

    def _manifest_files(self, table: TableId) -> list[str]:
        return [item.object_name for item in self._objects(self._table_prefix(table), recursive=True)
                if item.object_name is not None and item.object_name.endswith("/" + MANIFEST_NAME)]

    def _tables(self) -> list[TableId]:
        root = self._root()
        # Not recursive: one entry per "<schema>.<table>/" below the prefix, however many snapshots it has.
        found = (table_from_directory(item.object_name[len(root):].rstrip("/"))
                 for item in self._objects(root, recursive=False)
                 if item.object_name and item.object_name.endswith("/"))
        return [table for table in found if table is not None]

    def _delete(self, table: TableId, snapshot_id: str) -> None:
        try:
            self._client.remove_object(self._location.bucket, self._where(table, snapshot_id, MANIFEST_NAME))
        except S3Error as exc:  # the manifest first: invisible, then gone
            if exc.code == "NoSuchBucket":
                return
            raise
        directory = self._where(table, snapshot_id)
        keys = [DeleteObject(o.object_name) for o in self._objects(directory, recursive=True) if o.object_name]
        for error in self._client.remove_objects(self._location.bucket, keys):
            log.warning("could not delete %s: %s", error.name, error.message)


def _content_type(key: str) -> str:
    if key.endswith(".parquet"):
        return "application/vnd.apache.parquet"
    return "application/x-ndjson" if key.endswith(".jsonl") else "application/json"
