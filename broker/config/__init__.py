"""Broker and topic configuration: Kafka's property names, types, defaults and validation.

Everything a broker reads from `server.properties` is declared once, as data (`ConfigDef`, in
`definitions`), so that parsing, validation, DescribeConfigs and dynamic updates all agree.
Topic-level configs carry their broker-level synonyms (`retention.ms` <- `log.retention.ms`,
`log.retention.minutes`, `log.retention.hours`), which is how a topic without an override
inherits the broker's value.

- `values`: value types, parsing and Kafka's string forms, validators, `ConfigDef`.
- `definitions`: the broker and topic property tables and lookups over them.
- `listeners`: listener endpoints and the security protocol map.
- `broker_config`: `BrokerConfig` (static plus dynamic layers), describe entries, loading, and
  topic override validation.
- `validation`: which broker properties may change at run time.

Layering: this package is pure (no protocol, no I/O except `load_config` reading one file); the
cluster layer turns `ConfigError` into Kafka's INVALID_CONFIG. Many modules import from the
package itself, so it re-exports the public names below.

Odradek's own properties (not Kafka's) are marked `odradek=True`:
- `metadata.store.dir`: where the embedded metadata store keeps its files when
  `zookeeper.connect` is empty (default `<first log dir>/__odradek_metadata`).
"""

from __future__ import annotations

from ..protocol.config_types import ConfigSource, ConfigType
from .broker_config import (
    BrokerConfig,
    ConfigEntry,
    ConfigSynonymEntry,
    load_config,
    validate_topic_configs,
)
from .definitions import (
    BROKER_CONFIGS,
    DYNAMIC_ONLY_BROKER_CONFIGS,
    INTERNAL_TOPICS,
    TOPIC_CONFIGS,
    default_string,
    list_config_type,
    register_broker_config,
)
from .listeners import Endpoint
from .validation import validate_dynamic_broker_configs
from .values import (
    METADATA_STORE_DIRNAME,
    ConfigDef,
    ConfigError,
    Importance,
    Password,
    Synonym,
    UnknownConfigError,
    UpdateMode,
    java_double,
)

__all__ = [
    "BROKER_CONFIGS",
    "DYNAMIC_ONLY_BROKER_CONFIGS",
    "INTERNAL_TOPICS",
    "METADATA_STORE_DIRNAME",
    "TOPIC_CONFIGS",
    "BrokerConfig",
    "ConfigDef",
    "ConfigEntry",
    "ConfigError",
    "ConfigSource",
    "ConfigSynonymEntry",
    "ConfigType",
    "Endpoint",
    "Importance",
    "Password",
    "Synonym",
    "UnknownConfigError",
    "UpdateMode",
    "default_string",
    "java_double",
    "list_config_type",
    "load_config",
    "register_broker_config",
    "validate_dynamic_broker_configs",
    "validate_topic_configs",
]
