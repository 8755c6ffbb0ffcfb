"""The one place fan-out errors become gRPC status codes."""

from __future__ import annotations

import grpc
from laredo_kernel.errors import LaredoError

from laredo_fanout.domain.errors import (
    ClientFellBehind,
    ClientTooSlow,
    FanoutError,
    InstanceBehind,
    InvalidSyncRequest,
    NotAvailableYet,
    SnapshotCorrupt,
    SnapshotNotFound,
    SnapshotsNotConfigured,
    SnapshotStoreUnavailable,
    TargetDrained,
    TargetNotFound,
    TooManyClients,
)

_STATUS: tuple[tuple[type[LaredoError], grpc.StatusCode], ...] = (
    (InvalidSyncRequest, grpc.StatusCode.INVALID_ARGUMENT),
    (TargetNotFound, grpc.StatusCode.NOT_FOUND),
    (SnapshotNotFound, grpc.StatusCode.NOT_FOUND),
    (TooManyClients, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (ClientTooSlow, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (ClientFellBehind, grpc.StatusCode.ABORTED),
    (TargetDrained, grpc.StatusCode.UNAVAILABLE),
    (InstanceBehind, grpc.StatusCode.UNAVAILABLE),
    (SnapshotsNotConfigured, grpc.StatusCode.FAILED_PRECONDITION),
    (SnapshotCorrupt, grpc.StatusCode.INTERNAL),
    (SnapshotStoreUnavailable, grpc.StatusCode.INTERNAL),
    (NotAvailableYet, grpc.StatusCode.UNIMPLEMENTED),
)


def status_for(error: LaredoError) -> tuple[grpc.StatusCode, str]:
    for error_type, code in _STATUS:
        if isinstance(error, error_type):
            return code, str(error)
    return grpc.StatusCode.INTERNAL, str(error)
