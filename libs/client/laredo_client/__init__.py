"""Python client library: a local, indexed, live replica of a Laredo table (usage: the top-level README)."""

from laredo_client.blocking import BlockingLaredoClient
from laredo_client.client import LaredoClient
from laredo_client.credentials import BearerToken, TlsOptions
from laredo_client.errors import (ClientError, ClientFailed, ProtocolViolation, SequenceGapError, ServerChanged,
                                  StreamSilent)
from laredo_client.options import BackoffPolicy, ClientOptions, Filter, FilterKind, Index
from laredo_client.stats import ClientStats
from laredo_client.stream_observer import StreamObserver
from laredo_client.values import Column, Row

__all__ = [
    "BackoffPolicy", "BearerToken", "BlockingLaredoClient", "ClientError", "ClientFailed", "ClientOptions",
    "ClientStats", "Column", "Filter", "FilterKind", "Index", "LaredoClient", "ProtocolViolation", "Row",
    "SequenceGapError", "ServerChanged", "StreamObserver", "StreamSilent", "TlsOptions",
]
