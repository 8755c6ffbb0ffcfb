from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class BatchKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BATCH_KIND_UNSPECIFIED: _ClassVar[BatchKind]
    BATCH_KIND_TRANSACTION: _ClassVar[BatchKind]
    BATCH_KIND_BASELINE_BEGIN: _ClassVar[BatchKind]
    BATCH_KIND_BASELINE_ROWS: _ClassVar[BatchKind]
    BATCH_KIND_BASELINE_END: _ClassVar[BatchKind]
    BATCH_KIND_SCHEMA_CHANGE: _ClassVar[BatchKind]
    BATCH_KIND_RESYNC_REQUIRED: _ClassVar[BatchKind]

class Action(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ACTION_UNSPECIFIED: _ClassVar[Action]
    ACTION_INSERT: _ClassVar[Action]
    ACTION_UPDATE: _ClassVar[Action]
    ACTION_DELETE: _ClassVar[Action]
    ACTION_TRUNCATE: _ClassVar[Action]

class ReplicaIdentity(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REPLICA_IDENTITY_UNSPECIFIED: _ClassVar[ReplicaIdentity]
    REPLICA_IDENTITY_DEFAULT: _ClassVar[ReplicaIdentity]
    REPLICA_IDENTITY_NOTHING: _ClassVar[ReplicaIdentity]
    REPLICA_IDENTITY_FULL: _ClassVar[ReplicaIdentity]
    REPLICA_IDENTITY_INDEX: _ClassVar[ReplicaIdentity]
BATCH_KIND_UNSPECIFIED: BatchKind
BATCH_KIND_TRANSACTION: BatchKind
BATCH_KIND_BASELINE_BEGIN: BatchKind
BATCH_KIND_BASELINE_ROWS: BatchKind
BATCH_KIND_BASELINE_END: BatchKind
BATCH_KIND_SCHEMA_CHANGE: BatchKind
BATCH_KIND_RESYNC_REQUIRED: BatchKind
ACTION_UNSPECIFIED: Action
ACTION_INSERT: Action
ACTION_UPDATE: Action
ACTION_DELETE: Action
ACTION_TRUNCATE: Action
REPLICA_IDENTITY_UNSPECIFIED: ReplicaIdentity
REPLICA_IDENTITY_DEFAULT: ReplicaIdentity
REPLICA_IDENTITY_NOTHING: ReplicaIdentity
REPLICA_IDENTITY_FULL: ReplicaIdentity
REPLICA_IDENTITY_INDEX: ReplicaIdentity

class TableRef(_message.Message):
    __slots__ = ("schema", "name", "relation_id")
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    RELATION_ID_FIELD_NUMBER: _ClassVar[int]
    schema: str
    name: str
    relation_id: int
    def __init__(self, schema: _Optional[str] = ..., name: _Optional[str] = ..., relation_id: _Optional[int] = ...) -> None: ...

class Column(_message.Message):
    __slots__ = ("name", "type_oid", "type_modifier", "type_name", "is_identity_key", "not_null", "primary_key_ordinal", "base_type_oid")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TYPE_OID_FIELD_NUMBER: _ClassVar[int]
    TYPE_MODIFIER_FIELD_NUMBER: _ClassVar[int]
    TYPE_NAME_FIELD_NUMBER: _ClassVar[int]
    IS_IDENTITY_KEY_FIELD_NUMBER: _ClassVar[int]
    NOT_NULL_FIELD_NUMBER: _ClassVar[int]
    PRIMARY_KEY_ORDINAL_FIELD_NUMBER: _ClassVar[int]
    BASE_TYPE_OID_FIELD_NUMBER: _ClassVar[int]
    name: str
    type_oid: int
    type_modifier: int
    type_name: str
    is_identity_key: bool
    not_null: bool
    primary_key_ordinal: int
    base_type_oid: int
    def __init__(self, name: _Optional[str] = ..., type_oid: _Optional[int] = ..., type_modifier: _Optional[int] = ..., type_name: _Optional[str] = ..., is_identity_key: _Optional[bool] = ..., not_null: _Optional[bool] = ..., primary_key_ordinal: _Optional[int] = ..., base_type_oid: _Optional[int] = ...) -> None: ...

class Change(_message.Message):
    __slots__ = ("action", "ordinal", "old_tuple", "new_tuple", "old_is_key_only")
    ACTION_FIELD_NUMBER: _ClassVar[int]
    ORDINAL_FIELD_NUMBER: _ClassVar[int]
    OLD_TUPLE_FIELD_NUMBER: _ClassVar[int]
    NEW_TUPLE_FIELD_NUMBER: _ClassVar[int]
    OLD_IS_KEY_ONLY_FIELD_NUMBER: _ClassVar[int]
    action: Action
    ordinal: int
    old_tuple: bytes
    new_tuple: bytes
    old_is_key_only: bool
    def __init__(self, action: _Optional[_Union[Action, str]] = ..., ordinal: _Optional[int] = ..., old_tuple: _Optional[bytes] = ..., new_tuple: _Optional[bytes] = ..., old_is_key_only: _Optional[bool] = ...) -> None: ...

class ChangeBatch(_message.Message):
    __slots__ = ("source_id", "kind", "table", "columns", "replica_identity", "commit_lsn", "end_lsn", "xid", "commit_time_unix_us", "chunk", "last_chunk", "changes", "baseline_id", "baseline_row_count", "old_columns", "reason", "epoch")
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    REPLICA_IDENTITY_FIELD_NUMBER: _ClassVar[int]
    COMMIT_LSN_FIELD_NUMBER: _ClassVar[int]
    END_LSN_FIELD_NUMBER: _ClassVar[int]
    XID_FIELD_NUMBER: _ClassVar[int]
    COMMIT_TIME_UNIX_US_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    LAST_CHUNK_FIELD_NUMBER: _ClassVar[int]
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    BASELINE_ID_FIELD_NUMBER: _ClassVar[int]
    BASELINE_ROW_COUNT_FIELD_NUMBER: _ClassVar[int]
    OLD_COLUMNS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    source_id: str
    kind: BatchKind
    table: TableRef
    columns: _containers.RepeatedCompositeFieldContainer[Column]
    replica_identity: ReplicaIdentity
    commit_lsn: int
    end_lsn: int
    xid: int
    commit_time_unix_us: int
    chunk: int
    last_chunk: bool
    changes: _containers.RepeatedCompositeFieldContainer[Change]
    baseline_id: str
    baseline_row_count: int
    old_columns: _containers.RepeatedCompositeFieldContainer[Column]
    reason: str
    epoch: int
    def __init__(self, source_id: _Optional[str] = ..., kind: _Optional[_Union[BatchKind, str]] = ..., table: _Optional[_Union[TableRef, _Mapping]] = ..., columns: _Optional[_Iterable[_Union[Column, _Mapping]]] = ..., replica_identity: _Optional[_Union[ReplicaIdentity, str]] = ..., commit_lsn: _Optional[int] = ..., end_lsn: _Optional[int] = ..., xid: _Optional[int] = ..., commit_time_unix_us: _Optional[int] = ..., chunk: _Optional[int] = ..., last_chunk: _Optional[bool] = ..., changes: _Optional[_Iterable[_Union[Change, _Mapping]]] = ..., baseline_id: _Optional[str] = ..., baseline_row_count: _Optional[int] = ..., old_columns: _Optional[_Iterable[_Union[Column, _Mapping]]] = ..., reason: _Optional[str] = ..., epoch: _Optional[int] = ...) -> None: ...
