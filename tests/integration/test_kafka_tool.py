"""`odradek kafka-tool NAME ARGS`: Apache Kafka's own command-line tools, by their bin/ names,
against an Odradek broker; the first use fetches Kafka's jars with a progress line.

The first-use test fetches the whole pinned set from a Maven-layout mirror on loopback (files
linked from the cache that `kafka_libs` filled from Maven Central), so it needs no network.
"""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import run_checked
from odradek.broker import kafka_tools

ODRADEK = str(Path(sys.executable).parent / "odradek")  # the installed console script
TIMEOUT = 120


def odradek(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_checked([ODRADEK, *args], env=env, timeout=TIMEOUT)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture
def mirror(kafka_libs: Path, tmp_path: Path) -> Iterator[str]:
    """A Maven repository on loopback holding the pinned jars; yields its URL."""
    root = tmp_path / "mirror"
    for jar in kafka_tools.PINNED:
        target = root / jar.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(kafka_libs / jar.name)
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), lambda *a: _QuietHandler(*a, directory=str(root))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_first_use_fetches_the_jars_with_a_progress_line(
    mirror: str, bootstrap: str, topic_name: str, tmp_path: Path
) -> None:
    home = tmp_path / "kafka-home"
    env = {**os.environ, "ODRADEK_KAFKA_HOME": str(home), "ODRADEK_MAVEN_REPOSITORY": mirror}
    created = odradek("kafka-tool", "kafka-topics.sh", "--bootstrap-server", bootstrap,
                      "--create", "--topic", topic_name, "--partitions", "2", env=env)  # fmt: skip
    assert f"Created topic {topic_name}." in created.stdout
    total_mb = sum(j.size for j in kafka_tools.PINNED) / 1e6
    prefix = (
        f"Fetching Apache Kafka {kafka_tools.KAFKA_VERSION}'s tools from {mirror} into "
        f"{home / 'libs'} (first use)"
    )
    lines = created.stderr.splitlines()
    assert lines[:2] == [
        f"{prefix}: {len(kafka_tools.PINNED)} jars, {total_mb:.1f} MB",
        f"{prefix}: done, {len(kafka_tools.PINNED)} jars",
    ], created.stderr
    described = odradek("kafka-tool", "kafka-topics", "--bootstrap-server", bootstrap,
                        "--describe", "--topic", topic_name, env=env)  # fmt: skip
    assert "PartitionCount: 2" in described.stdout
    assert "Fetching" not in described.stderr  # fetched once


def test_dump_log_reads_the_segments_odradek_wrote(kafka_libs: Path, broker_factory) -> None:
    broker = broker_factory()
    odradek("topics", "create", "--bootstrap-server", broker.bootstrap, "--topic", "dumped",
            "--partitions", "1")  # fmt: skip
    odradek("produce", "--bootstrap-server", broker.bootstrap, "--topic", "dumped",
            "--value", "first", "--value", "second")  # fmt: skip
    segment = broker.data_dir / "dumped-0" / "00000000000000000000.log"
    dumped = odradek("kafka-tool", "kafka-dump-log.sh", "--files", str(segment),
                     "--print-data-log")  # fmt: skip
    assert "payload: first" in dumped.stdout and "payload: second" in dumped.stdout


def test_producer_perf_test(kafka_libs: Path, bootstrap: str, topic_name: str) -> None:
    perf = odradek("kafka-tool", "kafka-producer-perf-test.sh", "--topic", topic_name,
                   "--num-records", "2000", "--record-size", "100", "--throughput", "-1",
                   "--producer-props", f"bootstrap.servers={bootstrap}", "acks=all")  # fmt: skip
    assert "2000 records sent" in perf.stdout
