"""Config values: types, parsing to Python values, Kafka's string forms, validators, ConfigDef.

Pure data and functions shared by the definitions, the broker's configuration and validation.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum
from typing import Any

from ..protocol.config_types import ConfigType

INT_MAX = 2**31 - 1
INT_MIN = -(2**31)
LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)
SHORT_MAX = 2**15 - 1
SHORT_MIN = -(2**15)
DOUBLE_MAX = 1.7976931348623157e308

#: Name of the embedded metadata store's directory inside the first log dir (see the package doc).
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
