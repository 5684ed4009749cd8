"""Hypothesis strategies for protocol bodies, derived from the schemas themselves: any API, any
version, request or response. The unit round trips (tests/unit/test_protocol_codec.py) and the
live-broker fuzzing (tests/integration/test_broker_robustness.py) draw from them, so a new
schema module is covered by both without touching either."""

from __future__ import annotations

import uuid

from hypothesis import strategies as st
from odradek.broker.protocol.schema import Api, Field, default_for

_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
}


def _present(f: Field, version: int, flexible: bool) -> bool:
    tagged = flexible and f.tag is not None and version in f.tagged
    return version in f.versions or tagged


def expected_default(f: Field, version: int):
    """What a decoder must produce for a field that is not on the wire."""
    d = default_for(f, version)
    if f.is_struct and d is not None:
        return {sub.name: expected_default(sub, version) for sub in f.fields}
    return d


def _scalar(t: str) -> st.SearchStrategy:
    if t in _INT_RANGES:
        lo, hi = _INT_RANGES[t]
        return st.integers(lo, hi)
    if t == "bool":
        return st.booleans()
    if t == "float64":
        return st.floats(allow_nan=False)
    if t == "uuid":
        return st.integers(0, 2**128 - 1).map(lambda i: uuid.UUID(int=i))
    if t == "string":
        return st.text(max_size=6)
    if t in ("bytes", "records"):
        return st.binary(max_size=12)
    raise AssertionError(t)


def field_strategy(f: Field, version: int, flexible: bool) -> st.SearchStrategy:
    if not _present(f, version, flexible):
        return st.just(expected_default(f, version))
    if f.is_struct_array:
        s = st.lists(struct_strategy(f.fields, version, flexible), max_size=2)
    elif f.is_primitive_array:
        s = st.lists(_scalar(f.element_type), max_size=3)
    elif f.is_struct:
        s = struct_strategy(f.fields, version, flexible)
    else:
        assert isinstance(f.type, str)
        s = _scalar(f.type)
    if version in f.nullable or f.type == "records":
        s = st.none() | s
    return s


def struct_strategy(fields: tuple[Field, ...], version: int, flexible: bool):
    return st.fixed_dictionaries({f.name: field_strategy(f, version, flexible) for f in fields})


def body_strategy(api: Api, version: int, response: bool) -> st.SearchStrategy:
    fields = api.response if response else api.request
    return struct_strategy(fields, version, api.is_flexible(version))


def default_body(api: Api, version: int, response: bool) -> dict:
    fields = api.response if response else api.request
    return {f.name: expected_default(f, version) for f in fields}
