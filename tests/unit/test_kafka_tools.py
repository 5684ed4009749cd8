"""`odradek kafka-tool`: fetching pinned jars from a Maven repository, and the messages a user sees
when something is missing. The repository is a real HTTP server on loopback serving small files
laid out as Maven lays them out; the full Kafka set runs in tests/integration/test_kafka_tool.py."""

from __future__ import annotations

import hashlib
import http.server
import io
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from odradek.broker import kafka_tools
from odradek.broker.kafka_tools import Jar, KafkaToolsError

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture
def repository(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A Maven-layout HTTP repository on loopback: (its URL, the directory it serves)."""
    root = tmp_path / "repo"
    root.mkdir()
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), lambda *a: _QuietHandler(*a, directory=str(root))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/maven2", root
    finally:
        server.shutdown()
        server.server_close()


def publish(root: Path, path: str, data: bytes) -> Jar:
    target = root / "maven2" / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return Jar(path, len(data), hashlib.sha256(data).hexdigest())


def test_fetch_downloads_missing_jars_once_with_a_progress_line(repository, tmp_path) -> None:
    url, root = repository
    jars = [
        publish(root, f"org/example/lib{i}/1.{i}/lib{i}-1.{i}.jar", os.urandom(50_000 + i))
        for i in range(6)
    ]
    home = tmp_path / "home"
    progress = io.StringIO()
    libs = kafka_tools.fetch(home, repository=url, progress=progress, jars=jars)
    assert libs == home / "libs"
    for jar in jars:
        assert (libs / jar.name).read_bytes() == (root / "maven2" / jar.path).read_bytes()
    assert sorted(p.name for p in libs.iterdir()) == sorted(j.name for j in jars)  # no leftovers
    lines = progress.getvalue().splitlines()
    prefix = f"Fetching Apache Kafka {kafka_tools.KAFKA_VERSION}'s tools from {url} into {libs}"
    assert lines == [
        f"{prefix} (first use): 6 jars, 0.3 MB",
        f"{prefix} (first use): done, 6 jars",
    ]
    assert (home / "tools-log4j.properties").read_text() == kafka_tools.TOOLS_LOG4J

    # A second call finds everything in place: no download, no output.
    again = io.StringIO()
    kafka_tools.fetch(home, repository=url, progress=again, jars=jars)
    assert again.getvalue() == ""
    # A truncated jar (an interrupted copy) is fetched again.
    (libs / jars[2].name).write_bytes(b"torn")
    repaired = io.StringIO()
    kafka_tools.fetch(home, repository=url, progress=repaired, jars=jars)
    assert (libs / jars[2].name).stat().st_size == jars[2].size
    assert repaired.getvalue().splitlines()[0] == f"{prefix} (some are missing): 1 jar, 0.1 MB"


def test_fetch_refuses_a_jar_that_does_not_match_its_checksum(repository, tmp_path) -> None:
    url, root = repository
    good = publish(root, "org/example/good/1/good-1.jar", b"good bytes")
    bad = publish(root, "org/example/bad/1/bad-1.jar", b"bad bytes")
    pinned = bad._replace(sha256=hashlib.sha256(b"the bytes we pinned").hexdigest())
    pinned = pinned._replace(size=bad.size)
    with pytest.raises(KafkaToolsError) as e:
        kafka_tools.fetch(tmp_path / "home", repository=url, jars=[good, pinned])
    assert str(e.value) == f"{url}/{bad.path} does not have the pinned SHA-256 {pinned.sha256}"
    libs = tmp_path / "home" / "libs"
    assert not (libs / bad.name).exists()
    assert not [p for p in libs.iterdir() if p.name.endswith(".part")]


def test_fetch_names_the_url_it_cannot_download(repository, tmp_path) -> None:
    url, _ = repository
    missing = Jar("org/example/gone/1/gone-1.jar", 10, "0" * 64)
    with pytest.raises(KafkaToolsError) as e:
        kafka_tools.fetch(tmp_path / "home", repository=url, jars=[missing])
    assert str(e.value) == (
        f"cannot download {url}/{missing.path}: HTTP 404 File not found (set ODRADEK_MAVEN_REPOSITORY to a "
        "Maven Central mirror when this machine cannot reach it)"
    )


def test_tool_names_map_to_main_classes() -> None:
    assert kafka_tools.main_class("kafka-topics.sh", ["--list"]) == (
        "org.apache.kafka.tools.TopicCommand",
        ["--list"],
    )
    assert kafka_tools.main_class("kafka-consumer-groups", [])[0] == (
        "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
    )
    assert kafka_tools.main_class("kafka-run-class.sh", ["kafka.Kafka", "x"]) == (
        "kafka.Kafka",
        ["x"],
    )
    with pytest.raises(KafkaToolsError, match="unknown tool 'kafka-nope.sh'"):
        kafka_tools.main_class("kafka-nope.sh", [])


def odradek(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "odradek.broker.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_without_java_the_command_says_what_to_install(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(tmp_path)  # no java on it
    env["ODRADEK_KAFKA_HOME"] = str(tmp_path / "kafka")
    proc = odradek("kafka-tool", "kafka-topics.sh", "--list", env=env)
    assert proc.returncode == 1
    assert proc.stderr == f"error: {kafka_tools.JAVA_MISSING}\n"
    assert not (tmp_path / "kafka").exists(), "nothing is fetched without Java"
    assert proc.stderr in README  # its Troubleshooting section quotes it


def test_list_and_usage(tmp_path: Path) -> None:
    listed = odradek("kafka-tool", "--list", env=dict(os.environ))
    assert listed.returncode == 0
    names = listed.stdout.split()
    assert {"kafka-topics.sh", "kafka-console-consumer.sh", "kafka-dump-log.sh"} <= set(names)
    assert len(names) == len(kafka_tools.TOOLS) + 1  # and kafka-run-class.sh
    usage = odradek("kafka-tool", env=dict(os.environ))
    assert usage.returncode == 2
    assert usage.stdout.startswith("usage: odradek kafka-tool NAME [ARGS ...]")
