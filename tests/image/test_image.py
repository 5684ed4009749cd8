"""The Odradek image (Dockerfile) built by scripts/build-image.sh: its broker entry point serves a
real client, it runs as a non-root user, its operator entry point starts, and the broker stops
cleanly on `docker stop`."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from image_harness import (
    DATA_DIR,
    RESTRICTED,
    START_TIMEOUT,
    docker,
    start_published_broker,
    wait_until,
)

# The first test pays for a cold build (mmdebstrap, wheels) in the session fixture.
pytestmark = pytest.mark.timeout(1800)


def test_broker_entry_point_serves_a_client(odradek_image, run_container):
    container, bootstrap = start_published_broker(run_container, odradek_image)
    topic = f"image-{uuid.uuid4().hex[:8]}"
    values = [f"record-{i}".encode() for i in range(20)]

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    delivered: list[object] = []
    for i, value in enumerate(values):
        producer.produce(
            topic,
            key=str(i).encode(),
            value=value,
            on_delivery=lambda err, msg: delivered.append(err or msg.offset()),
        )
    assert producer.flush(60) == 0
    assert sorted(delivered) == list(range(len(values))), delivered

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{topic}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topic])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < len(values) and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append(msg.value())
        assert got == values
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()

    # The records are on the data directory, in the container, written by the broker's user.
    listing = container.exec("ls", "-n", f"{DATA_DIR}/kafka-logs/{topic}-0")
    assert listing.returncode == 0, listing.stderr
    assert ".log" in listing.stdout


def test_runs_as_non_root_user(odradek_image, run_container):
    assert docker("image", "inspect", "-f", "{{.Config.User}}", odradek_image).stdout.strip() in {
        "1000:1000",
        "1000",
    }
    container, _ = start_published_broker(run_container, odradek_image)
    # The broker process itself (PID 1) and whatever runs next to it.
    status = container.exec("cat", "/proc/1/status").stdout
    uids = next(line.split()[1:] for line in status.splitlines() if line.startswith("Uid:"))
    assert set(uids) == {"1000"}, status
    assert container.exec("id", "-u").stdout.strip() == "1000"
    owner = container.exec("stat", "-c", "%u:%g", DATA_DIR, f"{DATA_DIR}/kafka-logs").stdout.split()
    assert owner == ["1000:1000", "1000:1000"]
    # Nothing root-owned is writable for it: the installed code is read-only to the broker.
    probe = container.exec("touch", "/opt/odradek/probe")
    assert probe.returncode != 0


def test_operator_entry_point_starts(odradek_image):
    # As the Helm chart runs the operator: read-only root file system, no capabilities.
    proc = docker(
        "run", "--rm", "--read-only", *RESTRICTED, "--entrypoint", "odradek-operator",
        odradek_image, "--help", timeout=120,
    )  # fmt: skip
    assert "usage: odradek-operator" in proc.stdout, proc.stdout
    # The broker's command line tools ship in the same image.
    proc = docker("run", "--rm", odradek_image, "--help", timeout=120)
    assert "broker" in proc.stdout


def test_default_command_runs_a_broker(odradek_image, run_container):
    """`docker run IMAGE` alone starts a broker on :9092 with its data under /var/lib/odradek."""
    container = run_container(odradek_image)
    container.wait_for_log("started")

    def lists_topics() -> bool:
        proc = container.exec(
            "odradek", "topics", "list", "--bootstrap-server", "127.0.0.1:9092",
            "--request-timeout", "5",
        )  # fmt: skip
        return proc.returncode == 0

    wait_until(lists_topics, START_TIMEOUT, what="`odradek topics list` inside the container")
    assert container.exec("test", "-d", f"{DATA_DIR}/kafka-logs").returncode == 0


def test_broker_stops_cleanly_on_docker_stop(odradek_image, run_container):
    container, bootstrap = start_published_broker(run_container, odradek_image)
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce("before-stop", value=b"x")
    assert producer.flush(60) == 0

    # SIGTERM, then SIGKILL only after a grace period far longer than a clean shutdown needs.
    docker("stop", "-t", "120", container.name, timeout=180)
    assert container.inspect("{{.State.ExitCode}}") == "0", container.logs()
    assert container.inspect("{{.State.OOMKilled}}") == "false"
    logs = container.logs()
    assert "shutting down" in logs
    assert "broker 0 stopped" in logs
