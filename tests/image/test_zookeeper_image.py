"""The local ZooKeeper image (scripts/zookeeper-image, built by scripts/build-image.sh) that the Helm
chart and e2e tests use: three containers form an ensemble from the official image's variables,
with ids from StatefulSet-style host names, and the Odradek image's broker keeps its metadata
there and serves a real client, also after the ZooKeeper leader stops."""

from __future__ import annotations

import os

import pytest
from confluent_kafka import Consumer, Producer
from image_harness import (
    RESTRICTED,
    START_TIMEOUT,
    Container,
    docker,
    start_published_broker,
    wait_until,
)

pytestmark = pytest.mark.timeout(1800)

SERVERS = 3


def mode(server: Container) -> str | None:
    """The `Mode:` line of the server's `srvr` answer, through the image's own readiness script."""
    if server.exec("zk-ready").returncode != 0:
        return None
    reply = server.exec(
        "bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/2181; printf srvr >&3; timeout 5 cat <&3"
    ).stdout
    for line in reply.splitlines():
        if line.startswith("Mode: "):
            return line.removeprefix("Mode: ")
    return None


def modes(servers: list[Container]) -> list[str] | None:
    found = [mode(s) for s in servers]
    return sorted(found) if all(found) else None  # type: ignore[arg-type]


def produce_and_consume(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(60) == 0
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"}
    )
    try:
        consumer.subscribe([topic])
        got: list[bytes] = []

        def consumed_all() -> bool:
            msg = consumer.poll(1.0)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got.append(msg.value())
            return len(got) >= len(values)

        wait_until(consumed_all, 60, what=f"{len(values)} records from {topic}", interval=0)
        assert got == values
    finally:
        consumer.close()


def test_ensemble_serves_the_broker(zookeeper_image, odradek_image, run_container, docker_network):
    names = [f"zk-{i}" for i in range(SERVERS)]
    servers_cfg = " ".join(f"server.{i + 1}={n}:2888:3888;2181" for i, n in enumerate(names))
    servers = []
    for name in names:
        net = ("--network", docker_network, "--network-alias", name, "--hostname", name)
        env = ("-e", f"ZOO_SERVERS={servers_cfg}")
        servers.append(run_container(zookeeper_image, docker_args=(*net, *env, *RESTRICTED)))
    found = wait_until(lambda: modes(servers), START_TIMEOUT, what="a ZooKeeper quorum")
    assert found == ["follower", "follower", "leader"]

    # ZOO_MY_ID unset: the id comes from the StatefulSet-style ordinal in the host name.
    for i, server in enumerate(servers):
        assert server.exec("cat", "/data/myid").stdout.strip() == str(i + 1)
        assert server.exec("id", "-u").stdout.strip() == "1000"

    connect = ",".join(f"{n}:2181" for n in names) + "/odradek"
    broker, bootstrap = start_published_broker(
        run_container,
        odradek_image,
        extra={"zookeeper.connect": connect},
        docker_args=("--network", docker_network),
    )
    assert "Zookeeper connection established" in broker.logs()
    produce_and_consume(bootstrap, "through-zookeeper", [b"a", b"b", b"c"])

    # The leader goes away: the other two elect a new one, and the broker carries on.
    leader = next(s for s in servers if mode(s) == "leader")
    rest = [s for s in servers if s is not leader]
    docker("stop", "-t", "30", leader.name, timeout=90)
    found = wait_until(lambda: modes(rest), START_TIMEOUT, what="a new ZooKeeper leader")
    assert found == ["follower", "leader"]
    produce_and_consume(bootstrap, "after-leader-stop", [b"d", b"e"])
    assert broker.running()


def test_mounted_configuration_is_used_as_is(zookeeper_image, run_container, tmp_path):
    """As the Helm chart runs it: zoo.cfg from a read-only ConfigMap mount, and myid already written
    (by an init container) to the data volume; the entry point keeps both."""
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "zoo.cfg").write_text(
        "tickTime=2000\ndataDir=/data\nclientPort=2181\nadmin.enableServer=false\n"
        "4lw.commands.whitelist=srvr,ruok\n"
    )
    data = tmp_path / "data"
    data.mkdir()
    (data / "myid").write_text("7\n")
    # The image's user (uid 1000) writes there, as fsGroup lets it in a pod.
    if os.geteuid() == 0:
        os.chown(data, 1000, 1000)
    else:
        data.chmod(0o777)
    server = run_container(
        zookeeper_image,
        docker_args=(
            "--hostname", "zookeeper-2",
            "-v", f"{conf}:/conf:ro",
            "-v", f"{data}:/data", *RESTRICTED,
        ),
    )  # fmt: skip
    assert (
        wait_until(lambda: mode(server), START_TIMEOUT, what="a standalone server") == "standalone"
    )
    assert (data / "myid").read_text().strip() == "7"
    assert (conf / "zoo.cfg").read_text().startswith("tickTime=2000\ndataDir=/data\n")
    assert list((data / "version-2").iterdir()), "no snapshot or log in the mounted data dir"
