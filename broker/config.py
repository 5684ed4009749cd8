"""Broker and topic configuration: Kafka's property names, types, defaults and validation.

Everything a broker reads from `server.properties` is declared here once, as data (`ConfigDef`),
so that parsing, validation, DescribeConfigs and dynamic updates all agree. Topic-level configs
carry their broker-level synonyms (`retention.ms` <- `log.retention.ms`, `log.retention.minutes`,
`log.retention.hours`), which is how a topic without an override inherits the broker's value.

Layering: this module is pure (no protocol, no I/O except `load_config` reading one file); the
cluster layer turns `ConfigError` into Kafka's INVALID_CONFIG.

Odradek's own properties (not Kafka's) are marked `odradek=True`:
- `metadata.store.dir`: where the embedded metadata store keeps its files when
  `zookeeper.connect` is empty (default `<first log dir>/__odradek_metadata`).
"""

from __future__ import annotations

import logging
import math
import re
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum
from typing import Any, NamedTuple

from .properties import parse_properties
from .protocol.config_types import ConfigSource, ConfigType

log = logging.getLogger(__name__)

INT_MAX = 2**31 - 1
INT_MIN = -(2**31)
LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)
SHORT_MAX = 2**15 - 1
SHORT_MIN = -(2**15)
DOUBLE_MAX = 1.7976931348623157e308

#: Name of the embedded metadata store's directory inside the first log dir (see module doc).
METADATA_STORE_DIRNAME = "__odradek_metadata"


# --------------------------------------------------------------------------------------------
# Errors, enums


class ConfigError(ValueError):
    """A configuration value (or name) is invalid; `key` names the offending property."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key

    @classmethod
    def invalid(cls, key: str, value: Any, reason: str | None = None) -> ConfigError:
        """Kafka's wording: `Invalid value V for configuration K: reason`."""
        text = f"Invalid value {java_str(value)} for configuration {key}"
        return cls(key, f"{text}: {reason}" if reason else text)


class UnknownConfigError(ConfigError):
    """A topic config name that no definition matches."""


class Importance(Enum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class UpdateMode(Enum):
    """Whether a broker property may change at run time (AlterConfigs on a BROKER resource)."""

    READ_ONLY = "read-only"  # only server.properties, needs a restart
    PER_BROKER = "per-broker"  # /config/brokers/<id> only
    CLUSTER_WIDE = "cluster-wide"  # /config/brokers/<id> or /config/brokers/<default>


class Password:
    """A secret value; its repr and str never show it (log lines, DescribeConfigs)."""

    __slots__ = ("value",)

    def __init__(self, value: str) -> None:
        self.value = value

    def __repr__(self) -> str:
        return "[hidden]"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Password) and other.value == self.value

    def __hash__(self) -> int:
        return hash(self.value)


# --------------------------------------------------------------------------------------------
# Value formatting and parsing (Java's conventions, so messages and DescribeConfigs match Kafka)


def java_double(v: float) -> str:
    """Format a float as Java's Double.toString does (0.5, 1.0, 1.0E7, 1.7976931348623157E308)."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    if v == 0:
        return "-0.0" if math.copysign(1.0, v) < 0 else "0.0"
    if 1e-3 <= abs(v) < 1e7:
        return repr(v)  # Python's repr is positional and shortest in this range, like Java
    sign, digits, exp = Decimal(repr(v)).normalize().as_tuple()
    text = "".join(map(str, digits))
    exponent = int(exp) + len(text) - 1
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{exponent}"


def java_str(value: Any) -> str:
    """Render a value as Java's toString would inside an error message."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(java_str(v) for v in value) + "]"
    return str(value)


def _parse_int(name: str, raw: str, lo: int, hi: int, kind: str) -> int:
    text = raw.strip()
    if not re.fullmatch(r"[+-]?\d+", text):
        raise ConfigError.invalid(name, raw, f"Not a number of type {kind}")
    value = int(text)
    if not lo <= value <= hi:
        raise ConfigError.invalid(name, raw, f"Not a number of type {kind}")
    return value


_DOUBLE_RE = re.compile(r"[+-]?(NaN|Infinity|((\d+\.?\d*|\.\d+)([eE][+-]?\d+)?))[fFdD]?")


def parse_value(name: str, ctype: ConfigType, raw: Any) -> Any:
    """Turn a raw value (usually a string from a file or a request) into its typed value."""
    if raw is None:
        return None
    if not isinstance(raw, str):
        return _coerce(name, ctype, raw)
    if ctype is ConfigType.BOOLEAN:
        text = raw.strip().lower()
        if text in ("true", "false"):
            return text == "true"
        raise ConfigError.invalid(name, raw, "Expected value to be either true or false")
    if ctype is ConfigType.INT:
        return _parse_int(name, raw, INT_MIN, INT_MAX, "INT")
    if ctype is ConfigType.SHORT:
        return _parse_int(name, raw, SHORT_MIN, SHORT_MAX, "SHORT")
    if ctype is ConfigType.LONG:
        return _parse_int(name, raw, LONG_MIN, LONG_MAX, "LONG")
    if ctype is ConfigType.DOUBLE:
        text = raw.strip()
        if not _DOUBLE_RE.fullmatch(text):
            raise ConfigError.invalid(name, raw, "Not a number of type DOUBLE")
        return float(text.rstrip("fFdD"))
    if ctype is ConfigType.LIST:
        text = raw.strip()
        if not text:
            return []
        parts = re.split(r"\s*,\s*", text)
        while parts and parts[-1] == "":  # Java's split drops trailing empty strings
            parts.pop()
        return parts
    if ctype is ConfigType.PASSWORD:
        return Password(raw.strip())
    return raw.strip()  # STRING, CLASS


def _coerce(name: str, ctype: ConfigType, value: Any) -> Any:
    """Accept already-typed values (defaults, programmatic overrides) after a type check."""
    ok = {
        ConfigType.BOOLEAN: lambda v: isinstance(v, bool),
        ConfigType.INT: lambda v: isinstance(v, int) and not isinstance(v, bool),
        ConfigType.SHORT: lambda v: isinstance(v, int) and not isinstance(v, bool),
        ConfigType.LONG: lambda v: isinstance(v, int) and not isinstance(v, bool),
        ConfigType.DOUBLE: lambda v: isinstance(v, int | float) and not isinstance(v, bool),
        ConfigType.LIST: lambda v: isinstance(v, list | tuple),
        ConfigType.PASSWORD: lambda v: isinstance(v, Password),
    }.get(ctype, lambda v: isinstance(v, str))
    if not ok(value):
        raise ConfigError.invalid(name, value, f"Expected value of type {ctype.name}")
    if ctype is ConfigType.DOUBLE:
        return float(value)
    if ctype is ConfigType.LIST:
        return [str(v) for v in value]
    return value


def value_to_string(ctype: ConfigType, value: Any) -> str | None:
    """Kafka's canonical string form of a typed value (what DescribeConfigs and ZK carry)."""
    if value is None:
        return None
    if ctype is ConfigType.LIST:
        return ",".join(str(v) for v in value)
    if ctype is ConfigType.PASSWORD:
        return "[hidden]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double(value)
    return str(value)


# --------------------------------------------------------------------------------------------
# Validators


class Validator:
    """Checks one typed value; raises ConfigError naming the key. `str()` is the doc form."""

    def __call__(self, name: str, value: Any) -> None:  # pragma: no cover - interface
        raise NotImplementedError


@dataclass(frozen=True)
class Range(Validator):
    lo: int | float | None = None
    hi: int | float | None = None

    def __call__(self, name: str, value: Any) -> None:
        if value is None:
            raise ConfigError.invalid(name, value, "Value must be non-null")
        if self.lo is not None and value < self.lo:
            raise ConfigError.invalid(name, value, f"Value must be at least {java_str(self.lo)}")
        if self.hi is not None and value > self.hi:
            raise ConfigError.invalid(
                name, value, f"Value must be no more than {java_str(self.hi)}"
            )

    def __str__(self) -> str:
        if self.hi is None:
            return f"[{java_str(self.lo)},...]"
        if self.lo is None:
            return f"[...,{java_str(self.hi)}]"
        return f"[{java_str(self.lo)},...,{java_str(self.hi)}]"


def at_least(lo: int | float) -> Range:
    return Range(lo, None)


def between(lo: int | float, hi: int | float) -> Range:
    return Range(lo, hi)


@dataclass(frozen=True)
class OneOf(Validator):
    """A string from a fixed set (optionally case-insensitive); None allowed when `nullable`."""

    choices: tuple[str, ...]
    case_insensitive: bool = False
    nullable: bool = False

    def __call__(self, name: str, value: Any) -> None:
        if value is None and self.nullable:
            return
        allowed = self.choices
        probe = value
        if self.case_insensitive and isinstance(value, str):
            allowed = tuple(c.upper() for c in self.choices)
            probe = value.upper()
        if probe not in allowed:
            how = " (case insensitive)" if self.case_insensitive else ""
            raise ConfigError.invalid(
                name, value, f"String must be one of{how}: {', '.join(self.choices)}"
            )

    def __str__(self) -> str:
        return "[" + ", ".join(self.choices) + "]"


@dataclass(frozen=True)
class ListOf(Validator):
    """Every element of a LIST value must be one of `choices`."""

    choices: tuple[str, ...]
    allow_empty: bool = True

    def __call__(self, name: str, value: Any) -> None:
        if value is None:
            raise ConfigError.invalid(name, value, "Value must be non-null")
        if not value and not self.allow_empty:
            raise ConfigError.invalid(name, value, "Empty list not allowed")
        for item in value:
            OneOf(self.choices)(name, item)

    def __str__(self) -> str:
        return "[" + ", ".join(self.choices) + "]"


@dataclass(frozen=True)
class Matches(Validator):
    """A string matching a regular expression (None allowed when `nullable`)."""

    pattern: str
    what: str
    nullable: bool = True

    def __call__(self, name: str, value: Any) -> None:
        if value is None and self.nullable:
            return
        if value is None or not re.fullmatch(self.pattern, str(value)):
            raise ConfigError.invalid(name, value, self.what)

    def __str__(self) -> str:
        return self.what


@dataclass(frozen=True)
class GzipLevel(Validator):
    """-1 (codec default) or 1..9."""

    def __call__(self, name: str, value: Any) -> None:
        if value is None:
            raise ConfigError.invalid(name, value, "Value must be non-null")
        if value != -1 and not 1 <= value <= 9:
            raise ConfigError.invalid(name, value, "Value must be between 1 and 9, or equal to -1")

    def __str__(self) -> str:
        return "[1,...,9] or -1"


REPLICATION_THROTTLING_UNSUPPORTED = "replication throttling is not supported by Odradek"


@dataclass(frozen=True)
class ThrottledReplicas(Validator):
    """`*` or a list of `partition:broker` pairs (replication throttling). Odradek does not
    throttle replication, so only the empty default is accepted; Kafka's format is still
    checked first, for Kafka's message about a malformed list."""

    def __call__(self, name: str, value: Any) -> None:
        items = [v.strip() for v in value or []]
        if items == ["*"] or all(re.fullmatch(r"\d+:\d+", v) for v in items):
            if items:
                raise ConfigError.invalid(name, value, REPLICATION_THROTTLING_UNSUPPORTED)
            return
        raise ConfigError.invalid(
            name,
            value,
            "must be the literal '*' or a list of replicas in the following format: "
            "[partitionId]:[brokerId],[partitionId]:[brokerId],...",
        )

    def __str__(self) -> str:
        return "[partitionId]:[brokerId],[partitionId]:[brokerId],..."


@dataclass(frozen=True)
class MustBe(Validator):
    """A value that Odradek only supports at one setting (a feature it does not implement)."""

    expected: Any
    why: str

    def __call__(self, name: str, value: Any) -> None:
        if value != self.expected:
            raise ConfigError.invalid(name, value, self.why)

    def __str__(self) -> str:
        return java_str(self.expected)


# --------------------------------------------------------------------------------------------
# Definitions


@dataclass(frozen=True)
class Synonym:
    """A broker property that supplies a topic config's default; `factor` converts its unit."""

    name: str
    factor: int = 1


@dataclass(frozen=True)
class ConfigDef:
    """One property: name, type, default (typed), doc, validator and how it may be updated."""

    name: str
    type: ConfigType
    default: Any
    doc: str
    importance: Importance = Importance.MEDIUM
    validator: Validator | None = None
    update_mode: UpdateMode = UpdateMode.READ_ONLY
    synonyms: tuple[Synonym, ...] = ()  # topic configs only, most specific first
    odradek: bool = False  # Odradek's own property, not Kafka's

    @property
    def sensitive(self) -> bool:
        return self.type is ConfigType.PASSWORD

    def parse(self, raw: Any) -> Any:
        """Parse and validate a raw value; None means "use the default"."""
        value = parse_value(self.name, self.type, raw)
        if value is None:
            value = self.default
        if value is None:
            return None  # optional property left unset
        if self.validator is not None:
            self.validator(self.name, value)
        return value

    def to_string(self, value: Any) -> str | None:
        return value_to_string(self.type, value)


T = ConfigType
H, M, L = Importance.HIGH, Importance.MEDIUM, Importance.LOW
RO, PB, CW = UpdateMode.READ_ONLY, UpdateMode.PER_BROKER, UpdateMode.CLUSTER_WIDE

_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_COMPRESSION = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
_CLEANUP = ("compact", "delete")
_VERSION_RE = Matches(r"\d+\.\d+(\.\d+)?(-IV\d+)?", "Not a valid metadata version", nullable=False)


def _defs(*items: ConfigDef) -> dict[str, ConfigDef]:
    out: dict[str, ConfigDef] = {}
    for item in items:
        if item.name in out:
            raise AssertionError(f"duplicate config definition {item.name}")
        out[item.name] = item
    return out


def _d(name, type_, default, doc, imp=M, validator=None, mode=RO, **kw) -> ConfigDef:  # noqa: ANN001
    return ConfigDef(name, type_, default, doc, imp, validator, mode, **kw)


# fmt: off
BROKER_CONFIGS: dict[str, ConfigDef] = _defs(
    # --- identity, listeners, metadata store
    _d("broker.id", T.INT, -1, "This broker's id; -1 asks the cluster for a generated one.", H),
    _d("broker.id.generation.enable", T.BOOLEAN, True, "Allow generated broker ids when broker.id is -1."),
    _d("reserved.broker.max.id", T.INT, 1000, "Generated broker ids start above this value.", M, at_least(0)),
    _d("broker.rack", T.STRING, None, "Rack (failure domain) of this broker, used for replica placement."),
    _d("listeners", T.STRING, "PLAINTEXT://:9092", "Comma-separated listener URIs to bind (NAME://host:port); an empty host binds every interface.", H, mode=PB),
    _d("advertised.listeners", T.STRING, None, "Listener URIs published to clients; defaults to listeners.", H, mode=PB),
    _d("listener.security.protocol.map", T.STRING, "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL", "Security protocol of each listener name (NAME:PROTOCOL,...).", L, mode=PB),
    _d("inter.broker.listener.name", T.STRING, None, "Listener brokers use to talk to each other."),
    _d("security.inter.broker.protocol", T.STRING, "PLAINTEXT", "Security protocol between brokers when no inter-broker listener name is set.", M, OneOf(_PROTOCOLS, case_insensitive=True)),
    _d("control.plane.listener.name", T.STRING, None, "Optional dedicated listener for controller requests."),
    _d("inter.broker.protocol.version", T.STRING, "3.9-IV0", "Inter-broker protocol version (selects request versions between brokers).", M, _VERSION_RE),
    _d("zookeeper.connect", T.STRING, None, "ZooKeeper connection string host:port[,host:port][/chroot]. Empty: Odradek uses its embedded metadata store (single broker).", H),
    _d("zookeeper.session.timeout.ms", T.INT, 18000, "ZooKeeper session timeout.", H),
    _d("zookeeper.connection.timeout.ms", T.INT, None, "How long to wait for a ZooKeeper connection; defaults to the session timeout.", H),
    _d("zookeeper.max.in.flight.requests", T.INT, 10, "Unacknowledged ZooKeeper requests allowed before blocking.", H, at_least(1)),
    _d("zookeeper.set.acl", T.BOOLEAN, False, "Create znodes with secure ACLs."),
    _d("zookeeper.ssl.client.enable", T.BOOLEAN, False, "Use TLS to connect to ZooKeeper."),
    _d("metadata.store.dir", T.STRING, None, f"Odradek: directory of the embedded metadata store used when zookeeper.connect is empty; default <first log dir>/{METADATA_STORE_DIRNAME}.", H, odradek=True),
    # --- threads, sockets, requests
    _d("num.network.threads", T.INT, 3, "Threads receiving requests and sending responses.", H, at_least(1), CW),
    _d("num.io.threads", T.INT, 8, "Threads processing requests.", H, at_least(1), CW),
    _d("num.replica.fetchers", T.INT, 1, "Fetcher threads per source broker for replication.", H, mode=CW),
    _d("num.recovery.threads.per.data.dir", T.INT, 1, "Threads per log dir for recovery at startup and flush at shutdown.", H, at_least(1), CW),
    _d("background.threads", T.INT, 10, "Threads for background work (retention, deletion).", H, at_least(1), CW),
    _d("queued.max.requests", T.INT, 500, "Requests queued before network threads stop reading.", H, at_least(1)),
    _d("queued.max.request.bytes", T.LONG, -1, "Bytes of queued requests before reading stops; -1 means no limit."),
    _d("socket.send.buffer.bytes", T.INT, 102400, "SO_SNDBUF of server sockets; -1 uses the OS default.", H),
    _d("socket.receive.buffer.bytes", T.INT, 102400, "SO_RCVBUF of server sockets; -1 uses the OS default.", H),
    _d("socket.request.max.bytes", T.INT, 104857600, "Largest request size accepted.", H, at_least(1)),
    _d("socket.listen.backlog.size", T.INT, 50, "Pending connection backlog per listener.", M, at_least(1)),
    _d("socket.connection.setup.timeout.ms", T.LONG, 10000, "Initial timeout for establishing inter-broker connections."),
    _d("connections.max.idle.ms", T.LONG, 600000, "Idle connections are closed after this long."),
    _d("connections.max.reauth.ms", T.LONG, 0, "Maximum SASL session lifetime before re-authentication; 0 disables."),
    _d("max.connections", T.INT, INT_MAX, "Connections allowed per broker.", M, at_least(0), CW),
    _d("max.connections.per.ip", T.INT, INT_MAX, "Connections allowed from one address.", M, at_least(0), CW),
    _d("max.connections.per.ip.overrides", T.STRING, "", "Per-address connection limits (ip:count,...).", M, mode=CW),
    _d("max.connection.creation.rate", T.INT, INT_MAX, "New connections per second allowed on the broker.", M, at_least(0), CW),
    _d("fetch.max.bytes", T.INT, 57671680, "Largest fetch response the broker returns.", M, at_least(1024)),
    _d("request.timeout.ms", T.INT, 30000, "Timeout of requests the broker sends to other brokers." ),
    # --- logs
    _d("log.dirs", T.STRING, None, "Comma-separated log directories; defaults to log.dir.", H),
    _d("log.dir", T.STRING, "/tmp/kafka-logs", "Log directory used when log.dirs is unset.", H),
    _d("num.partitions", T.INT, 1, "Partitions of auto-created topics and of CreateTopics requests without a count.", M, at_least(1)),
    _d("default.replication.factor", T.INT, 1, "Replication factor of auto-created topics and of requests without one."),
    _d("auto.create.topics.enable", T.BOOLEAN, True, "Create unknown topics when clients ask for their metadata.", H),
    _d("delete.topic.enable", T.BOOLEAN, True, "Allow DeleteTopics; when false deletion requests fail.", H),
    _d("log.segment.bytes", T.INT, 1073741824, "Size at which a new log segment is rolled.", H, at_least(14), CW),
    _d("log.roll.ms", T.LONG, None, "Age at which a new segment is rolled; overrides log.roll.hours.", H, mode=CW),
    _d("log.roll.hours", T.INT, 168, "Age in hours at which a new segment is rolled.", H, at_least(1), CW),
    _d("log.roll.jitter.ms", T.LONG, None, "Random jitter subtracted from the roll time; overrides log.roll.jitter.hours.", H, mode=CW),
    _d("log.roll.jitter.hours", T.INT, 0, "Random jitter in hours subtracted from the roll time.", H, at_least(0), CW),
    _d("log.retention.ms", T.LONG, None, "Time a segment is kept before deletion (-1: forever); overrides minutes and hours.", H, mode=CW),
    _d("log.retention.minutes", T.INT, None, "Retention time in minutes; overrides log.retention.hours.", H, mode=CW),
    _d("log.retention.hours", T.INT, 168, "Retention time in hours.", H, mode=CW),
    _d("log.retention.bytes", T.LONG, -1, "Largest size a partition may reach before old segments are deleted; -1 means no limit.", H, mode=CW),
    _d("log.retention.check.interval.ms", T.LONG, 300000, "How often retention is checked.", M, at_least(1)),
    _d("log.segment.delete.delay.ms", T.LONG, 60000, "Delay before a deleted segment's files are removed.", H, at_least(0), CW),
    _d("log.index.size.max.bytes", T.INT, 10485760, "Maximum size of an offset or time index file.", M, at_least(4), CW),
    _d("log.index.interval.bytes", T.INT, 4096, "Bytes of log between two index entries.", M, at_least(0), CW),
    _d("log.flush.interval.messages", T.LONG, LONG_MAX, "Messages accumulated before the log is fsynced.", H, at_least(1), CW),
    _d("log.flush.interval.ms", T.LONG, None, "Time data may stay unflushed; defaults to log.flush.scheduler.interval.ms.", H, mode=CW),
    _d("log.flush.scheduler.interval.ms", T.LONG, LONG_MAX, "How often the flusher checks whether a log needs an fsync.", H),
    _d("log.flush.offset.checkpoint.interval.ms", T.INT, 60000, "How often the recovery point is checkpointed.", H, at_least(0)),
    _d("log.flush.start.offset.checkpoint.interval.ms", T.INT, 60000, "How often log start offsets are checkpointed.", H, at_least(0)),
    _d("log.cleanup.policy", T.LIST, ["delete"], "Default cleanup policy of segments past retention: delete and/or compact.", M, ListOf(_CLEANUP), CW),
    _d("log.cleaner.enable", T.BOOLEAN, True, "Run the log cleaner (needed for compacted topics)."),
    _d("log.cleaner.threads", T.INT, 1, "Threads of the log cleaner.", M, at_least(0), CW),
    _d("log.cleaner.dedupe.buffer.size", T.LONG, 134217728, "Memory for key deduplication across cleaner threads.", M, mode=CW),
    _d("log.cleaner.io.buffer.size", T.INT, 524288, "I/O buffer memory of the cleaner.", M, at_least(0), CW),
    _d("log.cleaner.io.buffer.load.factor", T.DOUBLE, 0.9, "Load factor of the cleaner's dedupe buffer.", M, mode=CW),
    _d("log.cleaner.io.max.bytes.per.second", T.DOUBLE, DOUBLE_MAX, "I/O throttle of the cleaner.", M, mode=CW),
    _d("log.cleaner.backoff.ms", T.LONG, 15000, "Sleep when there is nothing to clean.", M, at_least(0), CW),
    _d("log.cleaner.min.cleanable.ratio", T.DOUBLE, 0.5, "Dirty ratio above which a log is cleaned.", M, between(0, 1), CW),
    _d("log.cleaner.delete.retention.ms", T.LONG, 86400000, "How long delete markers are kept in compacted logs.", M, at_least(0), CW),
    _d("log.cleaner.min.compaction.lag.ms", T.LONG, 0, "Minimum age of a message before it may be compacted.", M, at_least(0), CW),
    _d("log.cleaner.max.compaction.lag.ms", T.LONG, LONG_MAX, "Maximum time a message stays ineligible for compaction.", M, at_least(1), CW),
    _d("log.preallocate", T.BOOLEAN, False, "Preallocate segment files.", M, mode=CW),
    _d("log.message.format.version", T.STRING, "3.0-IV1", "Deprecated; ignored since inter.broker.protocol.version 3.0.", M, _VERSION_RE),
    _d("log.message.timestamp.type", T.STRING, "CreateTime", "Timestamp stored in records: the producer's (CreateTime) or the broker's append time (LogAppendTime).", M, OneOf(_TIMESTAMP_TYPES), CW),
    _d("log.message.timestamp.difference.max.ms", T.LONG, LONG_MAX, "Deprecated; largest allowed distance between a CreateTime timestamp and the broker's clock.", M, at_least(0), CW),
    _d("log.message.timestamp.before.max.ms", T.LONG, LONG_MAX, "How far in the past a CreateTime timestamp may be.", M, at_least(0), CW),
    _d("log.message.timestamp.after.max.ms", T.LONG, LONG_MAX, "How far in the future a CreateTime timestamp may be.", M, at_least(0), CW),
    _d("log.message.downconversion.enable", T.BOOLEAN, True, "Convert records to old formats for old consumers.", L, mode=CW),
    _d("log.local.retention.ms", T.LONG, -2, "Local retention with tiered storage; -2 follows log.retention.ms.", M, at_least(-2), CW),
    _d("log.local.retention.bytes", T.LONG, -2, "Local size limit with tiered storage; -2 follows log.retention.bytes.", M, at_least(-2), CW),
    _d("message.max.bytes", T.INT, 1048588, "Largest record batch the broker accepts (after compression).", H, at_least(0), CW),
    _d("compression.type", T.STRING, "producer", "Codec of stored batches: a codec name, or producer to keep the producer's.", H, OneOf(_COMPRESSION), CW),
    _d("compression.gzip.level", T.INT, -1, "gzip level used when the broker compresses.", M, GzipLevel(), CW),
    _d("compression.lz4.level", T.INT, 9, "lz4 level used when the broker compresses.", M, between(1, 17), CW),
    _d("compression.zstd.level", T.INT, 3, "zstd level used when the broker compresses.", M, between(-131072, 22), CW),
    # --- replication, controller
    _d("min.insync.replicas", T.INT, 1, "In-sync replicas required for acks=all writes.", H, at_least(1), CW),
    _d("unclean.leader.election.enable", T.BOOLEAN, False, "Allow an out-of-sync replica to become leader (may lose data).", H, mode=CW),
    _d("auto.leader.rebalance.enable", T.BOOLEAN, True, "Periodically move leadership back to preferred replicas.", H),
    _d("leader.imbalance.per.broker.percentage", T.INT, 10, "Allowed share of non-preferred leaders per broker, in percent.", H),
    _d("leader.imbalance.check.interval.seconds", T.LONG, 300, "How often the controller checks leader balance.", H, at_least(1)),
    _d("controller.socket.timeout.ms", T.INT, 30000, "Socket timeout of controller-to-broker channels."),
    _d("controlled.shutdown.enable", T.BOOLEAN, True, "Move leadership away before shutting down.", M),
    _d("controlled.shutdown.max.retries", T.INT, 3, "Controlled shutdown attempts before an unclean stop.", M),
    _d("controlled.shutdown.retry.backoff.ms", T.LONG, 5000, "Pause between controlled shutdown attempts.", M),
    _d("replica.lag.time.max.ms", T.LONG, 30000, "A follower that has not caught up for this long leaves the ISR.", H),
    _d("replica.socket.timeout.ms", T.INT, 30000, "Socket timeout of follower fetches.", H),
    _d("replica.socket.receive.buffer.bytes", T.INT, 65536, "SO_RCVBUF of follower connections.", H ),
    _d("replica.fetch.max.bytes", T.INT, 1048576, "Bytes fetched per partition by followers.", M, at_least(0)),
    _d("replica.fetch.wait.max.ms", T.INT, 500, "Maximum wait of a follower fetch.", M),
    _d("replica.fetch.min.bytes", T.INT, 1, "Minimum bytes of a follower fetch response.", M),
    _d("replica.fetch.response.max.bytes", T.INT, 10485760, "Bytes per follower fetch response.", M, at_least(0)),
    _d("replica.fetch.backoff.ms", T.INT, 1000, "Sleep after a failed follower fetch.", M, at_least(0)),
    _d("replica.high.watermark.checkpoint.interval.ms", T.LONG, 5000, "How often high watermarks are checkpointed.", H),
    _d("replica.selector.class", T.STRING, None, "Chooses the replica consumers fetch from (KIP-392)."),
    _d("fetch.purgatory.purge.interval.requests", T.INT, 1000, "Purge interval of the fetch purgatory."),
    _d("producer.purgatory.purge.interval.requests", T.INT, 1000, "Purge interval of the produce purgatory."),
    _d("delete.records.purgatory.purge.interval.requests", T.INT, 1, "Purge interval of the delete-records purgatory."),
    # --- group coordinator
    _d("group.min.session.timeout.ms", T.INT, 6000, "Smallest session timeout a consumer may ask for."),
    _d("group.max.session.timeout.ms", T.INT, 1800000, "Largest session timeout a consumer may ask for."),
    _d("group.initial.rebalance.delay.ms", T.INT, 3000, "Wait for more members before the first rebalance of an empty group."),
    _d("group.max.size", T.INT, INT_MAX, "Most members a consumer group may have.", M, at_least(1)),
    _d("offsets.topic.num.partitions", T.INT, 50, "Partitions of __consumer_offsets (do not change after creation).", H, at_least(1)),
    _d("offsets.topic.replication.factor", T.SHORT, 3, "Replication factor of __consumer_offsets; creation fails while fewer brokers are alive.", H, at_least(1)),
    _d("offsets.topic.segment.bytes", T.INT, 104857600, "Segment size of __consumer_offsets.", H, at_least(1)),
    _d("offsets.topic.compression.codec", T.INT, 0, "Codec of offset commit batches.", H),
    _d("offsets.load.buffer.size", T.INT, 5242880, "Read size when loading offsets into the cache.", H, at_least(1)),
    _d("offsets.retention.minutes", T.INT, 10080, "Committed offsets of empty groups are kept this long.", H, at_least(1)),
    _d("offsets.retention.check.interval.ms", T.LONG, 600000, "How often stale offsets are looked for.", H, at_least(1)),
    _d("offsets.commit.timeout.ms", T.INT, 5000, "Timeout of an offset commit's replication.", H, at_least(1)),
    _d("offsets.commit.required.acks", T.SHORT, -1, "Deprecated; acks required for offset commits.", H),
    _d("offset.metadata.max.bytes", T.INT, 4096, "Largest metadata string of a committed offset.", H),
    # --- transactions, idempotence
    _d("transaction.state.log.num.partitions", T.INT, 50, "Partitions of __transaction_state.", H, at_least(1)),
    _d("transaction.state.log.replication.factor", T.SHORT, 3, "Replication factor of __transaction_state.", H, at_least(1)),
    _d("transaction.state.log.min.isr", T.INT, 2, "min.insync.replicas of __transaction_state.", H, at_least(1)),
    _d("transaction.state.log.segment.bytes", T.INT, 104857600, "Segment size of __transaction_state.", H, at_least(1)),
    _d("transaction.state.log.load.buffer.size", T.INT, 5242880, "Read size when loading transaction state.", L, at_least(1)),
    _d("transaction.max.timeout.ms", T.INT, 900000, "Largest transaction timeout a producer may ask for.", H, at_least(1)),
    _d("transactional.id.expiration.ms", T.INT, 604800000, "Idle transactional ids expire after this long.", H, at_least(1)),
    _d("transaction.abort.timed.out.transaction.cleanup.interval.ms", T.INT, 10000, "How often timed-out transactions are aborted.", L, at_least(1)),
    _d("transaction.remove.expired.transaction.cleanup.interval.ms", T.INT, 3600000, "How often expired transactional ids are removed.", L, at_least(1)),
    _d("transaction.partition.verification.enable", T.BOOLEAN, True, "Check that a partition was added to a transaction before accepting its writes.", L, mode=CW),
    _d("producer.id.expiration.ms", T.INT, 86400000, "Idle producer ids' state is dropped after this long.", L, at_least(1), CW),
    _d("producer.id.expiration.check.interval.ms", T.INT, 600000, "How often idle producer ids are looked for.", L, at_least(1)),
    # --- security
    _d("authorizer.class.name", T.STRING, "", "Authorizer implementation; empty disables authorization.", L),
    _d("super.users", T.STRING, None, "Principals allowed everything (User:a;User:b).", L),
    _d("allow.everyone.if.no.acl.found", T.BOOLEAN, False, "Allow access to resources that have no ACLs.", L),
    _d("sasl.enabled.mechanisms", T.LIST, ["GSSAPI"], "SASL mechanisms enabled on the broker.", M, mode=PB),
    _d("sasl.mechanism.inter.broker.protocol", T.STRING, "GSSAPI", "SASL mechanism between brokers.", M, mode=PB),
    _d("sasl.jaas.config", T.PASSWORD, None, "JAAS login configuration for SASL.", M, mode=PB),
    _d("ssl.protocol", T.STRING, "TLSv1.3", "TLS protocol used to create the SSL context.", M, mode=PB),
    _d("ssl.enabled.protocols", T.LIST, ["TLSv1.2", "TLSv1.3"], "TLS protocol versions enabled.", M, mode=PB),
    _d("ssl.cipher.suites", T.LIST, [], "Cipher suites enabled; empty uses the defaults.", L, mode=PB),
    _d("ssl.keystore.type", T.STRING, "JKS", "Key store format (JKS, PKCS12, PEM).", M, mode=PB),
    _d("ssl.keystore.location", T.STRING, None, "Key store file.", H, mode=PB),
    _d("ssl.keystore.password", T.PASSWORD, None, "Key store password.", H, mode=PB),
    _d("ssl.key.password", T.PASSWORD, None, "Password of the private key in the key store.", H, mode=PB),
    _d("ssl.keystore.key", T.PASSWORD, None, "Private key in PEM form.", H, mode=PB),
    _d("ssl.keystore.certificate.chain", T.PASSWORD, None, "Certificate chain in PEM form.", H, mode=PB),
    _d("ssl.truststore.type", T.STRING, "JKS", "Trust store format (JKS, PKCS12, PEM).", M, mode=PB ),
    _d("ssl.truststore.location", T.STRING, None, "Trust store file.", H, mode=PB),
    _d("ssl.truststore.password", T.PASSWORD, None, "Trust store password.", H, mode=PB),
    _d("ssl.truststore.certificates", T.PASSWORD, None, "Trusted certificates in PEM form.", H, mode=PB),
    _d("ssl.client.auth", T.STRING, "none", "Client certificate authentication: required, requested or none.", M, OneOf(("required", "requested", "none")), PB),
    _d("ssl.endpoint.identification.algorithm", T.STRING, "https", "Server host name verification; empty disables it.", L, mode=PB),
    _d("ssl.principal.mapping.rules", T.STRING, "DEFAULT", "Rules mapping certificate names to principals.", L),
    _d("password.encoder.secret", T.PASSWORD, None, "Secret used to encrypt dynamically configured passwords in the metadata store.", M),
    _d("delegation.token.secret.key", T.PASSWORD, None, "Secret that signs delegation tokens; unset disables them.", M),
    _d("delegation.token.master.key", T.PASSWORD, None, "Older name of delegation.token.secret.key.", L),
    _d("delegation.token.max.lifetime.ms", T.LONG, 604800000, "Longest a delegation token can be renewed to live.", M, at_least(1)),
    _d("delegation.token.expiry.time.ms", T.LONG, 86400000, "How long a delegation token lives before it must be renewed.", M, at_least(1)),
    _d("delegation.token.expiry.check.interval.ms", T.LONG, 3600000, "How often expired delegation tokens are removed.", L, at_least(1)),
    # --- quotas, metrics
    _d("quota.window.num", T.INT, 11, "Samples kept for client quotas.", L, at_least(1)),
    _d("quota.window.size.seconds", T.INT, 1, "Length of one client quota sample.", L, at_least(1)),
    _d("replication.quota.window.num", T.INT, 11, "Samples kept for replication quotas.", L, at_least(1)),
    _d("replication.quota.window.size.seconds", T.INT, 1, "Length of one replication quota sample.", L, at_least(1)),
    _d("metric.reporters", T.LIST, [], "Metric reporter classes.", L, mode=CW),
    _d("metrics.num.samples", T.INT, 2, "Samples kept per metric.", L, at_least(1)),
    _d("metrics.sample.window.ms", T.LONG, 30000, "Window of one metric sample.", L, at_least(1)),
    _d("metrics.recording.level", T.STRING, "INFO", "Highest recording level of metrics.", L),
    _d("prometheus.metrics.port", T.INT, -1, "Port of the Prometheus /metrics endpoint; -1 turns it off, 0 picks a free port.", M, at_least(-1)),
    _d("prometheus.metrics.host", T.STRING, "0.0.0.0", "Address the Prometheus /metrics endpoint binds to.", L),
)
# fmt: on

# Broker properties whose names form one synonym group (most specific first), as in Kafka.
_BROKER_SYNONYM_GROUPS: tuple[tuple[str, ...], ...] = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)

_HOUR = 3_600_000
_MINUTE = 60_000


def _t(name, type_, default, doc, validator=None, synonyms=(), imp=M) -> ConfigDef:  # noqa: ANN001
    syn = tuple(s if isinstance(s, Synonym) else Synonym(s) for s in synonyms)
    return ConfigDef(name, type_, default, doc, imp, validator, CW, syn)


# fmt: off
TOPIC_CONFIGS: dict[str, ConfigDef] = _defs(
    _t("cleanup.policy", T.LIST, ["delete"], "delete: drop old segments; compact: keep the latest value of each key.", ListOf(_CLEANUP), ["log.cleanup.policy"]),
    _t("compression.type", T.STRING, "producer", "Codec of stored batches, or producer to keep the producer's codec.", OneOf(_COMPRESSION), ["compression.type"]),
    _t("compression.gzip.level", T.INT, -1, "gzip level when the broker compresses.", GzipLevel(), ["compression.gzip.level"]),
    _t("compression.lz4.level", T.INT, 9, "lz4 level when the broker compresses.", between(1, 17), ["compression.lz4.level"]),
    _t("compression.zstd.level", T.INT, 3, "zstd level when the broker compresses.", between(-131072, 22), ["compression.zstd.level"]),
    _t("delete.retention.ms", T.LONG, 86400000, "How long delete markers stay in a compacted log.", at_least(0), ["log.cleaner.delete.retention.ms"]),
    _t("file.delete.delay.ms", T.LONG, 60000, "Delay before a deleted segment's files are removed.", at_least(0), ["log.segment.delete.delay.ms"]),
    _t("flush.messages", T.LONG, LONG_MAX, "Messages between forced fsyncs.", at_least(1), ["log.flush.interval.messages"]),
    _t("flush.ms", T.LONG, LONG_MAX, "Time between forced fsyncs.", at_least(0), ["log.flush.interval.ms", "log.flush.scheduler.interval.ms"]),
    _t("follower.replication.throttled.replicas", T.LIST, [], "Replicas whose follower-side replication is throttled (not supported).", ThrottledReplicas()),
    _t("index.interval.bytes", T.INT, 4096, "Bytes of log between offset index entries.", at_least(0), ["log.index.interval.bytes"]),
    _t("leader.replication.throttled.replicas", T.LIST, [], "Replicas whose leader-side replication is throttled (not supported).", ThrottledReplicas()),
    _t("local.retention.bytes", T.LONG, -2, "Local size limit with tiered storage (-2: as retention.bytes).", at_least(-2), ["log.local.retention.bytes"]),
    _t("local.retention.ms", T.LONG, -2, "Local retention with tiered storage (-2: as retention.ms).", at_least(-2), ["log.local.retention.ms"]),
    _t("max.compaction.lag.ms", T.LONG, LONG_MAX, "Longest time a message may stay uncompacted.", at_least(1), ["log.cleaner.max.compaction.lag.ms"]),
    _t("max.message.bytes", T.INT, 1048588, "Largest record batch accepted (after compression).", at_least(0), ["message.max.bytes"]),
    _t("message.downconversion.enable", T.BOOLEAN, True, "Convert records for consumers of old fetch versions.", None, ["log.message.downconversion.enable"]),
    _t("message.format.version", T.STRING, "3.0-IV1", "Deprecated; ignored.", _VERSION_RE, ["log.message.format.version"]),
    _t("message.timestamp.after.max.ms", T.LONG, LONG_MAX, "How far in the future a CreateTime timestamp may be.", at_least(0), ["log.message.timestamp.after.max.ms"]),
    _t("message.timestamp.before.max.ms", T.LONG, LONG_MAX, "How far in the past a CreateTime timestamp may be.", at_least(0), ["log.message.timestamp.before.max.ms"]),
    _t("message.timestamp.difference.max.ms", T.LONG, LONG_MAX, "Deprecated; largest distance between a CreateTime timestamp and the broker's clock.", at_least(0), ["log.message.timestamp.difference.max.ms"]),
    _t("message.timestamp.type", T.STRING, "CreateTime", "CreateTime (the producer's timestamp) or LogAppendTime (the broker's).", OneOf(_TIMESTAMP_TYPES), ["log.message.timestamp.type"]),
    _t("min.cleanable.dirty.ratio", T.DOUBLE, 0.5, "Dirty ratio above which the log is compacted.", between(0, 1), ["log.cleaner.min.cleanable.ratio"]),
    _t("min.compaction.lag.ms", T.LONG, 0, "Youngest a message may be and still be compacted.", at_least(0), ["log.cleaner.min.compaction.lag.ms"]),
    _t("min.insync.replicas", T.INT, 1, "In-sync replicas needed for acks=all writes.", at_least(1), ["min.insync.replicas"]),
    _t("preallocate", T.BOOLEAN, False, "Preallocate segment files.", None, ["log.preallocate"]),
    _t("remote.log.copy.disable", T.BOOLEAN, False, "Stop copying segments to tiered storage (not supported).", MustBe(False, "Tiered storage is not supported")),
    _t("remote.log.delete.on.disable", T.BOOLEAN, False, "Delete tiered data when tiering is disabled (not supported).", MustBe(False, "Tiered storage is not supported")),
    _t("remote.storage.enable", T.BOOLEAN, False, "Tiered storage for the topic (not supported by Odradek).", MustBe(False, "Tiered storage is not supported")),
    _t("retention.bytes", T.LONG, -1, "Largest size of a partition before old segments go (-1: no limit).", None, ["log.retention.bytes"]),
    _t("retention.ms", T.LONG, 604800000, "How long segments are kept (-1: forever).", at_least(-1), ["log.retention.ms", Synonym("log.retention.minutes", _MINUTE), Synonym("log.retention.hours", _HOUR)]),
    _t("segment.bytes", T.INT, 1073741824, "Size at which a new segment is rolled.", at_least(14), ["log.segment.bytes"]),
    _t("segment.index.bytes", T.INT, 10485760, "Maximum size of a segment's offset and time indexes.", at_least(4), ["log.index.size.max.bytes"]),
    _t("segment.jitter.ms", T.LONG, 0, "Random jitter subtracted from segment.ms.", at_least(0), ["log.roll.jitter.ms", Synonym("log.roll.jitter.hours", _HOUR)]),
    _t("segment.ms", T.LONG, 604800000, "Age at which a new segment is rolled.", at_least(1), ["log.roll.ms", Synonym("log.roll.hours", _HOUR)]),
    _t("unclean.leader.election.enable", T.BOOLEAN, False, "Allow an out-of-sync replica to become leader.", None, ["unclean.leader.election.enable"]),
)
# fmt: on

#: Broker properties that configure topics (the synonyms), reconfigurable cluster-wide.
TOPIC_SYNONYM_NAMES: frozenset[str] = frozenset(
    s.name for d in TOPIC_CONFIGS.values() for s in d.synonyms
)

# Extra names AlterConfigs accepts for a broker although no static property exists (quotas).
# fmt: off
DYNAMIC_ONLY_BROKER_CONFIGS: dict[str, ConfigDef] = _defs(
    _d("leader.replication.throttled.rate", T.LONG, LONG_MAX, "Leader-side replication throttle in bytes/s (not supported).", M, MustBe(LONG_MAX, REPLICATION_THROTTLING_UNSUPPORTED), PB),
    _d("follower.replication.throttled.rate", T.LONG, LONG_MAX, "Follower-side replication throttle in bytes/s (not supported).", M, MustBe(LONG_MAX, REPLICATION_THROTTLING_UNSUPPORTED), PB),
    _d("replica.alter.log.dirs.io.max.bytes.per.second", T.LONG, LONG_MAX, "Throttle of moves between log dirs in bytes/s.", M, at_least(0), PB),
)
# fmt: on

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def register_broker_config(defn: ConfigDef) -> None:
    """Add a property defined by a higher layer (e.g. the server's metrics port)."""
    global _STATIC_DEFAULTS
    if defn.name in BROKER_CONFIGS:
        raise ValueError(f"config {defn.name} is already defined")
    BROKER_CONFIGS[defn.name] = defn
    _STATIC_DEFAULTS = None


def _listener_prefixed(name: str) -> tuple[str, str] | None:
    """`listener.name.<listener>.<rest>` -> (LISTENER, rest)."""
    m = re.fullmatch(r"listener\.name\.([^.]+)\.(.+)", name)
    return (m.group(1).upper(), m.group(2)) if m else None


def _broker_def(name: str) -> ConfigDef | None:
    return BROKER_CONFIGS.get(name) or DYNAMIC_ONLY_BROKER_CONFIGS.get(name)


_SASL_MECHS = {"plain", "scram-sha-256", "scram-sha-512", "gssapi", "oauthbearer"}


def is_sensitive_name(name: str) -> bool:
    """Passwords, and listener-prefixed properties whose base property is unknown or secret."""
    defn = _broker_def(name)
    if defn is not None:
        return defn.sensitive
    pref = _listener_prefixed(name)
    if pref is not None:
        base = pref[1].split(".", 1)[1] if pref[1].split(".", 1)[0] in _SASL_MECHS else pref[1]
        base_def = BROKER_CONFIGS.get(base)
        return base_def is None or base_def.sensitive
    return False


# --------------------------------------------------------------------------------------------
# Listeners


class Endpoint(NamedTuple):
    """One listener: name (upper case), host ("" = all interfaces), port, security protocol."""

    listener: str
    host: str
    port: int
    security_protocol: str

    def connection_string(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener}://{host}:{self.port}"


_ENDPOINT_RE = re.compile(r"(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)")


def parse_protocol_map(name: str, raw: str) -> dict[str, str]:
    mapping: dict[str, str] = {}
    for item in [p.strip() for p in raw.split(",") if p.strip()]:
        listener, sep, proto = item.partition(":")
        if not sep or proto.strip().upper() not in _PROTOCOLS:
            raise ConfigError.invalid(
                name, raw, f"Invalid listener to security protocol entry '{item}'"
            )
        mapping[listener.strip().upper()] = proto.strip().upper()
    return mapping


def parse_listeners(name: str, raw: str | None, protocol_map: Mapping[str, str]) -> list[Endpoint]:
    """Parse `NAME://host:port,...`; names must be unique and mapped to a security protocol."""
    if raw is None or not raw.strip():
        return []
    endpoints: list[Endpoint] = []
    for item in [p.strip() for p in raw.split(",") if p.strip()]:
        m = _ENDPOINT_RE.fullmatch(item)
        if not m:
            raise ConfigError.invalid(name, raw, f"Unable to parse {item} to a broker endpoint")
        listener = m.group(1).upper()
        if listener not in protocol_map:
            raise ConfigError.invalid(
                name, raw, f"No security protocol defined for listener {listener}"
            )
        port = int(m.group(3))
        if not 0 <= port <= 65535:
            raise ConfigError.invalid(name, raw, f"Invalid port {port} for listener {listener}")
        endpoints.append(Endpoint(listener, m.group(2), port, protocol_map[listener]))
    names = [e.listener for e in endpoints]
    if len(set(names)) != len(names):
        raise ConfigError.invalid(
            name, raw, f"Each listener must have a different name, listeners: {raw}"
        )
    return endpoints


# --------------------------------------------------------------------------------------------
# Describe data


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
        return name in BROKER_CONFIGS or _listener_prefixed(name) is not None

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
        defn = _broker_def(name)
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
            (_static_defaults(), ConfigSource.DEFAULT_CONFIG),
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
            defn = _broker_def(name)
            sensitive = is_sensitive_name(name)
            if per_broker and defn is not None and name in BROKER_CONFIGS:
                value = None if sensitive else defn.to_string(self._values[name])
            else:
                raw = self.get_raw(name) if per_broker else self.dynamic_default.get(name)
                value = None if sensitive else raw
            synonyms = self._synonyms(_broker_synonym_group(name), name, sensitive)
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
                synonyms = self._synonyms(_broker_synonym_group(primary), primary, sensitive)
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


def _broker_synonym_group(name: str) -> tuple[str, ...]:
    if name == "log.flush.interval.ms":
        return ("log.flush.interval.ms", "log.flush.scheduler.interval.ms")
    for group in _BROKER_SYNONYM_GROUPS:
        if name in group:
            return group
    return (name,)


_STATIC_DEFAULTS: dict[str, str] | None = None


def _static_defaults() -> dict[str, str]:
    """String form of every broker default that is not null (cached; definitions are static)."""
    global _STATIC_DEFAULTS
    if _STATIC_DEFAULTS is None:
        _STATIC_DEFAULTS = {
            name: s
            for name, d in BROKER_CONFIGS.items()
            if (s := d.to_string(d.default)) is not None and not d.sensitive
        }
    return _STATIC_DEFAULTS


# --------------------------------------------------------------------------------------------
# Loading


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
# Topic and dynamic broker config validation (CreateTopics, AlterConfigs)


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


def validate_dynamic_broker_configs(props: Mapping[str, str], *, per_broker: bool) -> None:
    """Check that properties may be altered at run time (AlterConfigs on a BROKER resource).

    Mirrors Kafka: known read-only properties are refused, per-broker-only ones are refused at
    the cluster-default level, known properties must parse; unknown names are allowed.
    Passwords cannot be stored: Odradek has no password encoder yet.
    """
    non_dynamic = sorted(
        n for n in props if n in BROKER_CONFIGS and BROKER_CONFIGS[n].update_mode is RO
    )
    if non_dynamic:
        raise ConfigError(
            non_dynamic[0], f"Cannot update these configs dynamically: {_set(non_dynamic)}"
        )
    if not per_broker:
        only_broker = sorted(
            n
            for n in props
            if ((d := _broker_def(n)) is not None and d.update_mode is PB)
            or _listener_prefixed(n) is not None
        )
        if only_broker:
            raise ConfigError(
                only_broker[0],
                "Cannot update these configs at default cluster level, broker id must be "
                f"specified: {_set(only_broker)}",
            )
    for name, raw in props.items():
        defn = _broker_def(name)
        if defn is not None and raw is not None:
            defn.parse(raw)
        if is_sensitive_name(name) and raw is not None:
            raise ConfigError(name, "Password encoder secret not configured")


def _set(names: Iterable[str]) -> str:
    return "Set(" + ", ".join(names) + ")"


def list_config_type(name: str, *, topic: bool) -> bool:
    """Whether `name` is LIST-typed (APPEND/SUBTRACT are only valid for lists)."""
    defn = TOPIC_CONFIGS.get(name) if topic else _broker_def(name)
    return defn is not None and defn.type is ConfigType.LIST


def default_string(name: str, *, topic: bool) -> str | None:
    defn = TOPIC_CONFIGS.get(name) if topic else _broker_def(name)
    return defn.to_string(defn.default) if defn is not None else None


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
    "load_config",
    "register_broker_config",
    "validate_dynamic_broker_configs",
    "validate_topic_configs",
]
