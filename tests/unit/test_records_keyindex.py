"""The cleaner's map pass loop in C (`_keyindex`) files what the Python reading files.

The log cleaner keeps a record only when the offset map names it; a map that differed from the
Python reading's would drop a record that should stay. So the C loop is held to the Python one
on batches of every shape: keys short, long (filed by digest), empty and absent, offsets that do
not rise, large base offsets, and bytes damaged anywhere (where it must hand the batch back).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from odradek.broker.records import compaction
from odradek.broker.records.batch import InvalidRecordError
from odradek.broker.records.compaction import MAP_KEY_DIGEST_FROM, index_keys
from odradek.broker.records.record import (
    Record,
    encode_record,
    read_varint,
    varint_size,
    write_varint,
)

native = compaction._native


def test_the_c_loop_is_built():
    assert native is not None, (
        "odradek.broker.records._keyindex is not built: install a C compiler and Python's "
        "headers (Debian: apt-get install gcc python3-dev), then `make install` again"
    )


records_ = st.lists(
    st.tuples(
        st.one_of(st.none(), st.binary(max_size=2 * MAP_KEY_DIGEST_FROM)),
        st.one_of(st.none(), st.binary(max_size=300)),
        st.integers(-3, 200),  # offset delta: repeats and falls make a stray batch
        st.integers(-(2**40), 2**40),  # timestamp delta: up to six varint bytes
    ),
    max_size=40,
)


def body_of(records: list) -> tuple[bytes, list[int]]:
    """The records' bytes behind a four-byte prefix (so positions start past 0), and where each
    record starts."""
    out = bytearray(b"\xaa" * 4)
    starts = []
    for key, value, delta, ts in records:
        starts.append(len(out))
        encode_record(out, delta, ts, Record(key=key, value=value))
    return bytes(out), starts


def both(buf, pos, end, count, base, last, start):
    """What the C loop and the Python reading each make of one batch: (result or the error's
    type, the map)."""
    outcomes = []
    for read in (native.index_keys, None):
        into: dict[bytes, int] = {b"earlier": 7}
        try:
            if read is None:
                got = index_keys(buf, pos, end, count, base, last, start, into, in_c=False)
            else:
                got = read(
                    buf,
                    pos,
                    end,
                    count,
                    base,
                    last,
                    start,
                    into,
                    compaction._digest,
                    MAP_KEY_DIGEST_FROM,
                )
        except InvalidRecordError:
            got = InvalidRecordError
        outcomes.append((got, into))
    return outcomes


@pytest.mark.skipif(native is None, reason="test_the_c_loop_is_built says why")
@settings(max_examples=400, deadline=None)
@given(
    records=records_,
    # from 5, so that every start (base + start_delta) is >= 0, as the cleaner's are
    base=st.sampled_from([5, 2**31 - 10, 2**32 + 3, 2**40]),
    last_delta=st.integers(-1, 210),
    start_delta=st.integers(-5, 60),
)
def test_well_formed_batches_are_read_in_c_as_in_python(records, base, last_delta, start_delta):
    buf, _ = body_of(records)
    args = (buf, 4, len(buf), len(records), base, base + last_delta, base + start_delta)
    (c_got, c_map), (py_got, py_map) = both(*args)
    assert c_got is not None, "the C loop handed a well-formed batch back"
    assert (c_got, c_map) == (py_got, py_map)


@pytest.mark.skipif(native is None, reason="test_the_c_loop_is_built says why")
@settings(max_examples=400, deadline=None)
@given(
    records=records_.filter(bool),
    data=st.data(),
    count_change=st.sampled_from([0, 0, 0, -1, 1]),
)
def test_damaged_batches_are_handed_back_or_read_alike(records, data, count_change):
    buf, starts = body_of(records)
    damaged = bytearray(buf)
    if data.draw(st.booleans()):
        # one record says it is shorter than it is: its fields overrun it
        i = data.draw(st.integers(0, len(records) - 1))
        length, p = read_varint(buf, starts[i])
        size = bytearray()
        key, _, delta, ts = records[i]
        fields = 1 + varint_size(ts) + varint_size(delta)  # attributes and the two deltas
        fields += varint_size(-1 if key is None else len(key))
        cut = [fields, fields + len(key or b"")]  # right after the key's length, or the key
        wanted = data.draw(st.sampled_from([*cut, None]))
        if wanted is None or wanted >= length:
            wanted = data.draw(st.integers(0, length - 1))
        write_varint(size, wanted)
        damaged[starts[i] : p] = size
    for _ in range(data.draw(st.integers(0, 2))):
        at = data.draw(st.integers(4, len(damaged) - 1))
        damaged[at] = data.draw(st.integers(0, 255))
    end = data.draw(st.integers(4, len(damaged)))
    args = (bytes(damaged), 4, end, len(records) + count_change, 100, 400, 90)
    (c_got, c_map), (py_got, py_map) = both(*args)
    if c_got is None:
        # handed back: what index_keys answers, and leaves in the map, is the Python reading's
        into: dict[bytes, int] = {b"earlier": 7}
        try:
            got = index_keys(*args, into)
        except InvalidRecordError:
            got = InvalidRecordError
        assert (got, into) == (py_got, py_map)
    else:
        assert (c_got, c_map) == (py_got, py_map)


@pytest.mark.skipif(native is None, reason="test_the_c_loop_is_built says why")
def test_a_later_record_of_a_key_wins_and_long_keys_go_by_digest():
    long_key = b"k" * MAP_KEY_DIGEST_FROM
    records = [(b"a", b"1", 0, 0), (long_key, b"2", 1, 0), (b"a", b"3", 2, 0), (None, b"4", 3, 0)]
    buf, starts = body_of(records)
    into: dict[bytes, int] = {}
    got = native.index_keys(
        buf, 4, len(buf), 4, 10, 13, 0, into, compaction._digest, MAP_KEY_DIGEST_FROM
    )
    assert got == (1, False)
    assert into == {
        b"a": compaction.located(12, starts[2] - 4),
        compaction.map_key(long_key): compaction.located(11, starts[1] - 4),
    }
