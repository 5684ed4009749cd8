"""Start-up configuration: Kafka property names, --config files and clear errors."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from odradek.broker.testing.processes import free_port

CLI = [sys.executable, "-m", "odradek.broker.cli", "broker"]
README = (Path(__file__).resolve().parents[2] / "README.md").read_text()
README_DATA = "/home/you/odradek/data"  # where the README's Troubleshooting examples keep data


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


# --- first-run failures: one line saying what to fix, exit status 1, no traceback ---------------


def _start_fails(args: list[str], cwd: Path | str, prefix: list[str] | None = None) -> str:
    proc = subprocess.run(
        [*(prefix or []), *CLI, *args], capture_output=True, text=True, timeout=120, cwd=cwd
    )
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line.split("] ", 1)[1] for line in proc.stderr.splitlines() if "] ERROR " in line]
    assert len(errors) == 1, proc.stderr
    return errors[0]


def test_port_in_use_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        error = _start_fails(
            ["--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
             "--override", f"log.dirs={tmp_path / 'data'}"],
            tmp_path,
        )  # fmt: skip
    assert error == (
        f"ERROR odradek: cannot listen on PLAINTEXT://127.0.0.1:{port}: Address already in use "
        "(another process listens there, another broker or Kafka perhaps: stop it, or choose "
        "another port in listeners)"
    )
    assert error.replace(f":{port}:", ":9092:") in README  # quoted in Troubleshooting


def test_log_dir_that_is_not_a_directory_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    log_dir = tmp_path / "a-file" / "kafka-logs"
    error = _start_fails(
        ["--override", f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
         "--override", f"log.dirs={log_dir}"],
        tmp_path,
    )  # fmt: skip
    assert error == f"ERROR odradek: cannot use log directory {log_dir} (log.dirs): Not a directory"


def _unprivileged() -> list[str]:
    """A command prefix that runs the broker as a user who cannot write where root can: nobody
    (through util-linux's setpriv) when these tests run as root, else nothing."""
    if os.geteuid() != 0:
        return []
    prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    try:
        probe = subprocess.run([*prefix, sys.executable, "-c", "import odradek.broker.cli"],
                               capture_output=True, text=True, check=False)  # fmt: skip
    except OSError as e:
        probe = subprocess.CompletedProcess(prefix, 1, "", str(e))
    if probe.returncode != 0:
        pytest.skip(f"cannot run this Python as uid 65534: {probe.stderr[-300:]}")
    return prefix


def test_log_dir_without_write_permission_is_one_line(tmp_path: Path) -> None:
    read_only = tmp_path / "read-only"
    read_only.mkdir(mode=0o555)
    tmp_path.chmod(0o755)  # so that another user reaches read-only/
    log_dir = read_only / "kafka-logs"
    error = _start_fails(
        ["--override", f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
         "--override", f"log.dirs={log_dir}"],
        "/",
        _unprivileged(),
    )  # fmt: skip
    assert (
        error == f"ERROR odradek: cannot use log directory {log_dir} (log.dirs): Permission denied"
    )


def test_second_broker_on_the_same_data_is_one_line(broker_factory) -> None:
    first = broker_factory()
    error = _start_fails(
        ["--override", f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
         "--override", f"log.dirs={first.data_dir}"],
        first.data_dir.parent,
    )  # fmt: skip
    store = first.data_dir / "__odradek_metadata"
    assert error == (
        f"ERROR odradek: metadata store {store} is in use by another process (another broker "
        "with the same log.dirs?)"
    )
    assert first.running
    assert error.replace(str(first.data_dir), f"{README_DATA}/kafka-logs") in README


def test_repeated_sigterm_does_not_cut_the_shutdown_short(tmp_path: Path) -> None:
    """Supervisors may send SIGTERM again while the broker is stopping: it finishes its
    shutdown and exits 0, as Kafka does, instead of dying of the signal."""
    import signal
    import time

    from odradek.broker.testing.processes import OdradekProcess

    broker = OdradekProcess(tmp_path / "data", tmp_path / "logs", {"broker.id": "0"}).start()
    proc = broker.proc
    assert proc is not None
    proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.005)
    assert proc.wait(60) == 0, broker.log_tail()
    assert "shutting down" in broker.log_text()
