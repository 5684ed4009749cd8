"""The broker's configuration (static plus dynamic layers), describe entries, and loading."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..properties import parse_properties
from ..protocol.config_types import ConfigSource, ConfigType
from .definitions import (
    BROKER_CONFIGS,
    DYNAMIC_ONLY_BROKER_CONFIGS,
    TOPIC_CONFIGS,
    broker_def,
    broker_synonym_group,
    is_sensitive_name,
    listener_prefixed,
    static_defaults,
)
from .listeners import Endpoint, parse_listeners, parse_protocol_map
from .validation import validate_dynamic_broker_configs
from .values import (
    METADATA_STORE_DIRNAME,
    ConfigDef,
    ConfigError,
    UnknownConfigError,
    UpdateMode,
)

log = logging.getLogger("odradek.broker.config")


@dataclass(frozen=True)
class ConfigSynonymEntry:
    name: str
    value: str | None
    source: ConfigSource

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "source": int(self.source)}


@dataclass(frozen=True)
class ConfigEntry:
    """One DescribeConfigs (or CreateTopics v5+) config entry."""

    name: str
    value: str | None
    source: ConfigSource
    is_sensitive: bool
    read_only: bool
    config_type: ConfigType
    synonyms: tuple[ConfigSynonymEntry, ...] = ()
    documentation: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """Keys named as DescribeConfigs' response fields (is_default for v0)."""
        return {
            "name": self.name,
            "value": self.value,
            "read_only": self.read_only,
            "is_default": self.source is ConfigSource.DEFAULT_CONFIG,
            "config_source": int(self.source),
            "is_sensitive": self.is_sensitive,
            "synonyms": [s.as_dict() for s in self.synonyms],
            "config_type": int(self.config_type),
            "documentation": self.documentation,
        }


# --------------------------------------------------------------------------------------------
# The broker's configuration


class BrokerConfig:
    """A broker's configuration: static properties plus dynamic layers from the metadata store.

    Precedence (highest first): dynamic per-broker (/config/brokers/<id>), dynamic cluster
    default (/config/brokers/<default>), static (server.properties and overrides), built-in
    default. `get(name)` returns the typed effective value.
    """

    def __init__(self, props: Mapping[str, str] | None = None, *, warn_unknown: bool = True):
        self.originals: dict[str, str] = dict(props or {})
        self.dynamic_broker: dict[str, str] = {}
        self.dynamic_default: dict[str, str] = {}
        self._values: dict[str, Any] = {}
        self._listeners: list[Endpoint] = []
        self._advertised: list[Endpoint] = []
        if warn_unknown:
            for key in self.originals:
                if not self.is_known(key):
                    log.warning(
                        "The configuration '%s' was supplied but isn't a known config.", key
                    )
        self._rebuild()

    # -- construction helpers

    @staticmethod
    def is_known(name: str) -> bool:
        return name in BROKER_CONFIGS or listener_prefixed(name) is not None

    def _merged(self) -> dict[str, str]:
        merged = dict(self.originals)
        merged.update(self.dynamic_default)
        merged.update(self.dynamic_broker)
        return merged

    def _rebuild(self) -> None:
        merged = self._merged()
        values = {name: defn.parse(merged.get(name)) for name, defn in BROKER_CONFIGS.items()}
        self._validate_cross(values)
        protocol_map = parse_protocol_map(
            "listener.security.protocol.map", values["listener.security.protocol.map"]
        )
        listeners = parse_listeners("listeners", values["listeners"], protocol_map)
        advertised_raw = values["advertised.listeners"]
        advertised = (
            parse_listeners("advertised.listeners", advertised_raw, protocol_map)
            if advertised_raw
            else list(listeners)
        )
        for ep in advertised:
            if ep.host == "0.0.0.0":
                raise ConfigError.invalid(
                    "advertised.listeners",
                    advertised_raw or values["listeners"],
                    "advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. "
                    "Use a routable IP address.",
                )
        ibl = values["inter.broker.listener.name"]
        if ibl is not None and ibl.upper() not in {e.listener for e in advertised}:
            raise ConfigError.invalid(
                "inter.broker.listener.name",
                ibl,
                "inter.broker.listener.name must be a listener name defined in advertised.listeners",
            )
        ports = [e.port for e in listeners if e.port != 0]
        if len(set(ports)) != len(ports):
            raise ConfigError.invalid(
                "listeners", values["listeners"], "Each listener must have a different port"
            )
        self._values = values
        self._listeners = listeners
        self._advertised = advertised

    @staticmethod
    def _validate_cross(values: dict[str, Any]) -> None:
        bid = values["broker.id"]
        max_id = values["reserved.broker.max.id"]
        if bid < -1 or (bid > max_id and bid != -1 and values["broker.id.generation.enable"]):
            raise ConfigError.invalid(
                "broker.id",
                bid,
                "broker.id must be greater than or equal to -1 and not greater than "
                "reserved.broker.max.id",
            )
        if bid == -1 and not values["broker.id.generation.enable"]:
            raise ConfigError.invalid(
                "broker.id", bid, "broker.id must be set when broker.id.generation.enable is false"
            )
        dirs = values["log.dirs"] if values["log.dirs"] is not None else values["log.dir"]
        if not [d for d in (dirs or "").split(",") if d.strip()]:
            raise ConfigError.invalid("log.dirs", dirs, "At least one log directory is required")
        if values["group.min.session.timeout.ms"] > values["group.max.session.timeout.ms"]:
            raise ConfigError.invalid(
                "group.min.session.timeout.ms",
                values["group.min.session.timeout.ms"],
                "must not be greater than group.max.session.timeout.ms",
            )

    # -- values

    def get(self, name: str) -> Any:
        """Typed effective value of a defined broker property."""
        if name in self._values:
            return self._values[name]
        defn = DYNAMIC_ONLY_BROKER_CONFIGS.get(name)
        if defn is not None:
            merged = self._merged()
            return defn.parse(merged.get(name))
        raise KeyError(name)

    __getitem__ = get

    def get_raw(self, name: str) -> str | None:
        """The effective string as configured (any key, including unknown/listener-prefixed)."""
        merged = self._merged()
        if name in merged:
            return merged[name]
        defn = broker_def(name)
        return defn.to_string(defn.default) if defn is not None else None

    def source(self, name: str) -> ConfigSource:
        if name in self.dynamic_broker:
            return ConfigSource.DYNAMIC_BROKER_CONFIG
        if name in self.dynamic_default:
            return ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        if name in self.originals:
            return ConfigSource.STATIC_BROKER_CONFIG
        return ConfigSource.DEFAULT_CONFIG

    def listener_config(self, listener: str, name: str) -> str | None:
        """A per-listener override (`listener.name.<l>.<name>`) or else the plain property."""
        key = f"listener.name.{listener.lower()}.{name}"
        merged = self._merged()
        return merged[key] if key in merged else self.get_raw(name)

    # -- conveniences used by the server

    @property
    def broker_id(self) -> int:
        configured = self._values["broker.id"]
        return configured if configured != -1 else getattr(self, "_assigned_broker_id", -1)

    def assign_broker_id(self, broker_id: int) -> None:
        """Record a generated (or meta.properties-stored) id for a broker configured with -1;
        kept apart from the configured value, which dynamic updates re-validate."""
        if self._values["broker.id"] not in (-1, broker_id):
            raise ConfigError.invalid("broker.id", broker_id, "broker.id is already configured")
        self._assigned_broker_id = broker_id

    @property
    def rack(self) -> str | None:
        return self._values["broker.rack"]

    @property
    def listeners(self) -> list[Endpoint]:
        return list(self._listeners)

    @property
    def advertised_listeners(self) -> list[Endpoint]:
        """Advertised endpoints; an empty host is replaced by this machine's name (as Kafka)."""
        fqdn = None
        out = []
        for ep in self._advertised:
            if not ep.host:
                fqdn = fqdn or socket.getfqdn()
                ep = ep._replace(host=fqdn)
            out.append(ep)
        return out

    @property
    def inter_broker_listener(self) -> str:
        name = self._values["inter.broker.listener.name"]
        if name:
            return name.upper()
        return self._values["security.inter.broker.protocol"].upper()

    @property
    def log_dirs(self) -> list[str]:
        raw = self._values["log.dirs"]
        if raw is None:
            raw = self._values["log.dir"]
        return [d.strip() for d in raw.split(",") if d.strip()]

    @property
    def zookeeper_connect(self) -> str | None:
        """None (or empty in the file) means: use the embedded metadata store."""
        value = self._values["zookeeper.connect"]
        return value or None

    @property
    def metadata_store_dir(self) -> str:
        explicit = self._values["metadata.store.dir"]
        if explicit:
            return explicit
        return f"{self.log_dirs[0].rstrip('/')}/{METADATA_STORE_DIRNAME}"

    @property
    def num_partitions(self) -> int:
        return self._values["num.partitions"]

    @property
    def default_replication_factor(self) -> int:
        return self._values["default.replication.factor"]

    @property
    def auto_create_topics_enable(self) -> bool:
        return self._values["auto.create.topics.enable"]

    @property
    def delete_topic_enable(self) -> bool:
        return self._values["delete.topic.enable"]

    # -- topic defaults

    def _broker_topic_default(self, defn: ConfigDef) -> Any:
        """The broker-level value of a topic config: the first set synonym, in its unit."""
        for syn in defn.synonyms:
            value = self._values.get(syn.name)
            if value is not None:
                if syn.factor != 1:
                    value = value * syn.factor
                if defn.name == "retention.ms" and value < 0:
                    value = -1
                return value
        return defn.default

    def topic_defaults(self) -> dict[str, Any]:
        """Typed value of every topic config for a topic without overrides."""
        return {name: self._broker_topic_default(d) for name, d in TOPIC_CONFIGS.items()}

    def topic_config(self, overrides: Mapping[str, str] | None = None) -> dict[str, Any]:
        """Typed effective topic configs: the topic's overrides over the broker defaults."""
        values = self.topic_defaults()
        for name, raw in (overrides or {}).items():
            defn = TOPIC_CONFIGS.get(name)
            if defn is not None:
                values[name] = defn.parse(raw)
        return values

    def topic_config_strings(self, overrides: Mapping[str, str] | None = None) -> dict[str, str]:
        """Effective topic configs as Kafka's strings (what storage's LogConfig.from_props reads)."""
        values = self.topic_config(overrides)
        return {
            name: s
            for name, value in values.items()
            if (s := TOPIC_CONFIGS[name].to_string(value)) is not None
        }

    # -- dynamic configuration

    def update_dynamic(
        self,
        *,
        broker: Mapping[str, str] | None = None,
        default: Mapping[str, str] | None = None,
    ) -> set[str]:
        """Replace the dynamic layers (those given); return the names whose value changed.

        Invalid dynamic values are dropped with a warning (Kafka keeps running on bad ZK data).
        """
        before = self._merged()
        old = (dict(self.dynamic_broker), dict(self.dynamic_default))
        if broker is not None:
            self.dynamic_broker = self._usable_dynamic(broker, per_broker=True)
        if default is not None:
            self.dynamic_default = self._usable_dynamic(default, per_broker=False)
        try:
            self._rebuild()
        except ConfigError as e:
            log.warning("Ignoring dynamic configuration update: %s", e)
            self.dynamic_broker, self.dynamic_default = old
            self._rebuild()
            return set()
        after = self._merged()
        return {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}

    def _usable_dynamic(self, props: Mapping[str, str], per_broker: bool) -> dict[str, str]:
        usable = {}
        for key, value in props.items():
            try:
                validate_dynamic_broker_configs({key: value}, per_broker=per_broker)
            except ConfigError as e:
                log.warning("Ignoring dynamic broker config %s: %s", key, e)
                continue
            usable[key] = value
        return usable

    # -- describe

    def _synonyms(
        self, names: Iterable[str], primary: str, sensitive: bool
    ) -> list[ConfigSynonymEntry]:
        """Kafka's synonym list: dynamic broker, dynamic default, static, default; then drop
        everything before the first entry named `primary`."""
        names = list(names)
        out: list[ConfigSynonymEntry] = []
        layers: list[tuple[Mapping[str, str], ConfigSource]] = [
            (self.dynamic_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
            (self.dynamic_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
            (self.originals, ConfigSource.STATIC_BROKER_CONFIG),
            (static_defaults(), ConfigSource.DEFAULT_CONFIG),
        ]
        for layer, source in layers:
            for n in names:
                if n in layer:
                    out.append(ConfigSynonymEntry(n, None if sensitive else layer[n], source))
        while out and out[0].name != primary:
            out.pop(0)
        return out

    def describe_broker(
        self,
        *,
        per_broker: bool = True,
        names: Iterable[str] | None = None,
        include_synonyms: bool = False,
        include_documentation: bool = False,
    ) -> list[ConfigEntry]:
        """DescribeConfigs data for this broker (`per_broker`) or for the cluster default
        resource (only the dynamic default entries, as Kafka lists them)."""
        if per_broker:
            all_names = list(BROKER_CONFIGS)  # Kafka describes defined properties only
        else:
            all_names = list(self.dynamic_default)
        wanted = set(names) if names is not None else None
        entries = []
        for name in all_names:
            if wanted is not None and name not in wanted:
                continue
            defn = broker_def(name)
            sensitive = is_sensitive_name(name)
            if per_broker and defn is not None and name in BROKER_CONFIGS:
                value = None if sensitive else defn.to_string(self._values[name])
            else:
                raw = self.get_raw(name) if per_broker else self.dynamic_default.get(name)
                value = None if sensitive else raw
            synonyms = self._synonyms(broker_synonym_group(name), name, sensitive)
            if not per_broker:
                synonyms = [
                    s for s in synonyms if s.source is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
                ]
            source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
            entries.append(
                ConfigEntry(
                    name=name,
                    value=value,
                    source=source,
                    is_sensitive=sensitive,
                    read_only=defn is None or defn.update_mode is UpdateMode.READ_ONLY,
                    config_type=defn.type if defn else ConfigType.UNKNOWN,
                    synonyms=tuple(synonyms) if include_synonyms else (),
                    documentation=(defn.doc if defn else None) if include_documentation else None,
                )
            )
        return entries

    def describe_topic(
        self,
        overrides: Mapping[str, str],
        *,
        names: Iterable[str] | None = None,
        include_synonyms: bool = False,
        include_documentation: bool = False,
    ) -> list[ConfigEntry]:
        """DescribeConfigs data for a topic with the given overrides (/config/topics/<t>)."""
        values = self.topic_config(overrides)
        wanted = set(names) if names is not None else None
        entries = []
        for name, defn in TOPIC_CONFIGS.items():
            if wanted is not None and name not in wanted:
                continue
            sensitive = defn.sensitive
            value = None if sensitive else defn.to_string(values[name])
            synonyms: list[ConfigSynonymEntry] = []
            if defn.synonyms:
                primary = defn.synonyms[0].name
                synonyms = self._synonyms(broker_synonym_group(primary), primary, sensitive)
            if name in overrides:
                synonyms.insert(
                    0, ConfigSynonymEntry(name, value, ConfigSource.DYNAMIC_TOPIC_CONFIG)
                )
            source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
            entries.append(
                ConfigEntry(
                    name=name,
                    value=value,
                    source=source,
                    is_sensitive=sensitive,
                    read_only=False,
                    config_type=defn.type,
                    synonyms=tuple(synonyms) if include_synonyms else (),
                    documentation=defn.doc if include_documentation else None,
                )
            )
        return entries


def load_config(path: str | None, overrides: Iterable[str] = ()) -> BrokerConfig:
    """Read a server.properties file (optional) and apply `key=value` overrides after it.

    Unknown keys are logged as warnings; an invalid value raises ConfigError naming the key.
    The file is read as UTF-8 (Java reads ISO-8859-1; UTF-8 is what people actually write), and
    falls back to ISO-8859-1 when it is not valid UTF-8.
    """
    props: dict[str, str] = {}
    if path is not None:
        with open(path, "rb") as f:
            data = f.read()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = data.decode("latin-1")
        try:
            props.update(parse_properties(text))
        except ValueError as e:
            raise ConfigError("", f"{path}: {e}") from e
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(key.strip(), f"Invalid override {item!r}: expected key=value")
        props[key.strip()] = value
    return BrokerConfig(props)


# --------------------------------------------------------------------------------------------


# Topic config validation (CreateTopics, AlterConfigs): needs the broker's effective defaults


def validate_topic_configs(
    props: Mapping[str, str | None], broker: BrokerConfig | None = None
) -> dict[str, Any]:
    """Validate topic overrides; return their typed values.

    Raises UnknownConfigError ("Unknown topic config name: x") or ConfigError (Kafka's
    "Invalid value ... for configuration ...") — both are INVALID_CONFIG on the wire.
    """
    for name in props:
        if name not in TOPIC_CONFIGS:
            raise UnknownConfigError(name, f"Unknown topic config name: {name}")
    nulls = [n for n, v in props.items() if v is None]
    if nulls:
        raise ConfigError(
            nulls[0], f"Null value not supported for topic configs: {','.join(nulls)}"
        )
    typed = {name: TOPIC_CONFIGS[name].parse(raw) for name, raw in props.items()}
    effective = (broker or _default_broker_config()).topic_config(props)  # type: ignore[arg-type]
    lo, hi = effective["min.compaction.lag.ms"], effective["max.compaction.lag.ms"]
    if lo > hi:
        raise ConfigError(
            "min.compaction.lag.ms",
            f"conflict topic config setting min.compaction.lag.ms ({lo}) > "
            f"max.compaction.lag.ms ({hi})",
        )
    return typed


_DEFAULT_BROKER: BrokerConfig | None = None


def _default_broker_config() -> BrokerConfig:
    global _DEFAULT_BROKER
    if _DEFAULT_BROKER is None:
        _DEFAULT_BROKER = BrokerConfig({}, warn_unknown=False)
    return _DEFAULT_BROKER
