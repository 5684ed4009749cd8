"""Start-up configuration: Kafka property names, --config files and clear errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from broker_process import free_port
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

CLI = [sys.executable, "-m", "odradek.broker.cli", "broker"]


def _fails_naming(args: list[str], key: str, tmp_path: Path) -> None:
    proc = subprocess.run(CLI + args, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode != 0
    assert key in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("num.partitions=abc", "num.partitions"),
        ("log.retention.bytes=1.5", "log.retention.bytes"),
        ("auto.create.topics.enable=maybe", "auto.create.topics.enable"),
        ("log.message.timestamp.type=Sometimes", "log.message.timestamp.type"),
        ("listeners=not-a-listener", "listeners"),
    ],
)
def test_invalid_value_stops_startup_naming_the_key(
    tmp_path: Path, override: str, key: str
) -> None:
    _fails_naming(
        ["--override", f"log.dirs={tmp_path / 'data'}", "--override", override], key, tmp_path
    )


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        # Kafka's default inter-broker mechanism, GSSAPI, is not one Odradek speaks.
        (["sasl.mechanism.inter.broker.protocol=GSSAPI"], "sasl.mechanism.inter.broker.protocol"),
        # PLAIN between brokers needs the broker's own username and password.
        (
            ["sasl.mechanism.inter.broker.protocol=PLAIN"],
            "listener.name.sasl_plaintext.plain.sasl.jaas.config",
        ),
    ],
)
def test_inter_broker_login_errors_stop_startup_naming_the_key(
    tmp_path: Path, overrides: list[str], key: str
) -> None:
    args = [
        "--override", f"log.dirs={tmp_path / 'data'}",
        "--override", f"listeners=SASL_PLAINTEXT://127.0.0.1:{free_port()}",
        "--override", "inter.broker.listener.name=SASL_PLAINTEXT",
    ]  # fmt: skip
    for o in overrides:
        args += ["--override", o]
    _fails_naming(args, key, tmp_path)


def test_properties_file_with_unknown_key_warns_and_serves(tmp_path: Path) -> None:
    port = free_port()
    config = tmp_path / "server.properties"
    config.write_text(
        "# a Kafka-style file\n"
        f"listeners=PLAINTEXT://127.0.0.1:{port}\n"
        f"log.dirs={tmp_path / 'data'}\n"
        "num.partitions : 3\n"
        "no.such.setting=1\n"
    )
    proc = subprocess.Popen(
        CLI + ["--config", str(config), "--override", "default.replication.factor=1"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path,
    )  # fmt: skip
    try:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        metadata = admin.list_topics(timeout=30)
        assert len(metadata.brokers) == 1
        # num.partitions from the file applies to auto-created topics.
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}"})
        producer.produce("auto-created", b"x")
        assert producer.flush(30) == 0
        topic = admin.list_topics("auto-created", timeout=30).topics["auto-created"]
        assert len(topic.partitions) == 3
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    assert "no.such.setting" in out
