"""Configuration: one HOCON file with environment and command-line overrides, validated at start-up."""

from laredo_core.config.reader import Reader, load_tree, parse_duration
from laredo_core.config.settings import (
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
)

__all__ = [
    "LaredoSettings", "Reader", "ReconnectSettings", "RedisSettings", "ServiceEndpoint", "SourceSettings",
    "StreamSettings", "TableSettings", "TargetSettings", "TelemetrySettings", "load_settings", "load_tree",
    "parse_duration",
]
