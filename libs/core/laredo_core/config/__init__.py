"""Configuration: one HOCON file with environment and command-line overrides, validated at start-up."""

from laredo_core.config.reader import Reader, json_values, load_tree, parse_duration
from laredo_core.config.settings import (
    ENDPOINT_KEYS,
    SOURCE_COMMON_KEYS,
    LaredoSettings,
    ServiceEndpoint,
    TableSettings,
    TargetSettings,
    TelemetrySettings,
    load_settings,
    service_reader,
)

__all__ = [
    "ENDPOINT_KEYS", "SOURCE_COMMON_KEYS", "LaredoSettings", "Reader", "ServiceEndpoint", "TableSettings",
    "TargetSettings", "TelemetrySettings", "json_values", "load_settings", "load_tree", "parse_duration",
    "service_reader",
]
