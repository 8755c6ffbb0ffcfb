"""What a client is configured with: server, table, indexes, filters, timeouts and backoff; validated up front."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from laredo_kernel.errors import ConfigError
from laredo_kernel.jsonvalue import to_json_value

from laredo_client.credentials import BearerToken, TlsOptions, parse_address, says_cleartext
from laredo_client.stream_observer import StreamObserver

_SCALARS = (type(None), bool, int, float, str)
#: Entries (or snapshot rows) per message the client asks for. Servers that do not know the field (it is an
#: extension, number 100) ignore it and send one per message, which the client reads as well.
DEFAULT_MAX_BATCH_SIZE = 100


@dataclass(frozen=True, slots=True)
class Index:
    """A named secondary index over one or more fields; `unique` indexes map a value to at most one row."""

    name: str
    fields: tuple[str, ...]
    unique: bool = False

    def __init__(self, name: str, fields: str | Iterable[str], unique: bool = False) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "fields", (fields,) if isinstance(fields, str) else tuple(fields))
        object.__setattr__(self, "unique", unique)


class FilterKind(enum.Enum):
    EQUALS = "equals"
    PREFIX = "prefix"
    IN = "in"


@dataclass(frozen=True, slots=True)
class Filter:
    """One subscription predicate; the server sends only rows matching every filter (AND)."""

    field: str
    kind: FilterKind
    value: Any

    @classmethod
    def equals(cls, field_name: str, value: Any) -> Filter:
        return cls(field_name, FilterKind.EQUALS, _scalar(field_name, value))

    @classmethod
    def prefix(cls, field_name: str, prefix: str) -> Filter:
        if not isinstance(prefix, str):
            raise TypeError(f"prefix filter on {field_name!r} needs a string, got {type(prefix).__name__}")
        return cls(field_name, FilterKind.PREFIX, prefix)

    @classmethod
    def is_in(cls, field_name: str, values: Iterable[Any]) -> Filter:
        return cls(field_name, FilterKind.IN, tuple(_scalar(field_name, v) for v in values))

    def to_json(self) -> dict[str, Any]:
        value = list(self.value) if self.kind is FilterKind.IN else self.value
        return {"field": self.field, "kind": self.kind.value, "value": value}


def _scalar(field_name: str, value: Any) -> Any:
    if not isinstance(value, _SCALARS):
        raise TypeError(f"filter on {field_name!r}: {value!r} is a {type(value).__name__}; "
                        f"use None, bool, int, float or str")
    return to_json_value(value)  # integers beyond 2**53 travel as decimal strings, as row values do


@dataclass(frozen=True, slots=True)
class BackoffPolicy:
    """Reconnect delays: initial, doubled per failed attempt up to maximum; `jitter` is the fraction of each
    delay that is random (0.5: a delay d becomes uniform in [d/2, d]). Reset after a stream reached live."""

    initial: float = 1.0
    maximum: float = 30.0
    multiplier: float = 2.0
    jitter: float = 0.5


@dataclass(frozen=True)
class ClientOptions:
    """Everything a LaredoClient needs; see LaredoClient for what each option does."""

    address: str
    schema: str
    table: str
    local_snapshot_path: Path | None = None
    lookup_fields: tuple[str, ...] = ()
    indexes: tuple[Index, ...] = ()
    client_id: str = ""
    filters: tuple[Filter, ...] = ()
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE
    heartbeat_timeout: float = 30.0
    backoff: BackoffPolicy = field(default_factory=BackoffPolicy)
    channel_credentials: grpc.ChannelCredentials | None = None
    channel_options: tuple[tuple[str, Any], ...] = ()
    bootstrap_from_server_snapshot: bool = False
    stream_observer: StreamObserver | None = None
    tls: TlsOptions | None = None
    token: BearerToken | None = None

    def __post_init__(self) -> None:
        problems = [*_table_problems(self), *_index_problems(self.lookup_fields, self.indexes),
                    *_timing_problems(self), *_security_problems(self)]
        if problems:
            raise ConfigError(problems)

    @property
    def effective_tls(self) -> TlsOptions | None:
        """The TLS settings channels use: `tls`, or the system's roots for an `https://` address."""
        if self.tls is None and parse_address(self.address).https:
            return TlsOptions()
        return self.tls

    @property
    def encrypted(self) -> bool:
        return self.channel_credentials is not None or self.effective_tls is not None


def _table_problems(options: ClientOptions) -> Iterator[str]:
    for name in ("address", "schema", "table"):
        if not getattr(options, name):
            yield f"{name}: required (e.g. address='fanout:4002', schema='public', table='items')"
    if options.bootstrap_from_server_snapshot and options.filters:
        yield ("bootstrap_from_server_snapshot: cannot be combined with filters (a server snapshot holds every row "
               "of the table); drop one of them")
    if options.max_batch_size < 0:
        yield f"max_batch_size: must be >= 0 (0 or 1 = one row or entry per message), got {options.max_batch_size}"


def _index_problems(lookup_fields: Sequence[str], indexes: Sequence[Index]) -> Iterator[str]:
    if any(not f for f in lookup_fields):
        yield "lookup_fields: field names must not be empty"
    seen: set[str] = set()
    for index in indexes:
        if not index.name:
            yield "indexes: every index needs a name"
        elif index.name in seen:
            yield f"indexes: the name {index.name!r} is used twice"
        seen.add(index.name)
        if not index.fields or any(not f for f in index.fields):
            yield f"indexes.{index.name}: needs one or more non-empty field names"


def _security_problems(options: ClientOptions) -> Iterator[str]:
    if options.tls is not None and options.channel_credentials is not None:
        yield "tls: give either tls or channel_credentials, not both"
    if options.tls is not None and says_cleartext(options.address):
        yield (f"address: {options.address!r} names a cleartext scheme but tls is set; write https://host:port "
               "or host:port")


def _timing_problems(options: ClientOptions) -> Iterator[str]:
    if options.heartbeat_timeout <= 0:
        yield f"heartbeat_timeout: must be > 0 seconds, got {options.heartbeat_timeout}"
    b = options.backoff
    if not 0 < b.initial <= b.maximum:
        yield f"backoff: need 0 < initial <= maximum, got initial={b.initial} maximum={b.maximum}"
    if b.multiplier < 1:
        yield f"backoff.multiplier: must be >= 1, got {b.multiplier}"
    if not 0 <= b.jitter <= 1:
        yield f"backoff.jitter: must be within [0, 1], got {b.jitter}"
