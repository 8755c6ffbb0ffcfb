"""Dead-letter values: which pipeline, which change, why it failed; their JSON-compatible form (pure).

A letter's id derives from where its change came from, so every instance of a target that fails the same change
names the same letter: `s<stream sequence>-c<index>` (a change of a stream message), `s<stream sequence>-m` (the
whole message) or `p<position>` (ingest: a change that never reached the table's subject; `0/16B3748:3` becomes
`p0-16B3748-3`).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from laredo_kernel.changes import TableId
from laredo_kernel.errors import ErrorKind, LaredoError

#: change_index of a letter that stands for a whole stream message.
WHOLE_MESSAGE = -1
_UNSAFE_ID = re.compile(r"[^A-Za-z0-9_-]")


class DeadLetterStoreError(LaredoError):
    """The dead-letter store refused an operation (e.g. its stream cannot be created); see the message."""


class DeadLetterStoreUnavailable(DeadLetterStoreError):
    """The dead-letter store cannot be reached; retry later. Data keeps flowing meanwhile."""

    kind = ErrorKind.UNAVAILABLE
    retryable = True


@dataclass(frozen=True, slots=True)
class PipelineId:
    """One table flowing from one source into one target type: `<source>:<schema>.<table>:<target-type>`."""

    source_id: str
    table: TableId
    target_type: str

    def __str__(self) -> str:
        return f"{self.source_id}:{self.table.schema}.{self.table.name}:{self.target_type}"

    @classmethod
    def parse(cls, text: str) -> PipelineId:
        """Parse a pipeline id; ValueError says what is wrong and shows the expected form."""
        source, sep, rest = text.partition(":")
        table_text, sep2, target = rest.rpartition(":")
        schema, dot, name = table_text.partition(".")
        if not (sep and sep2 and dot and source and target and schema and name):
            raise ValueError(f"pipeline_id {text!r} is malformed; expected <source>:<schema>.<table>:<target-type>, "
                             "e.g. pg:public.users:replication-fanout")
        return cls(source, TableId(schema, name), target)


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A change (or a whole stream message) a pipeline could not apply, with the reason.

    `message` holds the ChangeBatch bytes the change came in (a store keeps only the failed change of it), or the
    bytes as they were when they do not decode; `change_index` is the change's index in `message`, WHOLE_MESSAGE
    for the whole of it. The description (`action`, `position`, `xid`, `old_values`, `new_values`: JSON values as
    clients see them) is filled in by the store from the message; `store_sequence` is the store's order (0 until
    stored). `replays` counts replays that failed.
    """

    pipeline: PipelineId
    letter_id: str
    error: str
    message: bytes = b""
    change_index: int = WHOLE_MESSAGE
    stream_sequence: int = 0
    recorded_unix_ms: int = 0
    recorded_by: str = ""
    replays: int = 0
    action: str = ""
    position: str = ""
    xid: int = 0
    old_values: Mapping[str, Any] | None = None
    new_values: Mapping[str, Any] | None = None
    decodable: bool = False
    store_sequence: int = 0


@dataclass(frozen=True, slots=True)
class DeadLetterPage:
    """Some letters of one pipeline in store order, how many the pipeline has, and its newest store sequence."""

    letters: tuple[DeadLetter, ...] = ()
    total: int = 0
    newest_sequence: int = 0


def change_letter_id(stream_sequence: int, index: int) -> str:
    return f"s{stream_sequence}-c{index}"


def message_letter_id(stream_sequence: int) -> str:
    return f"s{stream_sequence}-m"


def position_letter_id(position: str) -> str:
    return "p" + _UNSAFE_ID.sub("-", position)


def check_letter_id(letter_id: str) -> str:
    """Letter ids become subject tokens: letters, digits, '_' and '-' only."""
    if not letter_id or _UNSAFE_ID.search(letter_id):
        raise ValueError(f"dead-letter id {letter_id!r} is not usable: use letters, digits, '_' and '-' only")
    return letter_id


def letter_to_dict(letter: DeadLetter) -> dict[str, Any]:
    """The JSON-compatible form (stored records, command arguments); `message` as base64."""
    return {
        "pipeline": str(letter.pipeline), "id": letter.letter_id, "error": letter.error,
        "message": base64.b64encode(letter.message).decode("ascii"), "change_index": letter.change_index,
        "stream_sequence": letter.stream_sequence, "recorded_unix_ms": letter.recorded_unix_ms,
        "recorded_by": letter.recorded_by, "replays": letter.replays, "action": letter.action,
        "position": letter.position, "xid": letter.xid, "old": _plain(letter.old_values),
        "new": _plain(letter.new_values), "decodable": letter.decodable,
    }


def letter_from_dict(data: Mapping[str, Any], *, store_sequence: int = 0) -> DeadLetter:
    """Inverse of letter_to_dict; ValueError (or KeyError, TypeError) for a malformed record."""
    old, new = data.get("old"), data.get("new")
    return DeadLetter(
        pipeline=PipelineId.parse(str(data["pipeline"])), letter_id=check_letter_id(str(data["id"])),
        error=str(data.get("error", "")), message=base64.b64decode(str(data.get("message", "")), validate=True),
        change_index=int(data.get("change_index", WHOLE_MESSAGE)), stream_sequence=int(data.get("stream_sequence", 0)),
        recorded_unix_ms=int(data.get("recorded_unix_ms", 0)), recorded_by=str(data.get("recorded_by", "")),
        replays=int(data.get("replays", 0)), action=str(data.get("action", "")),
        position=str(data.get("position", "")), xid=int(data.get("xid", 0)),
        old_values=dict(old) if isinstance(old, Mapping) else None,
        new_values=dict(new) if isinstance(new, Mapping) else None,
        decodable=bool(data.get("decodable", False)), store_sequence=store_sequence,
    )


def _plain(values: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if values is None else dict(values)
