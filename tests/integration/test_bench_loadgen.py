"""bench/loadgen.py txn-produce against a real broker: the benchmark's transactional rows count
committed records only, a transaction at a time (100 records, or whatever 100 ms held), and
time each transaction; a read_committed consumer sees exactly what it committed, the
unmeasured first transaction included."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from test_transactions import consume_all

LOADGEN = Path(__file__).resolve().parents[2] / "bench" / "loadgen.py"


def txn_produce(bootstrap: str, topic: str, *options: str) -> dict:
    out = subprocess.run(
        [sys.executable, str(LOADGEN), "txn-produce", "--bootstrap", bootstrap, "--topic", topic,
         "--seconds", "1", "--size", "1024", *options],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def committed_records(bootstrap: str, topic: str, partitions: int) -> int:
    """How many records a read_committed consumer reads of `topic`, from the start to the end."""
    return len(consume_all(bootstrap, [topic], partitions, "read_committed"))


def test_transactions_of_100_records_are_counted_and_timed(
    bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=1)
    result = txn_produce(bootstrap, topic, "--txn-records", "100")
    assert result["error"] is None
    assert result["transactions"] >= 1
    assert result["records"] == 100 * result["transactions"]
    assert 0 < result["txn_p50_ms"] <= result["txn_p99_ms"] < 30_000
    # the first transaction, before the clock, is committed too but not counted
    assert committed_records(bootstrap, topic, 1) == result["records"] + 100


def test_transactions_committed_every_100_ms_count_what_they_committed(
    bootstrap: str, new_topic: Callable[..., str]
) -> None:
    partitions = 8
    topic = new_topic(partitions=partitions)
    result = txn_produce(bootstrap, topic, "--txn-ms", "100")
    assert result["error"] is None
    assert result["transactions"] >= 1
    # each transaction sends for 100 ms, so its time is at least that
    assert 100 <= result["txn_p50_ms"] <= result["txn_p99_ms"]
    assert result["records"] > result["transactions"]
    # the unmeasured first transaction held an unknown count, committed as well
    assert committed_records(bootstrap, topic, partitions) > result["records"]
