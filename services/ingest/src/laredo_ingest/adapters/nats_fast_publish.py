"""A cheaper nats-py publish and ack path for the ingest hot path: HPUB frames built here, acks taken early.

nats-py's Client.publish validates the subject and every header with regular expressions and encodes
the header block field by field, on every call; for one small transaction per message that is a large
share of ingest's CPU. Ingest's subjects come from laredo_core.stream.naming (always valid) and its
header values are sanitised here, so the frame is written straight into nats-py's outgoing buffer, the
way Client._send_publish does. This leans on nats-py internals (pinned <3): when they are not there, or
while the client is not connected (its own buffering rules then apply), the public publish() is used.

Acks: every JetStream PubAck would otherwise become a Msg object queued to the subscription's task and
handed to a coroutine callback. intercept_replies() hands the header-less replies of one subscription
(the PubAcks) straight to a plain function instead; replies with headers (a 503 "no responders") still
take the subscription's normal path.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from nats.aio.client import Client

_NEWLINES = str.maketrans({"\r": " ", "\n": " "})
_INTERNALS = ("_send_command", "_flush_queue", "_flush_pending", "stats")


def sanitize(value: str) -> str:
    """A header value with CR and LF as spaces (as nats-py does)."""
    return value.translate(_NEWLINES)


#: How long a written frame may wait for more before the socket write: one system call then carries the
#: messages of several reads of the replication stream (they come every few dozen microseconds under load).
FLUSH_DELAY_SECONDS = 0.0005


class FastPublisher:
    """Writes HPUB frames into one client's outgoing buffer and flushes them at most every FLUSH_DELAY."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.fast = all(hasattr(client, name) for name in _INTERNALS)
        self._flush_scheduled = False

    async def publish(self, subject: str, reply: str, block: bytes, payload: bytes) -> None:
        """block: the NATS header block (values sanitized). Raises what Client.publish raises (MaxPayloadError,
        ConnectionClosedError, ...)."""
        client = self.client
        if not self.fast or not client.is_connected or len(payload) > client.max_payload:
            await client.publish(subject, payload, reply=reply, headers=_as_mapping(block))
            return
        command = b"".join((f"HPUB {subject} {reply} {len(block)} {len(block) + len(payload)}\r\n".encode(),
                            block, payload, b"\r\n"))
        client.stats["out_msgs"] += 1
        client.stats["out_bytes"] += len(payload)
        await client._send_command(command)  # noqa: SLF001 - see the module docstring
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_later(FLUSH_DELAY_SECONDS, self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self.client._flush_queue is not None and self.client._flush_queue.empty():  # noqa: SLF001
            asyncio.ensure_future(self.client._flush_pending())  # noqa: SLF001


def _as_mapping(block: bytes) -> dict[str, str]:
    lines = block.decode().split("\r\n")[1:]
    return dict(line.split(": ", 1) for line in lines if line)


ReplyHandler = Callable[[bytes, bytes], None]  # (subject, payload)


def intercept_replies(client: Client, sid: int, handler: ReplyHandler) -> bool:
    """Route header-less messages of subscription `sid` to `handler`; False when nats-py lacks the hook."""
    original = getattr(client, "_process_msg", None)
    if original is None or not hasattr(client, "stats"):
        return False
    original = getattr(original, "laredo_original", original)

    async def process_msg(msg_sid: int, subject: bytes, reply: bytes, data: bytes, headers: bytes) -> None:
        if msg_sid == sid and not headers:
            client.stats["in_msgs"] += 1
            client.stats["in_bytes"] += len(data)
            handler(subject, data)
            return
        await original(msg_sid, subject, reply, data, headers)

    process_msg.laredo_original = original  # type: ignore[attr-defined]
    client._process_msg = process_msg  # type: ignore[method-assign]  # noqa: SLF001 - see the module docstring
    return True
