"""Python client library: a local, indexed, live replica of a Laredo table.

    from laredo_client import LaredoClient, Index, Filter

    async with LaredoClient("fanout:4002", "public", "config_document",
                            local_snapshot_path="/var/lib/myapp/laredo-cache.json",
                            lookup_fields=("instance_id", "key"),
                            indexes=[Index("by_instance", "instance_id")],
                            client_id="myapp-instance-abc123") as client:
        await client.await_ready(30)
        row = client.lookup("inst_abc", "rulesets/default")
"""

from laredo_client.blocking import BlockingLaredoClient
from laredo_client.client import LaredoClient
from laredo_client.credentials import BearerToken, TlsOptions
from laredo_client.errors import (
    ClientError,
    ClientFailed,
    ProtocolViolation,
    SequenceGapError,
    ServerChanged,
    StreamSilent,
)
from laredo_client.options import BackoffPolicy, ClientOptions, Filter, FilterKind, Index
from laredo_client.stats import ClientStats
from laredo_client.stream_observer import StreamObserver
from laredo_client.values import Column, Row

__all__ = [
    "BackoffPolicy", "BearerToken", "BlockingLaredoClient", "ClientError", "ClientFailed", "ClientOptions",
    "ClientStats", "Column", "Filter", "FilterKind", "Index", "LaredoClient", "ProtocolViolation", "Row",
    "SequenceGapError", "ServerChanged", "StreamObserver", "StreamSilent", "TlsOptions",
]
