"""JetStream names for one source: stream, subjects, message ids and headers."""

from __future__ import annotations

import re

from laredo_kernel.changes import TableId
from laredo_kernel.position import format_lsn

HEADER_MSG_ID = "Nats-Msg-Id"
HEADER_KIND = "Laredo-Kind"
HEADER_COMMIT_LSN = "Laredo-Commit-Lsn"
HEADER_END_LSN = "Laredo-End-Lsn"
HEADER_TABLE = "Laredo-Table"
#: JetStream stores a message only if the stream's last message is the one named (see ingest's publisher).
HEADER_EXPECTED_LAST_SEQUENCE = "Nats-Expected-Last-Sequence"

_UNSAFE_IN_TOKEN = re.compile(r"[^A-Za-z0-9_-]")


def escape_token(text: str) -> str:
    """Make an identifier a single NATS subject token: keep [A-Za-z0-9_-], '%XX' for each other byte.

    Injective, so two different identifiers never share a subject.
    """
    return _UNSAFE_IN_TOKEN.sub(lambda m: "".join(f"%{b:02X}" for b in m.group().encode("utf-8")), text) or "%"


def stream_name(prefix: str, source_id: str) -> str:
    """JetStream stream name: letters, digits, '_' and '-' only."""
    raw = f"{prefix}_{source_id}".upper()
    return re.sub(r"[^A-Z0-9_-]", lambda m: f"_{ord(m.group()):02X}", raw)


def source_subject_filter(prefix: str, source_id: str) -> str:
    return f"{prefix}.{escape_token(source_id)}.>"


def table_subject(prefix: str, source_id: str, table: TableId) -> str:
    return f"{prefix}.{escape_token(source_id)}.table.{escape_token(table.schema)}.{escape_token(table.name)}"


def deadletter_subject(prefix: str, source_id: str, table: TableId) -> str:
    """Where ingest puts a table's messages that consumers cannot apply (e.g. the table has no usable key)."""
    return (f"{prefix}.{escape_token(source_id)}.deadletter.{escape_token(table.schema)}."
            f"{escape_token(table.name)}")


def transaction_msg_id(source_id: str, commit_lsn: int, table: TableId, chunk: int) -> str:
    """Dedup id of one chunk of one table's changes in one transaction: stable across replays."""
    return f"{source_id}:tx:{format_lsn(commit_lsn)}:{table}:{chunk}"


def baseline_msg_id(source_id: str, baseline_id: str, table: TableId, chunk: int) -> str:
    return f"{source_id}:bl:{baseline_id}:{table}:{chunk}"


def epoch_msg_id(msg_id: str, epoch: int) -> str:
    """The Nats-Msg-Id of a message of WAL epoch `epoch`: positions of a new epoch repeat earlier ones (the
    WAL started again lower), so their ids must not be taken for duplicates of the earlier messages."""
    return f"{msg_id}@e{epoch}" if epoch else msg_id


def control_msg_id(source_id: str, kind: str, lsn: int, table: TableId, discriminator: str = "") -> str:
    suffix = f":{discriminator}" if discriminator else ""
    return f"{source_id}:{kind}:{format_lsn(lsn)}:{table}{suffix}"
