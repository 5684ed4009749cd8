"""The odradek command line: argument parsing, record formatting, and error reporting."""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys

import pytest
from odradek.broker import cli
from odradek.broker.cli.records import format_record
from odradek.broker.client.admin import OffsetSpec
from odradek.broker.client.consumer import ConsumerRecord


def parse(*argv: str) -> argparse.Namespace:
    return cli.build_parser().parse_args(list(argv))


def test_broker_arguments() -> None:
    args = parse("broker", "--config", "s.properties", "--override", "a=1", "--override", "b=x=y")
    assert args.command == "broker"
    assert args.config == "s.properties"
    assert args.override == ["a=1", "b=x=y"]
    args = parse("broker")
    assert args.config is None and args.override == []


def test_topics_create_arguments() -> None:
    args = parse(
        "topics", "create", "--topic", "t", "--partitions", "3", "--replication-factor", "1",
        "--config", "retention.ms=10", "--config", "cleanup.policy=compact,delete",
    )  # fmt: skip
    assert (args.action, args.topic, args.partitions, args.replication_factor) == (
        "create", "t", 3, 1,
    )  # fmt: skip
    assert args.config == [("retention.ms", "10"), ("cleanup.policy", "compact,delete")]
    assert args.bootstrap_server == "127.0.0.1:9092"
    assert args.request_timeout == 30.0


def test_topics_alter_and_delete_arguments() -> None:
    args = parse(
        "topics", "alter", "--bootstrap-server", "h:1", "--topic", "t", "--partitions", "5",
        "--config", "a=b", "--delete-config", "c", "--delete-config", "d",
    )  # fmt: skip
    assert args.bootstrap_server == "h:1"
    assert args.partitions == 5 and args.config == [("a", "b")]
    assert args.delete_config == ["c", "d"]
    args = parse("topics", "delete", "--topic", "a", "--topic", "b", "--if-exists")
    assert args.topic == ["a", "b"] and args.if_exists


def test_transactions_arguments() -> None:
    args = parse("transactions", "list", "--state", "Ongoing", "--producer-id", "7")
    assert (args.action, args.state, args.producer_id, args.duration_ms) == (
        "list", ["Ongoing"], [7], -1,
    )  # fmt: skip
    args = parse("transactions", "describe", "--transactional-id", "a", "--transactional-id", "b")
    assert args.transactional_id == ["a", "b"]


@pytest.mark.parametrize(
    "argv",
    [
        ["transactions", "describe"],
        ["transactions", "list", "--producer-id", "x"],
        ["topics", "create", "--topic", "t", "--partitions", "0"],
        ["topics", "create", "--topic", "t", "--config", "novalue"],
        ["topics", "create"],
        ["topics", "frobnicate"],
        ["produce", "--topic", "t", "--acks", "2"],
        ["produce", "--topic", "t", "--compression", "brotli"],
        ["consume", "--topic", "t", "--from-beginning", "--offset", "3"],
        ["consume", "--topic", "t", "--offset", "-5"],
        ["consume", "--topic", "t", "--timeout", "soon"],
        [],
    ],
)
def test_bad_arguments_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_produce_arguments() -> None:
    args = parse(
        "produce", "--topic", "t", "--value", "a", "--value", "b", "--key-separator", "\\t",
        "--acks", "all", "--compression", "lz4", "--header", "h=v", "--partition", "2",
    )  # fmt: skip
    assert args.value == ["a", "b"]
    assert args.key_separator == "\t"
    assert args.acks == -1 and args.compression == "lz4"
    assert args.header == [("h", "v")] and args.partition == 2
    assert parse("produce", "--topic", "t", "--acks", "0").acks == 0


def test_consume_arguments() -> None:
    args = parse("consume", "--topic", "t", "--from-beginning", "--max-messages", "3")
    assert args.from_beginning and args.max_messages == 3 and args.offset is None
    assert parse("consume", "--topic", "t", "--offset", "earliest").offset == OffsetSpec.EARLIEST
    assert parse("consume", "--topic", "t", "--offset", "latest").offset == OffsetSpec.LATEST
    args = parse(
        "consume", "--topic", "t", "--offset", "42", "--partition", "1", "--timeout", "2.5"
    )
    assert (args.offset, args.partition, args.timeout) == (42, [1], 2.5)


def test_format_record() -> None:
    r = ConsumerRecord("t", 2, 17, 1234, 0, b"k", b"v", [("h", b"1"), ("n", None)])
    plain = parse("consume", "--topic", "t")
    assert format_record(r, plain) == b"v\n"
    full = parse(
        "consume", "--topic", "t", "--print-key", "--print-offset", "--print-partition",
        "--print-timestamp", "--print-headers", "--key-separator", "=",
    )  # fmt: skip
    assert format_record(r, full) == b"CreateTime:1234\tPartition:2\tOffset:17\th:1,n:null\tk=v\n"
    empty = ConsumerRecord("t", 0, 0, 5, 1, None, None, [])
    assert format_record(empty, full) == (
        b"LogAppendTime:5\tPartition:0\tOffset:0\tNO_HEADERS\tnull=null\n"
    )


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_broker_is_a_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    port = _closed_port()
    code = cli.main(
        ["topics", "list", "--bootstrap-server", f"127.0.0.1:{port}", "--request-timeout", "0.5"]
    )
    assert code == 1
    err = capsys.readouterr().err
    assert err.startswith("error: NETWORK_EXCEPTION:")
    assert err.count("\n") == 1


def test_module_entry_point_runs() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "odradek.broker.cli", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for command in ("broker", "topics", "produce", "consume"):
        assert command in out
