"""The JetStream side of starting a publishing session: the change stream and the dead-letter stream exist
with the configured settings, and the stream's last message says where the new session continues."""

from __future__ import annotations

import logging

import nats.errors
import nats.js.errors
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, StorageType, StreamConfig

from laredo_kernel.errors import ProtocolError
from laredo_core.stream.codec import decode_batch
from laredo_core.stream.naming import HEADER_MSG_ID

from laredo_ingest.domain.errors import StreamSetupFailed
from laredo_ingest.domain.start_plan import StreamTail
from laredo_ingest.ports import StreamSpec

log = logging.getLogger(__name__)

#: JetStream not answering: no server, or a cluster electing a stream's leader. Worth a retry.
UNANSWERED = (nats.errors.TimeoutError, nats.errors.NoRespondersError, nats.errors.ConnectionClosedError)
#: How many messages from the stream's end read_tail() reads at most to find the last change batch.
TAIL_SEARCH = 100


async def ensure_change_stream(js: JetStreamContext, spec: StreamSpec) -> None:
    """Create the stream, or update it when its settings differ from the spec."""
    config = StreamConfig(name=spec.name, subjects=list(spec.subjects), storage=StorageType.FILE,
                          duplicate_window=spec.duplicate_window, max_age=spec.max_age,
                          max_bytes=spec.max_bytes, num_replicas=spec.replicas)
    try:
        try:
            info = await js.stream_info(spec.name)
        except nats.js.errors.NotFoundError:
            await js.add_stream(config)
            log.info("created JetStream stream %s for %s", spec.name, ", ".join(spec.subjects))
        else:
            if _differs(info.config, config):
                await js.update_stream(config)
                log.info("updated JetStream stream %s to the configured settings", spec.name)
    except nats.js.errors.APIError as exc:
        raise StreamSetupFailed(f"cannot create or update JetStream stream {spec.name}: {exc.description} "
                                f"(code {exc.err_code}); check the stream settings") from exc
    except UNANSWERED as exc:
        raise StreamSetupFailed(f"JetStream did not answer for stream {spec.name} ({exc!r}); is nats-server "
                                "running with JetStream enabled (-js)?", retryable=True) from exc


async def ensure_dead_letter_stream(js: JetStreamContext, config: StreamConfig) -> None:
    """Created when missing; its limits are the dead-letter store's business (it updates them)."""
    try:
        await js.stream_info(config.name)
    except nats.js.errors.NotFoundError:
        try:
            await js.add_stream(config)
        except nats.js.errors.APIError as exc:
            raise StreamSetupFailed(f"cannot create the dead-letter stream {config.name}: {exc.description} "
                                    f"(code {exc.err_code}); a source named 'deadletter' overlaps its "
                                    "subjects, rename it") from exc
        log.info("created JetStream stream %s for dead letters", config.name)


async def read_tail(js: JetStreamContext, name: str) -> StreamTail | None:
    """The stream's newest message that is a change batch (its last one, unless someone else wrote bytes that
    are not one to the source's subjects: those are skipped, up to TAIL_SEARCH of them); None: there is none."""
    try:
        info = await js.stream_info(name)
        first, last = info.state.first_seq, info.state.last_seq
        for sequence in range(last, max(first, last - TAIL_SEARCH, 1) - 1, -1):
            try:
                raw = await js.get_msg(name, sequence)
                batch = decode_batch(raw.data or b"")
            except nats.js.errors.NotFoundError:
                continue  # deleted, or expired meanwhile
            except ProtocolError as exc:
                log.warning("message %d of JetStream stream %s is not a change batch (%s); another publisher "
                            "writes to the source's subjects", sequence, name, exc)
                continue
            return StreamTail(last, batch.epoch, batch.commit_lsn)
    except (nats.errors.Error, nats.js.errors.APIError) as exc:
        raise StreamSetupFailed(f"cannot read the last message of JetStream stream {name} ({exc!r})",
                                retryable=True) from exc
    return None


async def read_msg_ids(js: JetStreamContext, spec: StreamSpec, first: int, count: int) -> list[tuple[int, str]]:
    """(sequence, Nats-Msg-Id or "") of up to `count` of the stream's messages from sequence `first` on, read
    through a short-lived consumer that delivers headers only (thousands take milliseconds, unlike one request
    per message)."""
    config = ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=first,
                            ack_policy=AckPolicy.NONE, headers_only=True, mem_storage=True,
                            inactive_threshold=30.0, filter_subjects=list(spec.subjects))
    found: list[tuple[int, str]] = []
    try:
        last = min((await js.stream_info(spec.name)).state.last_seq, first + count - 1)
        if last < first:
            return found
        subscription = await js.pull_subscribe("", stream=spec.name, config=config)
        try:
            while not found or found[-1][0] < last:
                try:
                    msgs = await subscription.fetch(min(last - first + 1, 1000), timeout=5.0)
                except nats.errors.TimeoutError:
                    break  # the rest was deleted meanwhile (limits)
                found.extend((m.metadata.sequence.stream, (m.headers or {}).get(HEADER_MSG_ID, "")) for m in msgs)
        finally:
            await subscription.unsubscribe()
    except (nats.errors.Error, nats.js.errors.APIError) as exc:
        raise StreamSetupFailed(f"cannot read messages from sequence {first} of JetStream stream {spec.name} to "
                                f"check their order ({exc!r})", retryable=True) from exc
    return [(sequence, msg_id) for sequence, msg_id in found if sequence <= last]


def _differs(current: StreamConfig, wanted: StreamConfig) -> bool:
    def close(a: float | None, b: float | None) -> bool:
        return abs((a or 0.0) - (b or 0.0)) < 1e-3

    return (sorted(current.subjects or []) != sorted(wanted.subjects or [])
            or not close(current.duplicate_window, wanted.duplicate_window)
            or not close(current.max_age, wanted.max_age)
            or (current.max_bytes or -1) != (wanted.max_bytes or -1)
            or (current.num_replicas or 1) != (wanted.num_replicas or 1))
