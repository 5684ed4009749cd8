"""Declarative message schemas: one `Api` per API key, covering every version.

A schema is data, not parsing code: the JSON files in `messages/` (one per API, format in that
package's docstring) spell these objects field by field, and `codec` compiles each (api,
version, direction) once into specialised encode/decode functions, so adding a version is a
schema change only.

Decoded messages are plain dicts keyed by the snake_case field names declared here; nested
structs are dicts too and arrays are lists. When encoding, a missing key takes the field's default.

Field types:
- primitives: "bool", "int8", "int16", "int32", "int64", "uint16", "uint32", "float64",
  "string", "bytes", "records", "uuid"
- an array of primitives: "[]int32", "[]string", ...
- an array of structs: a list of fields, `F("topics", [F("name", "string"), ...])`
- a single nested struct: `Struct(F(...), ...)`

Version sets are written "3+", "0-2", "5" or "none" (the Kafka JSON convention).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

PRIMITIVES = frozenset(
    {
        "bool",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint16",
        "uint32",
        "float64",
        "string",
        "bytes",
        "records",
        "uuid",
    }
)

_UNSET: Any = object()


@dataclass(frozen=True)
class Versions:
    """An inclusive version range; `lo > hi` means the empty set."""

    lo: int
    hi: int

    @classmethod
    def parse(cls, spec: str | None) -> Versions:
        if spec is None or spec == "none" or spec == "":
            return cls(1, 0)
        if spec.endswith("+"):
            return cls(int(spec[:-1]), 32767)
        if "-" in spec:
            lo, hi = spec.split("-", 1)
            return cls(int(lo), int(hi))
        v = int(spec)
        return cls(v, v)

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.lo <= version <= self.hi

    @property
    def empty(self) -> bool:
        return self.lo > self.hi


@dataclass(frozen=True)
class Struct:
    """A single nested struct (not an array)."""

    fields: tuple[Field, ...]

    def __init__(self, *fields: Field) -> None:
        object.__setattr__(self, "fields", tuple(fields))


@dataclass(frozen=True)
class Field:
    name: str
    type: str | tuple[Field, ...] | Struct
    versions: Versions
    nullable: Versions
    tag: int | None
    tagged: Versions
    default: Any

    @property
    def is_struct_array(self) -> bool:
        return isinstance(self.type, tuple)

    @property
    def is_struct(self) -> bool:
        return isinstance(self.type, Struct)

    @property
    def is_primitive_array(self) -> bool:
        return isinstance(self.type, str) and self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        assert isinstance(self.type, str) and self.type.startswith("[]")
        return self.type[2:]

    @property
    def fields(self) -> tuple[Field, ...]:
        """The fields of a struct or of each element of a struct array."""
        if isinstance(self.type, Struct):
            return self.type.fields
        assert isinstance(self.type, tuple)
        return self.type


def F(
    name: str,
    type: str | list[Field] | Struct,
    versions: str = "0+",
    *,
    nullable: str | None = None,
    tag: int | None = None,
    tagged: str | None = None,
    default: Any = _UNSET,
) -> Field:
    """Declare a field. `tag`/`tagged` make it a tagged field in those (flexible) versions."""
    if isinstance(type, list):
        type = tuple(type)
    elif isinstance(type, str):
        base = type[2:] if type.startswith("[]") else type
        if base not in PRIMITIVES:
            raise ValueError(f"field {name}: unknown type {type!r}")
    if (tag is None) != (tagged is None):
        raise ValueError(f"field {name}: tag and tagged go together")
    return Field(
        name=name,
        type=type,
        versions=Versions.parse(versions),
        nullable=Versions.parse(nullable),
        tag=tag,
        tagged=Versions.parse(tagged),
        default=default,
    )


@dataclass(frozen=True)
class Api:
    """One API key: its valid and flexible versions and the request/response field lists."""

    key: int
    name: str
    versions: Versions
    flexible: Versions
    request: tuple[Field, ...]
    response: tuple[Field, ...]
    extra: dict[str, Any] = field(default_factory=dict)

    def __init__(
        self,
        key: int,
        name: str,
        versions: str,
        flexible: str,
        request: list[Field],
        response: list[Field],
        **extra: Any,
    ) -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "versions", Versions.parse(versions))
        object.__setattr__(self, "flexible", Versions.parse(flexible))
        object.__setattr__(self, "request", tuple(request))
        object.__setattr__(self, "response", tuple(response))
        object.__setattr__(self, "extra", extra)

    def is_flexible(self, version: int) -> bool:
        return version in self.flexible


def default_for(f: Field, version: int) -> Any:
    """The value a field takes when absent from a version or a dict being encoded."""
    if f.default is not _UNSET:
        return f.default
    if f.is_struct_array or f.is_primitive_array:
        return []
    if f.is_struct:
        return None if version in f.nullable else {}
    t = f.type
    if t == "bool":
        return False
    if t == "string":
        return ""
    if t == "bytes":
        return b""
    if t == "records":
        return None
    if t == "uuid":
        import uuid

        return uuid.UUID(int=0)
    if t == "float64":
        return 0.0
    return 0
