"""JetStream's answers to ingest's publishes, read: PubAcks, error replies, and acks shared by several messages."""

from __future__ import annotations

import json
from collections.abc import Mapping

from laredo_ingest.domain.errors import IngestError, PublishFailed
from laredo_ingest.ports import AckCallback

#: JetStream's error code for a message whose expected predecessor is not the stream's last message.
_WRONG_LAST_SEQUENCE = 10071


class AllAcked:
    """Calls `on_ack` once: with None when all `count` messages are stored, or with the first error."""

    def __init__(self, count: int, on_ack: AckCallback) -> None:
        self._left = count
        self._on_ack: AckCallback | None = on_ack

    def one(self, error: IngestError | None) -> None:
        if self._on_ack is None:
            return
        self._left -= 1
        if error is not None or self._left == 0:
            on_ack, self._on_ack = self._on_ack, None
            on_ack(error)


def pub_ack(data: bytes) -> tuple[int, bool] | None:
    """(sequence, duplicate) of a PubAck; None when it is not one."""
    try:
        ack = json.loads(data)
        return int(ack["seq"]), bool(ack.get("duplicate"))
    except (ValueError, KeyError, TypeError):
        return None


def ack_error(data: bytes, headers: Mapping[str, str] | None, msg_id: str) -> IngestError | None:
    """Why JetStream did not store the message (None: it did, or acknowledged it as a duplicate)."""
    if headers and headers.get("Status") == "503":
        return PublishFailed(f"no JetStream server stored {msg_id} (no responders): the stream's replicas are "
                             "electing a leader, or the stream was deleted; publishing starts again")
    return reply_error(data, msg_id) if b'"error"' in data else None


def reply_error(data: bytes, msg_id: str) -> IngestError:
    try:
        error = json.loads(data).get("error", {})
    except ValueError:
        return PublishFailed(f"unreadable JetStream reply for {msg_id}: {data[:200]!r}")
    code = error.get("err_code")
    if code == _WRONG_LAST_SEQUENCE:
        return PublishFailed(f"JetStream refused {msg_id} because the message published before it is not the "
                             f"stream's last ({error.get('description', error)}): it was lost or rejected, so "
                             "nothing after it is stored; publishing starts again from the first unacknowledged "
                             "change")
    return PublishFailed(f"JetStream rejected {msg_id}: {error.get('description', error)} "
                         f"(code {code if code is not None else '?'})")
