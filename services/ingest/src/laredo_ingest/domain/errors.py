"""Errors the ingest service raises on purpose; each says what failed and what to do."""

from __future__ import annotations

from laredo_kernel.errors import LaredoError


class IngestError(LaredoError):
    """Base of every ingest error."""


class SourceUnavailable(IngestError):
    """PostgreSQL cannot be reached or the connection broke; retried with backoff."""

    retryable = True


class SourceMisconfigured(IngestError):
    """The PostgreSQL server is not set up for logical replication; an operator must act."""


class WalLevelNotLogical(SourceMisconfigured):
    """wal_level is not 'logical'."""


class MissingReplicationPrivilege(SourceMisconfigured):
    """The role has neither REPLICATION nor SUPERUSER."""


class ReplicationCapacityExhausted(SourceMisconfigured):
    """Every replication slot or WAL sender of the server is in use; retried, since one may be freed."""

    retryable = True


class TableWithoutKey(SourceMisconfigured):
    """A configured table has no usable key and keyless_tables = fail."""


class NoTableToServe(TableWithoutKey):
    """Every configured table is refused (see refuse_unsafe_tables); retried, so a fixed table is picked up."""

    retryable = True


class SlotLost(IngestError):
    """The replication slot disappeared or was invalidated while in use; the next start re-baselines."""

    retryable = True


class TableNotFound(IngestError):
    """A configured table does not exist in the source database."""


class PublicationError(IngestError):
    """The publication is missing, incomplete, or cannot be created or altered."""


class SlotInUse(IngestError):
    """Another process streams from the replication slot; retried, since it may be shutting down."""

    retryable = True


class ReplicationInterrupted(IngestError):
    """The replication stream ended or broke; streaming restarts from the slot."""

    retryable = True


class PublishFailed(IngestError):
    """JetStream rejected a message or did not acknowledge it in time; streaming restarts from the slot."""

    retryable = True


class StreamSetupFailed(IngestError):
    """The JetStream stream or the state bucket cannot be created or updated."""


class StateStoreUnavailable(IngestError):
    """The ingest state (NATS KV) cannot be read or written; retried with backoff."""

    retryable = True
