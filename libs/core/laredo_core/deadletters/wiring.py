"""Dead letters in a consumer's composition root (fan-out, query): store, background writer and recorder."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from laredo_core.config import LaredoSettings
from laredo_core.deadletters.config import DeadLetterSettings, read_dead_letter_settings
from laredo_core.deadletters.nats_store import store_from_settings
from laredo_core.deadletters.recorder import DeadLetterRecorder
from laredo_core.deadletters.store import DeadLetterStore
from laredo_core.deadletters.writer import DeadLetterWriter

log = logging.getLogger(__name__)

FLUSH_TIMEOUT = 10.0  # seconds a stopping service waits for queued letters to be stored


@dataclass
class DeadLetterWiring:
    """What a consumer needs: `recorder` for its sink; run() as a long-lived task; stop() when shutting down."""

    settings: DeadLetterSettings
    recorder: DeadLetterRecorder
    store: DeadLetterStore | None = None
    writer: DeadLetterWriter | None = None

    @property
    def enabled(self) -> bool:
        return self.writer is not None

    def stats(self) -> Mapping[str, Any]:
        if self.writer is None:
            return {"enabled": False}
        return {"enabled": True, **self.writer.stats.report(self.writer.pending)}

    async def run(self) -> None:
        if self.writer is not None:
            await self.writer.run()

    async def flush(self, timeout: float = FLUSH_TIMEOUT) -> None:
        """Wait (bounded) until queued letters are stored; call while run() still runs."""
        if self.writer is None or not self.writer.pending:
            return
        try:
            async with asyncio.timeout(timeout):
                await self.writer.idle()
        except TimeoutError:
            log.error("stopping with %d dead letter(s) not stored (the dead-letter store did not take them within "
                      "%.0fs); their changes stay in the stream", self.writer.pending, timeout)

    async def close(self) -> None:
        if self.store is not None:
            with contextlib.suppress(Exception):  # shutting down: nothing left to do about it
                await self.store.close()


def wire_dead_letters(settings: LaredoSettings, target_type: str, recorded_by: str, *,
                      store: DeadLetterStore | None = None) -> DeadLetterWiring:
    """From the `dead_letters` section; `store` replaces the JetStream store (tests pass the in-memory one)."""
    config = read_dead_letter_settings(settings)
    if not config.enabled:
        return DeadLetterWiring(config, DeadLetterRecorder(None, target_type, recorded_by))
    store = store or store_from_settings(config, client_name=f"laredo-{recorded_by.partition(':')[0]}-deadletters")
    assert store is not None
    writer = DeadLetterWriter(store, max_queue=config.write_queue)
    return DeadLetterWiring(config, DeadLetterRecorder(writer, target_type, recorded_by), store, writer)
