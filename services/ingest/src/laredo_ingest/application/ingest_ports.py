"""The ports one ingest service uses, bundled for the composition root and the use cases."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from laredo_ingest.ports import (
    ChangePublisher,
    MessageSizeLimit,
    Observer,
    ReplicationStream,
    SourceDatabase,
    StateStore,
)


@dataclasses.dataclass(frozen=True, slots=True)
class IngestPorts:
    database: Callable[[], SourceDatabase]  # a new, unopened connection per call
    replication: Callable[[], ReplicationStream]  # a new, unopened walsender connection per call
    publisher: ChangePublisher
    state: StateStore
    observer: Observer
    message_limit: MessageSizeLimit | None = None  # None: only stream.max_batch_bytes bounds messages
