"""BlockingLaredoClient: the asyncio client driven by a private event loop thread, for non-async programs."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from laredo_client.client import LaredoClient, ReplicaReads
from laredo_client.errors import ClientFailed

T = TypeVar("T")


class BlockingLaredoClient(ReplicaReads):
    """Same options and methods as LaredoClient, blocking. Replication runs on a private thread; reads are
    served from the caller's thread (the rows are guarded by a lock) and never wait for the network.
    Listeners run on the private thread: keep them quick and thread-safe."""

    def __init__(self, address: str, schema: str, table: str, **options: Any) -> None:
        self._client = LaredoClient(address, schema, table, **options)  # validates the options here
        self._replica, self.stats = self._client._replica, self._client.stats  # the reads of ReplicaReads
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name=f"laredo-client {schema}.{table}")
        self._thread.start()

    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        if not self._thread.is_alive():
            coroutine.close()
            raise RuntimeError("this client was stopped; create a new one")
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def start(self) -> None:
        self._call(self._client.start())

    def await_ready(self, timeout: float = 30.0) -> None:
        self._call(self._client.await_ready(timeout))

    def save_local_snapshot(self) -> None:
        self._call(self._client.save_local_snapshot())

    def stop(self) -> None:
        """Stop replicating, save the local snapshot (if configured) and end the private thread. Idempotent."""
        if not self._thread.is_alive():
            return
        try:
            self._call(self._client.stop())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()

    def __enter__(self) -> BlockingLaredoClient:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def ready(self) -> bool:
        return self._client.ready

    @property
    def failure(self) -> ClientFailed | None:
        return self._client.failure

    @property
    def status(self) -> str:
        return self._client.status
