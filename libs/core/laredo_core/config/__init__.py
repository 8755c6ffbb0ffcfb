"""Configuration: one HOCON file with environment and command-line overrides, validated at start-up."""

from laredo_core.config.reader import Reader, json_values, load_tree, parse_duration
from laredo_core.config.settings import (
    ENDPOINT_KEYS,
    SOURCE_COMMON_KEYS,
    LaredoSettings,
    ReconnectSettings,
    RedisSettings,
    ServiceEndpoint,
    SourceSettings,
    StreamSettings,
    TableSettings,
    TargetSettings,
    TelemetrySettings,
    load_settings,
    check_service_section,
    service_reader,
)

__all__ = [
    "ENDPOINT_KEYS", "SOURCE_COMMON_KEYS", "check_service_section", "service_reader", "LaredoSettings", "Reader", "ReconnectSettings", "RedisSettings", "ServiceEndpoint", "SourceSettings",
    "StreamSettings", "TableSettings", "TargetSettings", "TelemetrySettings", "load_settings", "load_tree",
    "json_values", "parse_duration",
]
