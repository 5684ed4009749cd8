"""The JSON schema files load into the registry, and a mistake in one names its file and field."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import pytest
from odradek.broker.protocol import messages
from odradek.broker.protocol.messages import REGISTRY, SchemaFileError


def _fetch() -> dict[str, Any]:
    return json.loads((resources.files(messages) / "fetch.json").read_text(encoding="utf-8"))


def test_every_file_is_one_api() -> None:
    files = [e for e in resources.files(messages).iterdir() if e.name.endswith(".json")]
    assert len(files) == len(REGISTRY)


def test_unknown_field_key_names_file_and_field() -> None:
    doc = _fetch()
    topics = next(f for f in doc["request"] if f["name"] == "topics")
    partitions = next(f for f in topics["fields"] if f["name"] == "partitions")
    partitions["fields"][0]["nulable"] = "0+"
    with pytest.raises(
        SchemaFileError, match=r"fetch\.json: request\.topics\.partitions\.\w+: .*nulable"
    ):
        messages._api("fetch.json", doc)


def test_unknown_top_level_key_and_bad_type_are_errors() -> None:
    doc = _fetch()
    doc["comment"] = "no"
    with pytest.raises(SchemaFileError, match=r"fetch\.json: unknown key.*comment"):
        messages._api("fetch.json", doc)
    doc = _fetch()
    doc["response"][0]["type"] = "int33"
    with pytest.raises(SchemaFileError, match=r"fetch\.json: response\.\w+: .*int33"):
        messages._api("fetch.json", doc)


def test_struct_type_and_fields_go_together() -> None:
    doc = _fetch()
    doc["request"][0]["fields"] = []
    with pytest.raises(SchemaFileError, match=r"fetch\.json: request\.\w+: only struct"):
        messages._api("fetch.json", doc)
