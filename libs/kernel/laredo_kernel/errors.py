"""Error types shared by every service: a base class with a retryable flag and the kind of failure it is."""

from __future__ import annotations

import enum
from typing import ClassVar


class ErrorKind(enum.Enum):
    """What kind of failure an error is, whatever the transport; laredo_core.grpc_errors holds the one map
    from these to gRPC status codes."""

    INVALID_REQUEST = "invalid request"
    NOT_FOUND = "not found"
    PRECONDITION_FAILED = "precondition failed"
    EXHAUSTED = "resource exhausted"
    ABORTED = "aborted"
    UNAVAILABLE = "unavailable"
    TIMED_OUT = "timed out"
    UNIMPLEMENTED = "unimplemented"
    INTERNAL = "internal"


class LaredoError(Exception):
    """Base of every error Laredo raises on purpose. Messages say what failed and what to do. A subclass says
    what kind of failure it is (`kind`), which decides the status a client is answered with."""

    retryable: bool = False
    kind: ClassVar[ErrorKind] = ErrorKind.INTERNAL

    def __init__(self, message: str, *, retryable: bool | None = None) -> None:
        super().__init__(message)
        if retryable is not None:
            self.retryable = retryable


class ProtocolError(LaredoError):
    """Bytes that do not follow the wire format they claim (pgoutput, tuple data, change batch)."""


class ConfigError(LaredoError):
    """The configuration is invalid; the message lists every problem, each with its key."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"invalid configuration ({len(self.problems)} problem(s)):\n{lines}")
