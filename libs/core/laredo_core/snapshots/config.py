"""Where a table's snapshots are kept: the `store` and `store_config` keys of a target's `snapshot` section."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from laredo_core.config.reader import Reader
from laredo_core.snapshots.format import FORMAT, FORMATS

STORES = ("local", "s3", "minio")  # minio: the same S3 store under its product name
DEFAULT_SNAPSHOT_PATH = "/var/lib/laredo/fanout-snapshots"
DEFAULT_S3_PREFIX = "laredo/fanout-snapshots"


@dataclass(frozen=True, slots=True)
class StoreConfig:
    kind: str = "local"  # local | s3
    path: str = DEFAULT_SNAPSHOT_PATH
    bucket: str = ""
    prefix: str = DEFAULT_S3_PREFIX
    endpoint: str = ""  # host:port (a scheme, if given, sets `secure`)
    access_key: str = ""
    secret_key: str = field(default="", repr=False)
    region: str = "us-east-1"
    secure: bool = True
    ca_file: str = ""  # PEM CA that verifies the endpoint's certificate (a private CA); empty: the system's CAs

    @property
    def location(self) -> str:
        """Where the snapshots are, for people: the directory, or s3://bucket/prefix (never a credential)."""
        if self.kind == "local":
            return self.path
        prefix = self.prefix.strip("/")
        return f"s3://{self.bucket}/{prefix}" if prefix else f"s3://{self.bucket}"


def read_snapshot_store(snapshot: Reader) -> StoreConfig:
    """`store` and `store_config` of a `snapshot { ... }` section; problems are added to the reader's list.

    The caller reads (and checks for unknown keys) the rest of the section.
    """
    return read_store_config(snapshot.string("store", "local", choices=STORES), snapshot.section("store_config"))


def read_snapshot_format(snapshot: Reader) -> str:
    """The `serializer` of a `snapshot { ... }` section: the format new snapshots are written in (jsonl, the
    default, or parquet). Readers take each snapshot's format from its manifest, so it may change at any time."""
    return snapshot.string("serializer", FORMAT, choices=FORMATS)


def read_store_config(kind: str, r: Reader) -> StoreConfig:
    """The `store_config` section of a store of `kind` (local, s3 or minio), every problem reported at once."""
    if kind == "local":
        store = StoreConfig(path=r.string("path", DEFAULT_SNAPSHOT_PATH))
        r.check_unknown()
        return store
    endpoint = r.string("endpoint", "")
    scheme, sep, host = endpoint.partition("://")
    secure_default = scheme != "http" if sep else True
    store = StoreConfig(
        kind="s3", bucket=r.string("bucket", ""), prefix=r.string("prefix", DEFAULT_S3_PREFIX),
        endpoint=(host if sep else endpoint).rstrip("/"), access_key=r.string("access_key", ""),
        secret_key=r.string("secret_key", ""), region=r.string("region", "us-east-1"),
        secure=r.boolean("secure", secure_default), ca_file=r.string("ca_file", ""),
    )
    if store.ca_file and not store.secure:
        r.problem("ca_file", "verifies a TLS endpoint: set secure = true (or an https:// endpoint), or remove it")
    elif store.ca_file and not Path(store.ca_file).is_file():
        r.problem("ca_file", f"no file at {store.ca_file!r} (expected the PEM certificate of the CA that signs the "
                             "endpoint's certificate)")
    if not store.bucket:
        r.problem("bucket", "is required for store = s3 (the bucket snapshots go to)")
    if not store.endpoint:
        r.problem("endpoint", "is required for store = s3, e.g. minio:9000 or https://s3.eu-west-1.amazonaws.com")
    if sep and scheme not in ("http", "https"):
        r.problem("endpoint", f"scheme must be http:// or https://, got {scheme}://")
    r.check_unknown()
    return store
