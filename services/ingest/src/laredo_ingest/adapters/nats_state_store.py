"""StateStore in a NATS JetStream key-value bucket: one JSON record per source id (layout: README, "Ingest state")."""

from __future__ import annotations

import asyncio
import json
import re
import time

import nats.js.errors
from nats.js.api import KeyValueConfig, StorageType
from nats.js.kv import KeyValue

from laredo_kernel.position import format_lsn, parse_lsn

from laredo_ingest.adapters.nats_connection import NatsConnection
from laredo_ingest.adapters.nats_stream_setup import UNANSWERED
from laredo_ingest.domain.baseline_reason import TableBaseline
from laredo_ingest.domain.errors import IngestError, StateStoreUnavailable
from laredo_ingest.domain.start_plan import IngestState

DEFAULT_BUCKET = "laredo_ingest"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_TRANSIENT = (*UNANSWERED, asyncio.TimeoutError)


def state_key(source_id: str) -> str:
    return _UNSAFE.sub(lambda m: "".join(f"={b:02X}" for b in m.group().encode()), source_id) or "="


class NatsKvStateStore:
    def __init__(self, connection: NatsConnection, *, bucket: str = DEFAULT_BUCKET, replicas: int = 1) -> None:
        self._connection = connection
        self._bucket = bucket
        self._replicas = replicas
        self._kv: KeyValue | None = None

    async def get(self, source_id: str) -> IngestState | None:
        kv = await self._open()
        try:
            entry = await kv.get(state_key(source_id))
        except (nats.js.errors.KeyNotFoundError, nats.js.errors.KeyDeletedError):
            return None
        except (*_TRANSIENT, nats.js.errors.APIError) as exc:
            raise self._unavailable("reading", exc) from exc
        return _decode(entry.value or b"", source_id)

    async def put(self, source_id: str, state: IngestState) -> None:
        kv = await self._open()
        try:
            await kv.put(state_key(source_id), _encode(state))
        except (*_TRANSIENT, nats.js.errors.APIError) as exc:
            raise self._unavailable("writing", exc) from exc

    async def _open(self) -> KeyValue:
        if self._kv is None:
            try:
                js = await self._connection.jetstream()
                try:
                    self._kv = await js.key_value(self._bucket)
                except nats.js.errors.BucketNotFoundError:
                    self._kv = await js.create_key_value(KeyValueConfig(
                        bucket=self._bucket, history=5, storage=StorageType.FILE, replicas=self._replicas,
                        description="Laredo ingest state per source"))
            except (*_TRANSIENT, nats.js.errors.APIError) as exc:
                raise self._unavailable("opening", exc) from exc
        return self._kv

    def _unavailable(self, what: str, exc: Exception) -> StateStoreUnavailable:
        """Timeouts and JetStream 503s are retried; other JetStream API errors need an operator."""
        retryable = not isinstance(exc, nats.js.errors.APIError) or exc.code == 503
        return StateStoreUnavailable(f"{what} ingest state in NATS KV bucket {self._bucket} failed: {exc!r}"
                                     + ("" if retryable else "; check the bucket and the JetStream limits"),
                                     retryable=retryable)


def _encode(state: IngestState) -> bytes:
    return json.dumps({
        "slot_name": state.slot_name, "system_identifier": state.system_identifier,
        "baseline_lsn": format_lsn(state.baseline_lsn), "baseline_complete": state.baseline_complete,
        "tables": list(state.tables), "baseline_id": state.baseline_id,
        "reload_tables": list(state.reload_tables), "paused": state.paused, "epoch": state.epoch,
        "baselines": {b.table: b.report() for b in state.baselines},
        "updated_unix_ms": int(time.time() * 1000),
    }, separators=(",", ":")).encode()


def _decode(data: bytes, source_id: str) -> IngestState:
    try:
        doc = json.loads(data)
        return IngestState(str(doc["slot_name"]), str(doc["system_identifier"]), parse_lsn(doc["baseline_lsn"]),
                           bool(doc["baseline_complete"]), tuple(doc["tables"]), str(doc.get("baseline_id", "")),
                           tuple(doc.get("reload_tables", ())), bool(doc.get("paused", False)),
                           int(doc.get("epoch", 0)),
                           tuple(TableBaseline.from_report(t, b) for t, b in (doc.get("baselines") or {}).items()))
    except (ValueError, KeyError, TypeError) as exc:
        raise IngestError(f"ingest state of source {source_id} is unreadable ({exc!r}); delete the key to "
                          "force a new baseline") from exc
