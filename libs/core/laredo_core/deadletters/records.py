"""Stored dead letters: the letter narrowed to its failed change and described, as one JSON record (version 1).

Shared by every DeadLetterStore adapter (and ingest, which writes letters for tables without a usable key), so a
letter reads back the same from any store. The description comes from decoding the message the way fan-out
does (JSON values as clients see them); an unchanged TOASTed value shows as UNCHANGED_SHOWN.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from google.protobuf.message import DecodeError

from laredo.stream.v1 import change_stream_pb2 as pb
from laredo_core.deadletters.model import WHOLE_MESSAGE, DeadLetter, letter_from_dict, letter_to_dict
from laredo_kernel.errors import ProtocolError
from laredo_kernel.position import END_OF_LSN
from laredo_core.stream.codec import decode_batch
from laredo_kernel.tuples import UNCHANGED

RECORD_VERSION = 1
UNCHANGED_SHOWN = "<unchanged TOASTed value>"


def prepare(letter: DeadLetter) -> DeadLetter:
    """The letter as stored: its message narrowed to the failed change, its description filled in.

    A message that does not decode (or a change index it does not have) is kept whole and undescribed.
    """
    if letter.change_index != WHOLE_MESSAGE:
        narrowed = _single_change(letter.message, letter.change_index)
        if narrowed is not None:
            try:
                batch = decode_batch(narrowed, json_values=True)
            except ProtocolError:
                pass
            else:
                change = batch.changes[0]
                return dataclasses.replace(
                    letter, message=narrowed, change_index=0, decodable=True, action=change.action.value,
                    position=str(change.position), xid=batch.xid, old_values=_shown(change.old),
                    new_values=_shown(change.new))
    try:
        batch = decode_batch(letter.message, json_values=True)
    except ProtocolError:
        return dataclasses.replace(letter, change_index=WHOLE_MESSAGE, decodable=False)
    position = batch.changes[0].position if batch.changes else batch.position(END_OF_LSN)
    return dataclasses.replace(letter, change_index=WHOLE_MESSAGE, decodable=True, action=batch.kind.value,
                               position=str(position), xid=batch.xid, old_values=None, new_values=None)


def encode_record(letter: DeadLetter) -> bytes:
    """prepare() the letter and serialize it."""
    record = {"v": RECORD_VERSION, **letter_to_dict(prepare(letter))}
    return json.dumps(record, separators=(",", ":"), allow_nan=False, default=str).encode("utf-8")


def decode_record(data: bytes, *, store_sequence: int = 0) -> DeadLetter:
    """A stored record back to a letter; ValueError names what is wrong with it."""
    try:
        record = json.loads(data)
        if not isinstance(record, Mapping):
            raise ValueError("not a JSON object")
        if int(record.get("v", 0)) > RECORD_VERSION:
            raise ValueError(f"record version {record.get('v')} is newer than this release reads ({RECORD_VERSION})")
        return letter_from_dict(record, store_sequence=store_sequence)
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"unreadable dead-letter record ({len(data)} bytes): {exc}") from exc


def _single_change(message: bytes, index: int) -> bytes | None:
    """The message with only its change at `index` (every other field kept); None if it has no such change."""
    try:
        batch = pb.ChangeBatch.FromString(message)
    except DecodeError:
        return None
    if not 0 <= index < len(batch.changes):
        return None
    change = pb.Change()
    change.CopyFrom(batch.changes[index])
    del batch.changes[:]
    batch.changes.append(change)
    return batch.SerializeToString()


def _shown(values: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if values is None:
        return None
    return {name: (UNCHANGED_SHOWN if value is UNCHANGED else value) for name, value in values.items()}
