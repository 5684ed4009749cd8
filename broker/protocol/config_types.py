"""The codes of the config APIs (DescribeConfigs, AlterConfigs, IncrementalAlterConfigs):
shared by the broker's config model and the client's admin API."""

from __future__ import annotations

from enum import IntEnum


class ConfigType(IntEnum):
    """Data types, numbered as DescribeConfigs' `config_type` field (v3+)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(IntEnum):
    """Where a value comes from, numbered as DescribeConfigs' `config_source` field (v1+)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class ResourceType(IntEnum):
    """What a config belongs to, numbered as the config APIs' `resource_type` field (Kafka's
    ConfigResource.Type)."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class AlterConfigOpType(IntEnum):
    """IncrementalAlterConfigs' `config_operation` field."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3
