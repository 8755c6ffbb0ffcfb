"""The one place fan-out errors become gRPC status codes."""

from __future__ import annotations

import grpc

from laredo_fanout.domain.errors import (
    ClientFellBehind,
    FanoutError,
    InvalidSyncRequest,
    NotAvailableYet,
    TargetNotFound,
    TooManyClients,
)

_STATUS: tuple[tuple[type[FanoutError], grpc.StatusCode], ...] = (
    (InvalidSyncRequest, grpc.StatusCode.INVALID_ARGUMENT),
    (TargetNotFound, grpc.StatusCode.NOT_FOUND),
    (TooManyClients, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (ClientFellBehind, grpc.StatusCode.ABORTED),
    (NotAvailableYet, grpc.StatusCode.UNIMPLEMENTED),
)


def status_for(error: FanoutError) -> tuple[grpc.StatusCode, str]:
    for error_type, code in _STATUS:
        if isinstance(error, error_type):
            return code, str(error)
    return grpc.StatusCode.INTERNAL, str(error)
