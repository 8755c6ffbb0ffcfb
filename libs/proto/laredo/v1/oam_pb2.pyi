import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ServiceState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SERVICE_STATE_UNSPECIFIED: _ClassVar[ServiceState]
    SERVICE_STATE_STARTING: _ClassVar[ServiceState]
    SERVICE_STATE_BASELINING: _ClassVar[ServiceState]
    SERVICE_STATE_STREAMING: _ClassVar[ServiceState]
    SERVICE_STATE_PAUSED: _ClassVar[ServiceState]
    SERVICE_STATE_RELOADING: _ClassVar[ServiceState]
    SERVICE_STATE_ERROR: _ClassVar[ServiceState]

class PipelineState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PIPELINE_STATE_UNSPECIFIED: _ClassVar[PipelineState]
    PIPELINE_STATE_INITIALIZING: _ClassVar[PipelineState]
    PIPELINE_STATE_BASELINING: _ClassVar[PipelineState]
    PIPELINE_STATE_STREAMING: _ClassVar[PipelineState]
    PIPELINE_STATE_PAUSED: _ClassVar[PipelineState]
    PIPELINE_STATE_ERROR: _ClassVar[PipelineState]
    PIPELINE_STATE_STOPPED: _ClassVar[PipelineState]
SERVICE_STATE_UNSPECIFIED: ServiceState
SERVICE_STATE_STARTING: ServiceState
SERVICE_STATE_BASELINING: ServiceState
SERVICE_STATE_STREAMING: ServiceState
SERVICE_STATE_PAUSED: ServiceState
SERVICE_STATE_RELOADING: ServiceState
SERVICE_STATE_ERROR: ServiceState
PIPELINE_STATE_UNSPECIFIED: PipelineState
PIPELINE_STATE_INITIALIZING: PipelineState
PIPELINE_STATE_BASELINING: PipelineState
PIPELINE_STATE_STREAMING: PipelineState
PIPELINE_STATE_PAUSED: PipelineState
PIPELINE_STATE_ERROR: PipelineState
PIPELINE_STATE_STOPPED: PipelineState

class GetStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetStatusResponse(_message.Message):
    __slots__ = ("state", "sources", "pipelines", "started_at", "last_change_at", "snapshot_status")
    STATE_FIELD_NUMBER: _ClassVar[int]
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    PIPELINES_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_CHANGE_AT_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_STATUS_FIELD_NUMBER: _ClassVar[int]
    state: ServiceState
    sources: _containers.RepeatedCompositeFieldContainer[SourceStatus]
    pipelines: _containers.RepeatedCompositeFieldContainer[PipelineStatus]
    started_at: _timestamp_pb2.Timestamp
    last_change_at: _timestamp_pb2.Timestamp
    snapshot_status: SnapshotSummary
    def __init__(self, state: _Optional[_Union[ServiceState, str]] = ..., sources: _Optional[_Iterable[_Union[SourceStatus, _Mapping]]] = ..., pipelines: _Optional[_Iterable[_Union[PipelineStatus, _Mapping]]] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_change_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., snapshot_status: _Optional[_Union[SnapshotSummary, _Mapping]] = ...) -> None: ...

class SourceStatus(_message.Message):
    __slots__ = ("source_id", "source_type", "supports_resume", "ordering_guarantee", "current_position", "acked_position", "lag_bytes", "lag_time", "source_details")
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    SUPPORTS_RESUME_FIELD_NUMBER: _ClassVar[int]
    ORDERING_GUARANTEE_FIELD_NUMBER: _ClassVar[int]
    CURRENT_POSITION_FIELD_NUMBER: _ClassVar[int]
    ACKED_POSITION_FIELD_NUMBER: _ClassVar[int]
    LAG_BYTES_FIELD_NUMBER: _ClassVar[int]
    LAG_TIME_FIELD_NUMBER: _ClassVar[int]
    SOURCE_DETAILS_FIELD_NUMBER: _ClassVar[int]
    source_id: str
    source_type: str
    supports_resume: bool
    ordering_guarantee: str
    current_position: str
    acked_position: str
    lag_bytes: int
    lag_time: _duration_pb2.Duration
    source_details: _struct_pb2.Struct
    def __init__(self, source_id: _Optional[str] = ..., source_type: _Optional[str] = ..., supports_resume: _Optional[bool] = ..., ordering_guarantee: _Optional[str] = ..., current_position: _Optional[str] = ..., acked_position: _Optional[str] = ..., lag_bytes: _Optional[int] = ..., lag_time: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., source_details: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class PipelineStatus(_message.Message):
    __slots__ = ("pipeline_id", "source_id", "schema", "table", "target_type", "state", "row_count", "inserts_applied", "updates_applied", "deletes_applied", "truncates_applied", "last_change_at", "error_message", "buffer_depth", "buffer_capacity", "dead_letter_count", "last_baseline_reason", "last_baseline_detail", "last_baseline_at", "last_baseline_id")
    PIPELINE_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    TARGET_TYPE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ROW_COUNT_FIELD_NUMBER: _ClassVar[int]
    INSERTS_APPLIED_FIELD_NUMBER: _ClassVar[int]
    UPDATES_APPLIED_FIELD_NUMBER: _ClassVar[int]
    DELETES_APPLIED_FIELD_NUMBER: _ClassVar[int]
    TRUNCATES_APPLIED_FIELD_NUMBER: _ClassVar[int]
    LAST_CHANGE_AT_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    BUFFER_DEPTH_FIELD_NUMBER: _ClassVar[int]
    BUFFER_CAPACITY_FIELD_NUMBER: _ClassVar[int]
    DEAD_LETTER_COUNT_FIELD_NUMBER: _ClassVar[int]
    LAST_BASELINE_REASON_FIELD_NUMBER: _ClassVar[int]
    LAST_BASELINE_DETAIL_FIELD_NUMBER: _ClassVar[int]
    LAST_BASELINE_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_BASELINE_ID_FIELD_NUMBER: _ClassVar[int]
    pipeline_id: str
    source_id: str
    schema: str
    table: str
    target_type: str
    state: PipelineState
    row_count: int
    inserts_applied: int
    updates_applied: int
    deletes_applied: int
    truncates_applied: int
    last_change_at: _timestamp_pb2.Timestamp
    error_message: str
    buffer_depth: int
    buffer_capacity: int
    dead_letter_count: int
    last_baseline_reason: str
    last_baseline_detail: str
    last_baseline_at: _timestamp_pb2.Timestamp
    last_baseline_id: str
    def __init__(self, pipeline_id: _Optional[str] = ..., source_id: _Optional[str] = ..., schema: _Optional[str] = ..., table: _Optional[str] = ..., target_type: _Optional[str] = ..., state: _Optional[_Union[PipelineState, str]] = ..., row_count: _Optional[int] = ..., inserts_applied: _Optional[int] = ..., updates_applied: _Optional[int] = ..., deletes_applied: _Optional[int] = ..., truncates_applied: _Optional[int] = ..., last_change_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., error_message: _Optional[str] = ..., buffer_depth: _Optional[int] = ..., buffer_capacity: _Optional[int] = ..., dead_letter_count: _Optional[int] = ..., last_baseline_reason: _Optional[str] = ..., last_baseline_detail: _Optional[str] = ..., last_baseline_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_baseline_id: _Optional[str] = ...) -> None: ...

class GetTableStatusRequest(_message.Message):
    __slots__ = ("schema", "table")
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    schema: str
    table: str
    def __init__(self, schema: _Optional[str] = ..., table: _Optional[str] = ...) -> None: ...

class GetTableStatusResponse(_message.Message):
    __slots__ = ("pipelines", "indexes")
    PIPELINES_FIELD_NUMBER: _ClassVar[int]
    INDEXES_FIELD_NUMBER: _ClassVar[int]
    pipelines: _containers.RepeatedCompositeFieldContainer[PipelineStatus]
    indexes: _containers.RepeatedCompositeFieldContainer[IndexInfo]
    def __init__(self, pipelines: _Optional[_Iterable[_Union[PipelineStatus, _Mapping]]] = ..., indexes: _Optional[_Iterable[_Union[IndexInfo, _Mapping]]] = ...) -> None: ...

class IndexInfo(_message.Message):
    __slots__ = ("name", "fields", "unique", "entry_count")
    NAME_FIELD_NUMBER: _ClassVar[int]
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    UNIQUE_FIELD_NUMBER: _ClassVar[int]
    ENTRY_COUNT_FIELD_NUMBER: _ClassVar[int]
    name: str
    fields: _containers.RepeatedScalarFieldContainer[str]
    unique: bool
    entry_count: int
    def __init__(self, name: _Optional[str] = ..., fields: _Optional[_Iterable[str]] = ..., unique: _Optional[bool] = ..., entry_count: _Optional[int] = ...) -> None: ...

class GetPipelineStatusRequest(_message.Message):
    __slots__ = ("pipeline_id",)
    PIPELINE_ID_FIELD_NUMBER: _ClassVar[int]
    pipeline_id: str
    def __init__(self, pipeline_id: _Optional[str] = ...) -> None: ...

class GetPipelineStatusResponse(_message.Message):
    __slots__ = ("status", "indexes")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    INDEXES_FIELD_NUMBER: _ClassVar[int]
    status: PipelineStatus
    indexes: _containers.RepeatedCompositeFieldContainer[IndexInfo]
    def __init__(self, status: _Optional[_Union[PipelineStatus, _Mapping]] = ..., indexes: _Optional[_Iterable[_Union[IndexInfo, _Mapping]]] = ...) -> None: ...

class WatchStatusRequest(_message.Message):
    __slots__ = ("tables", "pipeline_ids")
    TABLES_FIELD_NUMBER: _ClassVar[int]
    PIPELINE_IDS_FIELD_NUMBER: _ClassVar[int]
    tables: _containers.RepeatedScalarFieldContainer[str]
    pipeline_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, tables: _Optional[_Iterable[str]] = ..., pipeline_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class WatchStatusResponse(_message.Message):
    __slots__ = ("timestamp", "service_state_change", "pipeline_state_change", "row_change", "source_state_change")
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    SERVICE_STATE_CHANGE_FIELD_NUMBER: _ClassVar[int]
    PIPELINE_STATE_CHANGE_FIELD_NUMBER: _ClassVar[int]
    ROW_CHANGE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_STATE_CHANGE_FIELD_NUMBER: _ClassVar[int]
    timestamp: _timestamp_pb2.Timestamp
    service_state_change: ServiceStateChange
    pipeline_state_change: PipelineStateChangeEvent
    row_change: RowChange
    source_state_change: SourceStateChange
    def __init__(self, timestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., service_state_change: _Optional[_Union[ServiceStateChange, _Mapping]] = ..., pipeline_state_change: _Optional[_Union[PipelineStateChangeEvent, _Mapping]] = ..., row_change: _Optional[_Union[RowChange, _Mapping]] = ..., source_state_change: _Optional[_Union[SourceStateChange, _Mapping]] = ...) -> None: ...

class ServiceStateChange(_message.Message):
    __slots__ = ("old_state", "new_state")
    OLD_STATE_FIELD_NUMBER: _ClassVar[int]
    NEW_STATE_FIELD_NUMBER: _ClassVar[int]
    old_state: ServiceState
    new_state: ServiceState
    def __init__(self, old_state: _Optional[_Union[ServiceState, str]] = ..., new_state: _Optional[_Union[ServiceState, str]] = ...) -> None: ...

class PipelineStateChangeEvent(_message.Message):
    __slots__ = ("pipeline_id", "old_state", "new_state")
    PIPELINE_ID_FIELD_NUMBER: _ClassVar[int]
    OLD_STATE_FIELD_NUMBER: _ClassVar[int]
    NEW_STATE_FIELD_NUMBER: _ClassVar[int]
    pipeline_id: str
    old_state: PipelineState
    new_state: PipelineState
    def __init__(self, pipeline_id: _Optional[str] = ..., old_state: _Optional[_Union[PipelineState, str]] = ..., new_state: _Optional[_Union[PipelineState, str]] = ...) -> None: ...

class SourceStateChange(_message.Message):
    __slots__ = ("source_id", "event_type", "message")
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    source_id: str
    event_type: str
    message: str
    def __init__(self, source_id: _Optional[str] = ..., event_type: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class RowChange(_message.Message):
    __slots__ = ("pipeline_id", "schema", "table", "action", "position", "xid")
    PIPELINE_ID_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    XID_FIELD_NUMBER: _ClassVar[int]
    pipeline_id: str
    schema: str
    table: str
    action: str
    position: str
    xid: int
    def __init__(self, pipeline_id: _Optional[str] = ..., schema: _Optional[str] = ..., table: _Optional[str] = ..., action: _Optional[str] = ..., position: _Optional[str] = ..., xid: _Optional[int] = ...) -> None: ...

class CheckReadyRequest(_message.Message):
    __slots__ = ("source", "table", "pipeline_id")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    PIPELINE_ID_FIELD_NUMBER: _ClassVar[int]
    source: str
    table: str
    pipeline_id: str
    def __init__(self, source: _Optional[str] = ..., table: _Optional[str] = ..., pipeline_id: _Optional[str] = ...) -> None: ...

class CheckReadyResponse(_message.Message):
    __slots__ = ("ready", "not_ready_reasons")
    READY_FIELD_NUMBER: _ClassVar[int]
    NOT_READY_REASONS_FIELD_NUMBER: _ClassVar[int]
    ready: bool
    not_ready_reasons: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, ready: _Optional[bool] = ..., not_ready_reasons: _Optional[_Iterable[str]] = ...) -> None: ...

class GetSourceInfoRequest(_message.Message):
    __slots__ = ("source_id",)
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    source_id: str
    def __init__(self, source_id: _Optional[str] = ...) -> None: ...

class GetSourceInfoResponse(_message.Message):
    __slots__ = ("sources",)
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    sources: _containers.RepeatedCompositeFieldContainer[SourceInfo]
    def __init__(self, sources: _Optional[_Iterable[_Union[SourceInfo, _Mapping]]] = ...) -> None: ...

class SourceInfo(_message.Message):
    __slots__ = ("source_id", "source_type", "supports_resume", "ordering_guarantee", "current_position", "acked_position", "lag_bytes", "lag_time", "details")
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    SUPPORTS_RESUME_FIELD_NUMBER: _ClassVar[int]
    ORDERING_GUARANTEE_FIELD_NUMBER: _ClassVar[int]
    CURRENT_POSITION_FIELD_NUMBER: _ClassVar[int]
    ACKED_POSITION_FIELD_NUMBER: _ClassVar[int]
    LAG_BYTES_FIELD_NUMBER: _ClassVar[int]
    LAG_TIME_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    source_id: str
    source_type: str
    supports_resume: bool
    ordering_guarantee: str
    current_position: str
    acked_position: str
    lag_bytes: int
    lag_time: _duration_pb2.Duration
    details: _struct_pb2.Struct
    def __init__(self, source_id: _Optional[str] = ..., source_type: _Optional[str] = ..., supports_resume: _Optional[bool] = ..., ordering_guarantee: _Optional[str] = ..., current_position: _Optional[str] = ..., acked_position: _Optional[str] = ..., lag_bytes: _Optional[int] = ..., lag_time: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., details: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ReloadTableRequest(_message.Message):
    __slots__ = ("source_id", "schema", "table")
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    source_id: str
    schema: str
    table: str
    def __init__(self, source_id: _Optional[str] = ..., schema: _Optional[str] = ..., table: _Optional[str] = ...) -> None: ...

class ReloadTableResponse(_message.Message):
    __slots__ = ("accepted", "message")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    accepted: bool
    message: str
    def __init__(self, accepted: _Optional[bool] = ..., message: _Optional[str] = ...) -> None: ...

class ReloadAllRequest(_message.Message):
    __slots__ = ("source_id",)
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    source_id: str
    def __init__(self, source_id: _Optional[str] = ...) -> None: ...

class ReloadAllResponse(_message.Message):
    __slots__ = ("accepted", "message")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    accepted: bool
    message: str
    def __init__(self, accepted: _Optional[bool] = ..., message: _Optional[str] = ...) -> None: ...

class PauseSyncRequest(_message.Message):
    __slots__ = ("source_id",)
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    source_id: str
    def __init__(self, source_id: _Optional[str] = ...) -> None: ...

class PauseSyncResponse(_message.Message):
    __slots__ = ("state",)
    STATE_FIELD_NUMBER: _ClassVar[int]
    state: ServiceState
    def __init__(self, state: _Optional[_Union[ServiceState, str]] = ...) -> None: ...

class ResumeSyncRequest(_message.Message):
    __slots__ = ("source_id",)
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    source_id: str
    def __init__(self, source_id: _Optional[str] = ...) -> None: ...

class ResumeSyncResponse(_message.Message):
    __slots__ = ("state",)
    STATE_FIELD_NUMBER: _ClassVar[int]
    state: ServiceState
    def __init__(self, state: _Optional[_Union[ServiceState, str]] = ...) -> None: ...

class ResetSourceRequest(_message.Message):
    __slots__ = ("source_id", "confirm", "drop_publication")
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    CONFIRM_FIELD_NUMBER: _ClassVar[int]
    DROP_PUBLICATION_FIELD_NUMBER: _ClassVar[int]
    source_id: str
    confirm: bool
    drop_publication: bool
    def __init__(self, source_id: _Optional[str] = ..., confirm: _Optional[bool] = ..., drop_publication: _Optional[bool] = ...) -> None: ...

class ResetSourceResponse(_message.Message):
    __slots__ = ("accepted", "message", "details")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    accepted: bool
    message: str
    details: _struct_pb2.Struct
    def __init__(self, accepted: _Optional[bool] = ..., message: _Optional[str] = ..., details: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class DrainReplicationRequest(_message.Message):
    __slots__ = ("schema", "table", "drain_deadline_seconds", "instance_id", "force")
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    DRAIN_DEADLINE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    schema: str
    table: str
    drain_deadline_seconds: int
    instance_id: str
    force: bool
    def __init__(self, schema: _Optional[str] = ..., table: _Optional[str] = ..., drain_deadline_seconds: _Optional[int] = ..., instance_id: _Optional[str] = ..., force: _Optional[bool] = ...) -> None: ...

class DrainReplicationResponse(_message.Message):
    __slots__ = ("accepted", "message", "drained_targets", "drained_instances")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    DRAINED_TARGETS_FIELD_NUMBER: _ClassVar[int]
    DRAINED_INSTANCES_FIELD_NUMBER: _ClassVar[int]
    accepted: bool
    message: str
    drained_targets: int
    drained_instances: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, accepted: _Optional[bool] = ..., message: _Optional[str] = ..., drained_targets: _Optional[int] = ..., drained_instances: _Optional[_Iterable[str]] = ...) -> None: ...

class ListTablesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListTablesResponse(_message.Message):
    __slots__ = ("tables",)
    TABLES_FIELD_NUMBER: _ClassVar[int]
    tables: _containers.RepeatedCompositeFieldContainer[TableConfig]
    def __init__(self, tables: _Optional[_Iterable[_Union[TableConfig, _Mapping]]] = ...) -> None: ...

class TableConfig(_message.Message):
    __slots__ = ("schema", "table", "primary_key", "source_id", "source_type", "source_config", "target_type", "target_config")
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    PRIMARY_KEY_FIELD_NUMBER: _ClassVar[int]
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_CONFIG_FIELD_NUMBER: _ClassVar[int]
    TARGET_TYPE_FIELD_NUMBER: _ClassVar[int]
    TARGET_CONFIG_FIELD_NUMBER: _ClassVar[int]
    schema: str
    table: str
    primary_key: str
    source_id: str
    source_type: str
    source_config: _struct_pb2.Struct
    target_type: str
    target_config: _struct_pb2.Struct
    def __init__(self, schema: _Optional[str] = ..., table: _Optional[str] = ..., primary_key: _Optional[str] = ..., source_id: _Optional[str] = ..., source_type: _Optional[str] = ..., source_config: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., target_type: _Optional[str] = ..., target_config: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class GetTableSchemaRequest(_message.Message):
    __slots__ = ("schema", "table")
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    schema: str
    table: str
    def __init__(self, schema: _Optional[str] = ..., table: _Optional[str] = ...) -> None: ...

class GetTableSchemaResponse(_message.Message):
    __slots__ = ("columns",)
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    columns: _containers.RepeatedCompositeFieldContainer[ColumnDefinition]
    def __init__(self, columns: _Optional[_Iterable[_Union[ColumnDefinition, _Mapping]]] = ...) -> None: ...

class ColumnDefinition(_message.Message):
    __slots__ = ("ordinal_position", "column_name", "data_type", "not_null", "is_primary_key", "primary_key_ordinal")
    ORDINAL_POSITION_FIELD_NUMBER: _ClassVar[int]
    COLUMN_NAME_FIELD_NUMBER: _ClassVar[int]
    DATA_TYPE_FIELD_NUMBER: _ClassVar[int]
    NOT_NULL_FIELD_NUMBER: _ClassVar[int]
    IS_PRIMARY_KEY_FIELD_NUMBER: _ClassVar[int]
    PRIMARY_KEY_ORDINAL_FIELD_NUMBER: _ClassVar[int]
    ordinal_position: int
    column_name: str
    data_type: str
    not_null: bool
    is_primary_key: bool
    primary_key_ordinal: int
    def __init__(self, ordinal_position: _Optional[int] = ..., column_name: _Optional[str] = ..., data_type: _Optional[str] = ..., not_null: _Optional[bool] = ..., is_primary_key: _Optional[bool] = ..., primary_key_ordinal: _Optional[int] = ...) -> None: ...

class CreateSnapshotRequest(_message.Message):
    __slots__ = ("tables", "user_meta")
    TABLES_FIELD_NUMBER: _ClassVar[int]
    USER_META_FIELD_NUMBER: _ClassVar[int]
    tables: _containers.RepeatedScalarFieldContainer[str]
    user_meta: _struct_pb2.Struct
    def __init__(self, tables: _Optional[_Iterable[str]] = ..., user_meta: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class CreateSnapshotResponse(_message.Message):
    __slots__ = ("accepted", "snapshot_id", "message")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    accepted: bool
    snapshot_id: str
    message: str
    def __init__(self, accepted: _Optional[bool] = ..., snapshot_id: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class ListSnapshotsRequest(_message.Message):
    __slots__ = ("table", "limit")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    table: str
    limit: int
    def __init__(self, table: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class ListSnapshotsResponse(_message.Message):
    __slots__ = ("snapshots",)
    SNAPSHOTS_FIELD_NUMBER: _ClassVar[int]
    snapshots: _containers.RepeatedCompositeFieldContainer[SnapshotInfo]
    def __init__(self, snapshots: _Optional[_Iterable[_Union[SnapshotInfo, _Mapping]]] = ...) -> None: ...

class SnapshotInfo(_message.Message):
    __slots__ = ("snapshot_id", "created_at", "format", "source_positions", "tables", "size_bytes", "store_type", "store_location", "user_meta")
    SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    SOURCE_POSITIONS_FIELD_NUMBER: _ClassVar[int]
    TABLES_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    STORE_TYPE_FIELD_NUMBER: _ClassVar[int]
    STORE_LOCATION_FIELD_NUMBER: _ClassVar[int]
    USER_META_FIELD_NUMBER: _ClassVar[int]
    snapshot_id: str
    created_at: _timestamp_pb2.Timestamp
    format: str
    source_positions: _containers.RepeatedCompositeFieldContainer[SourcePositionEntry]
    tables: _containers.RepeatedCompositeFieldContainer[TableSnapshotSummary]
    size_bytes: int
    store_type: str
    store_location: str
    user_meta: _struct_pb2.Struct
    def __init__(self, snapshot_id: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., format: _Optional[str] = ..., source_positions: _Optional[_Iterable[_Union[SourcePositionEntry, _Mapping]]] = ..., tables: _Optional[_Iterable[_Union[TableSnapshotSummary, _Mapping]]] = ..., size_bytes: _Optional[int] = ..., store_type: _Optional[str] = ..., store_location: _Optional[str] = ..., user_meta: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class SourcePositionEntry(_message.Message):
    __slots__ = ("source_id", "position")
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    source_id: str
    position: str
    def __init__(self, source_id: _Optional[str] = ..., position: _Optional[str] = ...) -> None: ...

class TableSnapshotSummary(_message.Message):
    __slots__ = ("schema", "table", "row_count", "target_type")
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    ROW_COUNT_FIELD_NUMBER: _ClassVar[int]
    TARGET_TYPE_FIELD_NUMBER: _ClassVar[int]
    schema: str
    table: str
    row_count: int
    target_type: str
    def __init__(self, schema: _Optional[str] = ..., table: _Optional[str] = ..., row_count: _Optional[int] = ..., target_type: _Optional[str] = ...) -> None: ...

class InspectSnapshotRequest(_message.Message):
    __slots__ = ("snapshot_id",)
    SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    snapshot_id: str
    def __init__(self, snapshot_id: _Optional[str] = ...) -> None: ...

class InspectSnapshotResponse(_message.Message):
    __slots__ = ("info",)
    INFO_FIELD_NUMBER: _ClassVar[int]
    info: SnapshotInfo
    def __init__(self, info: _Optional[_Union[SnapshotInfo, _Mapping]] = ...) -> None: ...

class RestoreSnapshotRequest(_message.Message):
    __slots__ = ("snapshot_id", "confirm", "skip_meta_check")
    SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    CONFIRM_FIELD_NUMBER: _ClassVar[int]
    SKIP_META_CHECK_FIELD_NUMBER: _ClassVar[int]
    snapshot_id: str
    confirm: bool
    skip_meta_check: bool
    def __init__(self, snapshot_id: _Optional[str] = ..., confirm: _Optional[bool] = ..., skip_meta_check: _Optional[bool] = ...) -> None: ...

class RestoreSnapshotResponse(_message.Message):
    __slots__ = ("accepted", "message", "user_meta", "warnings")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    USER_META_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    accepted: bool
    message: str
    user_meta: _struct_pb2.Struct
    warnings: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, accepted: _Optional[bool] = ..., message: _Optional[str] = ..., user_meta: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., warnings: _Optional[_Iterable[str]] = ...) -> None: ...

class DeleteSnapshotRequest(_message.Message):
    __slots__ = ("snapshot_id",)
    SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    snapshot_id: str
    def __init__(self, snapshot_id: _Optional[str] = ...) -> None: ...

class DeleteSnapshotResponse(_message.Message):
    __slots__ = ("deleted",)
    DELETED_FIELD_NUMBER: _ClassVar[int]
    deleted: bool
    def __init__(self, deleted: _Optional[bool] = ...) -> None: ...

class PruneSnapshotsRequest(_message.Message):
    __slots__ = ("keep", "table")
    KEEP_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    keep: int
    table: str
    def __init__(self, keep: _Optional[int] = ..., table: _Optional[str] = ...) -> None: ...

class PruneSnapshotsResponse(_message.Message):
    __slots__ = ("deleted_count",)
    DELETED_COUNT_FIELD_NUMBER: _ClassVar[int]
    deleted_count: int
    def __init__(self, deleted_count: _Optional[int] = ...) -> None: ...

class SnapshotSummary(_message.Message):
    __slots__ = ("enabled", "store_type", "last_snapshot_id", "last_snapshot_at", "next_scheduled_at", "snapshot_count")
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    STORE_TYPE_FIELD_NUMBER: _ClassVar[int]
    LAST_SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_SNAPSHOT_AT_FIELD_NUMBER: _ClassVar[int]
    NEXT_SCHEDULED_AT_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_COUNT_FIELD_NUMBER: _ClassVar[int]
    enabled: bool
    store_type: str
    last_snapshot_id: str
    last_snapshot_at: _timestamp_pb2.Timestamp
    next_scheduled_at: _timestamp_pb2.Timestamp
    snapshot_count: int
    def __init__(self, enabled: _Optional[bool] = ..., store_type: _Optional[str] = ..., last_snapshot_id: _Optional[str] = ..., last_snapshot_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., next_scheduled_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., snapshot_count: _Optional[int] = ...) -> None: ...

class ListDeadLettersRequest(_message.Message):
    __slots__ = ("pipeline_id", "limit")
    PIPELINE_ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    pipeline_id: str
    limit: int
    def __init__(self, pipeline_id: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class ListDeadLettersResponse(_message.Message):
    __slots__ = ("entries", "total_count")
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_COUNT_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[DeadLetterEntry]
    total_count: int
    def __init__(self, entries: _Optional[_Iterable[_Union[DeadLetterEntry, _Mapping]]] = ..., total_count: _Optional[int] = ...) -> None: ...

class DeadLetterEntry(_message.Message):
    __slots__ = ("timestamp", "action", "position", "error_message", "change_data")
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CHANGE_DATA_FIELD_NUMBER: _ClassVar[int]
    timestamp: _timestamp_pb2.Timestamp
    action: str
    position: str
    error_message: str
    change_data: _struct_pb2.Struct
    def __init__(self, timestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., action: _Optional[str] = ..., position: _Optional[str] = ..., error_message: _Optional[str] = ..., change_data: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ReplayDeadLettersRequest(_message.Message):
    __slots__ = ("pipeline_id",)
    PIPELINE_ID_FIELD_NUMBER: _ClassVar[int]
    pipeline_id: str
    def __init__(self, pipeline_id: _Optional[str] = ...) -> None: ...

class ReplayDeadLettersResponse(_message.Message):
    __slots__ = ("replayed", "succeeded", "failed")
    REPLAYED_FIELD_NUMBER: _ClassVar[int]
    SUCCEEDED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    replayed: int
    succeeded: int
    failed: int
    def __init__(self, replayed: _Optional[int] = ..., succeeded: _Optional[int] = ..., failed: _Optional[int] = ...) -> None: ...

class PurgeDeadLettersRequest(_message.Message):
    __slots__ = ("pipeline_id",)
    PIPELINE_ID_FIELD_NUMBER: _ClassVar[int]
    pipeline_id: str
    def __init__(self, pipeline_id: _Optional[str] = ...) -> None: ...

class PurgeDeadLettersResponse(_message.Message):
    __slots__ = ("purged",)
    PURGED_FIELD_NUMBER: _ClassVar[int]
    purged: int
    def __init__(self, purged: _Optional[int] = ...) -> None: ...

class StartReplayRequest(_message.Message):
    __slots__ = ("snapshot_id", "target_pipeline_id", "speed", "tables")
    SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    TARGET_PIPELINE_ID_FIELD_NUMBER: _ClassVar[int]
    SPEED_FIELD_NUMBER: _ClassVar[int]
    TABLES_FIELD_NUMBER: _ClassVar[int]
    snapshot_id: str
    target_pipeline_id: str
    speed: str
    tables: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, snapshot_id: _Optional[str] = ..., target_pipeline_id: _Optional[str] = ..., speed: _Optional[str] = ..., tables: _Optional[_Iterable[str]] = ...) -> None: ...

class StartReplayResponse(_message.Message):
    __slots__ = ("accepted", "replay_id", "message")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    REPLAY_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    accepted: bool
    replay_id: str
    message: str
    def __init__(self, accepted: _Optional[bool] = ..., replay_id: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class GetReplayStatusRequest(_message.Message):
    __slots__ = ("replay_id",)
    REPLAY_ID_FIELD_NUMBER: _ClassVar[int]
    replay_id: str
    def __init__(self, replay_id: _Optional[str] = ...) -> None: ...

class GetReplayStatusResponse(_message.Message):
    __slots__ = ("replay_id", "state", "rows_replayed", "elapsed")
    REPLAY_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ROWS_REPLAYED_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_FIELD_NUMBER: _ClassVar[int]
    replay_id: str
    state: str
    rows_replayed: int
    elapsed: _duration_pb2.Duration
    def __init__(self, replay_id: _Optional[str] = ..., state: _Optional[str] = ..., rows_replayed: _Optional[int] = ..., elapsed: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class StopReplayRequest(_message.Message):
    __slots__ = ("replay_id",)
    REPLAY_ID_FIELD_NUMBER: _ClassVar[int]
    replay_id: str
    def __init__(self, replay_id: _Optional[str] = ...) -> None: ...

class StopReplayResponse(_message.Message):
    __slots__ = ("stopped",)
    STOPPED_FIELD_NUMBER: _ClassVar[int]
    stopped: bool
    def __init__(self, stopped: _Optional[bool] = ...) -> None: ...

class ListInstancesRequest(_message.Message):
    __slots__ = ("service",)
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    service: str
    def __init__(self, service: _Optional[str] = ...) -> None: ...

class InstanceInfo(_message.Message):
    __slots__ = ("service", "instance_id", "ready", "draining", "heartbeat_at", "started_at", "status")
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    DRAINING_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_AT_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    service: str
    instance_id: str
    ready: bool
    draining: bool
    heartbeat_at: _timestamp_pb2.Timestamp
    started_at: _timestamp_pb2.Timestamp
    status: _struct_pb2.Struct
    def __init__(self, service: _Optional[str] = ..., instance_id: _Optional[str] = ..., ready: _Optional[bool] = ..., draining: _Optional[bool] = ..., heartbeat_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., status: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ListInstancesResponse(_message.Message):
    __slots__ = ("instances",)
    INSTANCES_FIELD_NUMBER: _ClassVar[int]
    instances: _containers.RepeatedCompositeFieldContainer[InstanceInfo]
    def __init__(self, instances: _Optional[_Iterable[_Union[InstanceInfo, _Mapping]]] = ...) -> None: ...
