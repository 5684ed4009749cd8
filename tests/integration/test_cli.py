"""The `odradek` command line against a real broker: topics, produce and consume."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

CLI = [sys.executable, "-m", "odradek.broker.cli"]


def odradek(
    *args: str, input: bytes | None = None, check: bool = True, timeout: float = 120
) -> subprocess.CompletedProcess[bytes]:
    proc = subprocess.run(
        [*CLI, *args], input=input, capture_output=True, timeout=timeout, check=False
    )
    if check and proc.returncode != 0:
        pytest.fail(
            f"odradek {' '.join(args)} exited {proc.returncode}\n"
            f"stdout: {proc.stdout.decode(errors='replace')}\n"
            f"stderr: {proc.stderr.decode(errors='replace')}"
        )
    return proc


def text(proc: subprocess.CompletedProcess[bytes]) -> str:
    return proc.stdout.decode()


def wait_described(bootstrap: str, topic: str, partitions: int) -> str:
    """`topics describe` output once every partition has a leader."""
    deadline = time.monotonic() + 60
    while True:
        proc = odradek(
            "topics", "describe", "--bootstrap-server", bootstrap, "--topic", topic, check=False
        )
        out = text(proc)
        if (
            proc.returncode == 0
            and out.count("Leader: ") == partitions
            and "Leader: none" not in out
        ):
            return out
        assert time.monotonic() < deadline, proc.stderr.decode()
        time.sleep(0.2)


def test_topics_lifecycle(bootstrap: str, topic_name: str) -> None:
    bs = ["--bootstrap-server", bootstrap]
    out = text(
        odradek(
            "topics",
            "create",
            *bs,
            "--topic",
            topic_name,
            "--partitions",
            "2",
            "--replication-factor",
            "1",
            "--config",
            "retention.ms=3600000",
        )
    )
    assert out == f"Created topic {topic_name}.\n"
    assert topic_name in text(odradek("topics", "list", *bs)).splitlines()

    described = wait_described(bootstrap, topic_name, 2)
    header = described.splitlines()[0]
    assert header.startswith(f"Topic: {topic_name}\t")
    assert "PartitionCount: 2" in header and "ReplicationFactor: 1" in header
    assert "Configs: retention.ms=3600000" in header
    assert "\tPartition: 0\t" in described and "\tPartition: 1\t" in described

    again = odradek("topics", "create", *bs, "--topic", topic_name, check=False)
    assert again.returncode == 1
    assert again.stderr.decode().startswith("error: TOPIC_ALREADY_EXISTS")
    assert (
        odradek("topics", "create", *bs, "--topic", topic_name, "--if-not-exists").returncode == 0
    )

    out = text(
        odradek(
            "topics",
            "alter",
            *bs,
            "--topic",
            topic_name,
            "--partitions",
            "3",
            "--config",
            "cleanup.policy=compact",
            "--delete-config",
            "retention.ms",
        )
    )
    assert f"Topic {topic_name} now has 3 partitions." in out
    described = wait_described(bootstrap, topic_name, 3)
    assert "PartitionCount: 3" in described
    assert "Configs: cleanup.policy=compact\n" in described

    assert text(odradek("topics", "delete", *bs, "--topic", topic_name)) == (
        f"Deleted topic {topic_name}.\n"
    )
    deadline = time.monotonic() + 30
    while topic_name in text(odradek("topics", "list", *bs)).splitlines():
        assert time.monotonic() < deadline
        time.sleep(0.2)
    missing = odradek("topics", "delete", *bs, "--topic", topic_name, check=False)
    assert missing.returncode == 1
    assert missing.stderr.decode().startswith("error: UNKNOWN_TOPIC_OR_PARTITION")
    assert odradek("topics", "delete", *bs, "--topic", topic_name, "--if-exists").returncode == 0


def test_errors_are_one_line(bootstrap: str, topic_name: str) -> None:
    bs = ["--bootstrap-server", bootstrap]
    cases = [
        (["topics", "describe", *bs, "--topic", topic_name], "UNKNOWN_TOPIC_OR_PARTITION"),
        (
            ["topics", "create", *bs, "--topic", topic_name, "--config", "cleanup.policy=x"],
            "INVALID_CONFIG",
        ),
        (["topics", "alter", *bs, "--topic", topic_name], "nothing to alter"),
    ]
    for argv, expected in cases:
        proc = odradek(*argv, check=False)
        assert proc.returncode == 1, argv
        err = proc.stderr.decode()
        assert err.startswith("error: ") and expected in err, err
        assert err.count("\n") == 1, err


def test_produce_and_consume(bootstrap: str, topic_name: str) -> None:
    bs = ["--bootstrap-server", bootstrap]
    odradek("topics", "create", *bs, "--topic", topic_name, "--partitions", "1")
    wait_described(bootstrap, topic_name, 1)

    lines = b"k1:hello\nk2:world\r\nk3:with:colons\n"
    out = text(
        odradek(
            "produce",
            *bs,
            "--topic",
            topic_name,
            "--key-separator",
            ":",
            "--print-offsets",
            "--compression",
            "gzip",
            input=lines,
        )
    )
    assert out.splitlines() == [f"{topic_name}\t0\t{i}" for i in range(3)]
    odradek(
        "produce", *bs, "--topic", topic_name, "--value", "v1", "--value", "v2",
        "--header", "h=1", "--acks", "1", "--compression", "zstd",
    )  # fmt: skip
    big_input = b"".join(f"line-{i}\n".encode() for i in range(2000))
    odradek("produce", *bs, "--topic", topic_name, "--acks", "all", input=big_input)

    proc = odradek(
        "consume", *bs, "--topic", topic_name, "--from-beginning", "--max-messages", "5",
        "--print-key", "--key-separator", "=", "--print-offset", "--print-headers",
    )  # fmt: skip
    assert proc.stdout.decode().splitlines() == [
        "Offset:0\tNO_HEADERS\tk1=hello",
        "Offset:1\tNO_HEADERS\tk2=world",
        "Offset:2\tNO_HEADERS\tk3=with:colons",
        "Offset:3\th:1\tnull=v1",
        "Offset:4\th:1\tnull=v2",
    ]
    assert "Processed a total of 5 messages" in proc.stderr.decode()

    proc = odradek("consume", *bs, "--topic", topic_name, "--from-beginning", "--timeout", "3")
    values = proc.stdout.decode().splitlines()
    assert values[:5] == ["hello", "world", "with:colons", "v1", "v2"]
    assert values[5:] == [f"line-{i}" for i in range(2000)]

    proc = odradek(
        "consume", *bs, "--topic", topic_name, "--partition", "0", "--offset", "2003",
        "--max-messages", "5", "--timeout", "2", "--print-partition",
    )  # fmt: skip
    assert proc.stdout.decode().splitlines() == ["Partition:0\tline-1998", "Partition:0\tline-1999"]

    # Default start is the end: nothing old, and --timeout ends the wait.
    proc = odradek("consume", *bs, "--topic", topic_name, "--timeout", "1")
    assert proc.stdout == b""
    assert "Processed a total of 0 messages" in proc.stderr.decode()

    bad = odradek(
        "consume", *bs, "--topic", topic_name, "--partition", "9", "--timeout", "1", check=False
    )
    assert bad.returncode == 1
    assert bad.stderr.decode().startswith("error: UNKNOWN_TOPIC_OR_PARTITION")


def test_consume_follows_new_records(bootstrap: str, topic_name: str) -> None:
    bs = ["--bootstrap-server", bootstrap]
    odradek("topics", "create", *bs, "--topic", topic_name, "--partitions", "2")
    wait_described(bootstrap, topic_name, 2)
    consumer = subprocess.Popen(
        [*CLI, "consume", *bs, "--topic", topic_name, "--max-messages", "4", "--timeout", "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        # The consumer starts at the end; keep producing until it has seen four records.
        deadline = time.monotonic() + 60
        sent = 0
        while consumer.poll() is None and time.monotonic() < deadline:
            odradek("produce", *bs, "--topic", topic_name, "--value", f"m{sent}")
            sent += 1
            time.sleep(0.3)
        out, err = consumer.communicate(timeout=60)
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait()
    assert consumer.returncode == 0, err.decode()
    lines = out.decode().splitlines()
    assert len(lines) == 4
    assert all(line.startswith("m") for line in lines)


def test_ready_probe(bootstrap: str) -> None:
    """What a Kubernetes readiness probe runs: 0 for a serving broker, 1 with a reason otherwise."""
    bs = ["--bootstrap-server", bootstrap, "--request-timeout", "10"]
    ok = odradek("ready", *bs)
    assert text(ok).startswith("ready: cluster ")
    unknown = odradek("ready", *bs, "--broker-id", "4242", check=False)
    assert unknown.returncode == 1
    assert "broker 4242 is not registered" in unknown.stderr.decode()
    nobody = odradek(
        "ready", "--bootstrap-server", "127.0.0.1:1", "--request-timeout", "2", check=False
    )
    assert nobody.returncode == 1
    assert nobody.stderr.decode().startswith("error: ")
