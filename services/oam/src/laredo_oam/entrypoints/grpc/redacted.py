"""OAM answers leave scrubbed: every string of a response goes through the process's Redactor.

Configuration (ListTables), what instances reported (GetStatus: last errors, source details), command outcomes
and error messages may quote a connection string or a configured secret. A Struct entry under a secret-named
key (`secret_key`, `password`, ...) becomes `***`. The users' own data is left exactly as it is: dead letters'
change_data and snapshots' user_meta.
"""

from __future__ import annotations

from typing import Any, TypeVar

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from laredo_core.redaction import REDACTED, Redactor, active, is_secret_key

#: Fields holding the users' data, returned as stored.
USER_DATA_FIELDS = frozenset({
    "laredo.v1.DeadLetterEntry.change_data",
    "laredo.v1.CreateSnapshotRequest.user_meta",
    "laredo.v1.SnapshotInfo.user_meta",
    "laredo.v1.RestoreSnapshotResponse.user_meta",
})
_VALUE = "google.protobuf.Value"

M = TypeVar("M", bound=Message)


def redacted(message: M, redactor: Redactor | None = None) -> M:
    """`message`, scrubbed in place (and returned) by `redactor` (default: the process's)."""
    _scrub(message, redactor or active())
    return message


def _scrub(message: Message, redactor: Redactor) -> None:
    for field, value in message.ListFields():
        if field.full_name in USER_DATA_FIELDS:
            continue
        if field.type == FieldDescriptor.TYPE_STRING:
            if field.is_repeated:
                value[:] = [redactor.text(item) for item in value]
            else:
                setattr(message, field.name, redactor.text(value))
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            if field.message_type.GetOptions().map_entry:
                _scrub_map(value, field.message_type, redactor)
            elif field.is_repeated:
                for item in value:
                    _scrub(item, redactor)
            else:
                _scrub(value, redactor)


def _scrub_map(entries: Any, entry_type: Descriptor, redactor: Redactor) -> None:
    value_field = entry_type.fields_by_name["value"]
    for key in list(entries):
        if value_field.type == FieldDescriptor.TYPE_STRING:
            entries[key] = REDACTED if is_secret_key(key) and entries[key] else redactor.text(entries[key])
        elif value_field.type == FieldDescriptor.TYPE_MESSAGE:
            item = entries[key]
            if is_secret_key(key) and value_field.message_type.full_name == _VALUE and _shown(item):
                item.string_value = REDACTED
            else:
                _scrub(item, redactor)


def _shown(value: Message) -> bool:
    """A Value that shows something: not null, false or an empty string."""
    kind = value.WhichOneof("kind")
    return kind not in (None, "null_value", "bool_value") and not (kind == "string_value" and not value.string_value)
