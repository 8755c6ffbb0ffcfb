"""Errors of the client library: one base class; `retryable` says whether the client reconnects by itself."""

from __future__ import annotations

from laredo_kernel.errors import LaredoError


class ClientError(LaredoError):
    """Base of every error the client library raises on purpose."""


class SequenceGapError(ClientError, RuntimeError):
    """The server skipped or repeated a journal sequence within one stream; the client reconnects by position."""

    retryable = True


class StreamSilent(ClientError):
    """No message (heartbeats included) arrived within the heartbeat timeout: the connection is treated as dead."""

    retryable = True


class ProtocolViolation(ClientError):
    """A message arrived where the Sync stream grammar does not allow it; the client reconnects."""

    retryable = True


class ServerChanged(ClientError):
    """A resume by sequence reached a different server instance, where that sequence means nothing."""

    retryable = True


class ClientFailed(ClientError):
    """The server refused the subscription for good (bad table, bad filter, unknown service); no more retries."""
