"""The client's gRPC channels: one function opens each, with the client's TLS and channel settings."""

from __future__ import annotations

from typing import Any

import grpc

from laredo_client.credentials import parse_address
from laredo_client.options import ClientOptions

#: gRPC's default of 4 MiB is too small for a batch of wide rows; a message over the limit would fail the stream
#: on every retry, so batches of up to this size are accepted unless the application sets its own limit.
MAX_RECEIVE, DEFAULT_MAX_RECEIVE = "grpc.max_receive_message_length", 64 * 1024 * 1024


def open_channel(options: ClientOptions, *extra: tuple[str, Any]) -> grpc.aio.Channel:
    """A new channel to `options.address`: TLS when configured (or the address is `https://`), cleartext
    otherwise; `extra` channel options come first, so the application's own override them."""
    channel_options: tuple[tuple[str, Any], ...] = (*extra, *options.channel_options)
    if not any(name == MAX_RECEIVE for name, _ in options.channel_options):
        channel_options += ((MAX_RECEIVE, DEFAULT_MAX_RECEIVE),)
    target = parse_address(options.address).host_port
    credentials = options.channel_credentials
    tls = options.effective_tls
    if credentials is None and tls is not None:
        credentials = tls.channel_credentials()
        channel_options += tls.channel_options()
    if credentials is not None:
        return grpc.aio.secure_channel(target, credentials, channel_options)
    return grpc.aio.insecure_channel(target, channel_options)
