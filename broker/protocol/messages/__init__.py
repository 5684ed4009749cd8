"""The API schemas as data: one JSON file per API here, loaded once into `REGISTRY`.

Kafka keeps its message definitions as JSON too; data reads as a table of fields and leaves no
code to maintain per API. A file holds one object:

    {"about": "...", "key": 1, "name": "Fetch", "versions": "0-17", "flexible": "12+",
     "request": [<field>, ...], "response": [<field>, ...]}

A field is an object with its non-default keys only, mirroring `schema.F`: "name" and "type"
always; "versions" (default "0+"), "nullable", "tag" with "tagged", "default" (absent means the
type's default, see `schema.default_for`; null is a real default) and "about" (documentation,
not loaded). A "type" of "struct" (one nested struct) or "[]struct" (an array of them) takes its
fields from a "fields" list. Field groups several APIs share are written out in each file, so
every file reads on its own. Any other key is an error naming the file and the field.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from ..schema import Api, F, Field, Struct

_API_KEYS = frozenset({"about", "key", "name", "versions", "flexible", "request", "response"})
_FIELD_KEYS = frozenset(
    {"name", "type", "versions", "nullable", "tag", "tagged", "default", "about", "fields"}
)
_STRUCT_TYPES = frozenset({"struct", "[]struct"})


class SchemaFileError(ValueError):
    """A schema file that does not describe an API; says which file and field."""


def _fields(items: list[dict[str, Any]], where: str) -> list[Field]:
    fields = []
    for item in items:
        path = f"{where}.{item.get('name', '?')}"
        unknown = item.keys() - _FIELD_KEYS
        if unknown:
            raise SchemaFileError(f"{path}: unknown key(s) {sorted(unknown)}")
        if "name" not in item or "type" not in item:
            raise SchemaFileError(f"{path}: a field needs a name and a type")
        kind = item["type"]
        if (kind in _STRUCT_TYPES) != ("fields" in item):
            raise SchemaFileError(f"{path}: only struct and []struct fields have fields")
        if kind == "struct":
            kind = Struct(*_fields(item["fields"], path))
        elif kind == "[]struct":
            kind = _fields(item["fields"], path)
        options = {k: item[k] for k in ("nullable", "tag", "tagged", "default") if k in item}
        try:
            fields.append(F(item["name"], kind, item.get("versions", "0+"), **options))
        except ValueError as e:
            raise SchemaFileError(f"{path}: {e}") from None
    return fields


def _api(name: str, doc: dict[str, Any]) -> Api:
    unknown = doc.keys() - _API_KEYS
    if unknown:
        raise SchemaFileError(f"{name}: unknown key(s) {sorted(unknown)}")
    missing = _API_KEYS - {"about"} - doc.keys()
    if missing:
        raise SchemaFileError(f"{name}: missing key(s) {sorted(missing)}")
    return Api(
        key=doc["key"],
        name=doc["name"],
        versions=doc["versions"],
        flexible=doc["flexible"],
        request=_fields(doc["request"], f"{name}: request"),
        response=_fields(doc["response"], f"{name}: response"),
    )


def _load() -> dict[int, Api]:
    apis: dict[int, Api] = {}
    for entry in resources.files(__name__).iterdir():
        if not entry.name.endswith(".json"):
            continue
        api = _api(entry.name, json.loads(entry.read_text(encoding="utf-8")))
        if api.key in apis:
            raise SchemaFileError(f"{entry.name}: API key {api.key} defined twice")
        apis[api.key] = api
    if not apis:  # an install that left out the package data
        raise SchemaFileError(f"no schema files (*.json) in {__name__}")
    return dict(sorted(apis.items()))


REGISTRY: dict[int, Api] = _load()
