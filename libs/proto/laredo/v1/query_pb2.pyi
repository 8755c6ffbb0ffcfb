import datetime

from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class LookupRequest(_message.Message):
    __slots__ = ("schema", "table", "index_name", "key_values")
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    INDEX_NAME_FIELD_NUMBER: _ClassVar[int]
    KEY_VALUES_FIELD_NUMBER: _ClassVar[int]
    schema: str
    table: str
    index_name: str
    key_values: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Value]
    def __init__(self, schema: _Optional[str] = ..., table: _Optional[str] = ..., index_name: _Optional[str] = ..., key_values: _Optional[_Iterable[_Union[_struct_pb2.Value, _Mapping]]] = ...) -> None: ...

class LookupResponse(_message.Message):
    __slots__ = ("found", "row")
    FOUND_FIELD_NUMBER: _ClassVar[int]
    ROW_FIELD_NUMBER: _ClassVar[int]
    found: bool
    row: _struct_pb2.Struct
    def __init__(self, found: _Optional[bool] = ..., row: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class LookupAllRequest(_message.Message):
    __slots__ = ("schema", "table", "index_name", "key_values")
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    INDEX_NAME_FIELD_NUMBER: _ClassVar[int]
    KEY_VALUES_FIELD_NUMBER: _ClassVar[int]
    schema: str
    table: str
    index_name: str
    key_values: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Value]
    def __init__(self, schema: _Optional[str] = ..., table: _Optional[str] = ..., index_name: _Optional[str] = ..., key_values: _Optional[_Iterable[_Union[_struct_pb2.Value, _Mapping]]] = ...) -> None: ...

class LookupAllResponse(_message.Message):
    __slots__ = ("rows",)
    ROWS_FIELD_NUMBER: _ClassVar[int]
    rows: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    def __init__(self, rows: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ...) -> None: ...

class GetRowRequest(_message.Message):
    __slots__ = ("schema", "table", "primary_key", "primary_key_values")
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    PRIMARY_KEY_FIELD_NUMBER: _ClassVar[int]
    PRIMARY_KEY_VALUES_FIELD_NUMBER: _ClassVar[int]
    schema: str
    table: str
    primary_key: int
    primary_key_values: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Value]
    def __init__(self, schema: _Optional[str] = ..., table: _Optional[str] = ..., primary_key: _Optional[int] = ..., primary_key_values: _Optional[_Iterable[_Union[_struct_pb2.Value, _Mapping]]] = ...) -> None: ...

class GetRowResponse(_message.Message):
    __slots__ = ("found", "row")
    FOUND_FIELD_NUMBER: _ClassVar[int]
    ROW_FIELD_NUMBER: _ClassVar[int]
    found: bool
    row: _struct_pb2.Struct
    def __init__(self, found: _Optional[bool] = ..., row: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ListRowsRequest(_message.Message):
    __slots__ = ("schema", "table", "page_size", "page_token")
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    schema: str
    table: str
    page_size: int
    page_token: str
    def __init__(self, schema: _Optional[str] = ..., table: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListRowsResponse(_message.Message):
    __slots__ = ("rows", "next_page_token", "total_count")
    ROWS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_COUNT_FIELD_NUMBER: _ClassVar[int]
    rows: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    next_page_token: str
    total_count: int
    def __init__(self, rows: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., total_count: _Optional[int] = ...) -> None: ...

class CountRowsRequest(_message.Message):
    __slots__ = ("schema", "table")
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    schema: str
    table: str
    def __init__(self, schema: _Optional[str] = ..., table: _Optional[str] = ...) -> None: ...

class CountRowsResponse(_message.Message):
    __slots__ = ("count",)
    COUNT_FIELD_NUMBER: _ClassVar[int]
    count: int
    def __init__(self, count: _Optional[int] = ...) -> None: ...

class SubscribeRequest(_message.Message):
    __slots__ = ("schema", "table", "replay_existing")
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    REPLAY_EXISTING_FIELD_NUMBER: _ClassVar[int]
    schema: str
    table: str
    replay_existing: bool
    def __init__(self, schema: _Optional[str] = ..., table: _Optional[str] = ..., replay_existing: _Optional[bool] = ...) -> None: ...

class SubscribeResponse(_message.Message):
    __slots__ = ("action", "position", "xid", "timestamp", "old_values", "new_values")
    ACTION_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    XID_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    OLD_VALUES_FIELD_NUMBER: _ClassVar[int]
    NEW_VALUES_FIELD_NUMBER: _ClassVar[int]
    action: str
    position: str
    xid: int
    timestamp: _timestamp_pb2.Timestamp
    old_values: _struct_pb2.Struct
    new_values: _struct_pb2.Struct
    def __init__(self, action: _Optional[str] = ..., position: _Optional[str] = ..., xid: _Optional[int] = ..., timestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., old_values: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., new_values: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...
