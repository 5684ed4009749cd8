"""A log dir whose disk fails goes offline; the broker serves its other dir and, on a
three-broker cluster, leadership of the partitions on the failed disk moves to other brokers.

The failing disk is real: a loop-mounted ext4 image that the test shuts down with the
EXT4_IOC_SHUTDOWN ioctl (what `xfs_io -c shutdown` does for xfs), after which every read and
write on it returns EIO, as on a dead drive. As root chmod would not stop the broker, and a
lazily unmounted filesystem keeps serving open files, so neither would show a failure.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster import Cluster, run
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from odradek.broker.client.admin import AdminClient as OdradekAdmin
from odradek.broker.protocol.errors import ErrorCode
from odradek.broker.testing.zookeeper import ZkEnsemble

# _IOR('X', 125, __u32) and its "do not flush the journal" flag
EXT4_IOC_SHUTDOWN = (2 << 30) | (4 << 16) | (ord("X") << 8) | 125
EXT4_GOING_FLAGS_NOLOGFLUSH = 2
TOPIC = "disk-failure"


def _need(condition: bool, why: str) -> None:
    if not condition:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(why, pytrace=False)
        pytest.skip(why)


@pytest.fixture
def failing_disk(tmp_path: Path) -> Iterator[Path]:
    """A mounted ext4 filesystem on a loop device, unmounted after the test."""
    _need(os.geteuid() == 0, "mounting a loop device needs root")
    _need(shutil.which("mkfs.ext4") is not None, "mkfs.ext4 (e2fsprogs) is not installed")
    image, mnt = tmp_path / "disk.img", tmp_path / "disk"
    mnt.mkdir()
    with open(image, "wb") as f:
        f.truncate(256 << 20)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True, timeout=60)
    mounted = subprocess.run(
        ["mount", "-o", "loop", str(image), str(mnt)], capture_output=True, text=True, timeout=60
    )
    _need(mounted.returncode == 0, f"cannot loop-mount an image: {mounted.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False, timeout=60)


def fail_disk(mnt: Path) -> None:
    fd = os.open(mnt, os.O_RDONLY)
    try:
        fcntl.ioctl(fd, EXT4_IOC_SHUTDOWN, struct.pack("I", EXT4_GOING_FLAGS_NOLOGFLUSH))
    finally:
        os.close(fd)


def produce(bootstrap: str, partition: int, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    errors = []
    for v in values:
        producer.produce(TOPIC, v, partition=partition,
                         on_delivery=lambda err, msg: errors.append(err) if err else None)  # fmt: skip
    assert producer.flush(60) == 0
    assert not errors, errors[:3]


def read(bootstrap: str, partition: int) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r{time.time_ns()}",
                         "enable.auto.commit": False})  # fmt: skip
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, partition), timeout=30)
        consumer.assign([TopicPartition(TOPIC, partition, 0)])
        out: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(out) < high and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                out.append(msg.value())
        return out
    finally:
        consumer.close()


def test_failed_log_dir_goes_offline_and_leadership_moves(
    zk_ensemble: ZkEnsemble, tmp_path: Path, failing_disk: Path
) -> None:
    cluster = Cluster(zk_ensemble, tmp_path / "cluster", 3)
    good = tmp_path / "cluster" / "broker1" / "good"
    cluster[1].settings["log.dirs"] = f"{good},{failing_disk}"
    try:
        cluster.start()
        bootstrap = cluster[2].bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        # Broker 1 is the preferred leader of all four partitions; its replicas alternate
        # between its two dirs (the one with fewer logs gets the next).
        topic = NewTopic(TOPIC, 4, replica_assignment=[[1, 2, 3]] * 4)
        admin.create_topics([topic])[TOPIC].result(30)
        leaders = cluster.wait_until(
            lambda: (
                (v := cluster.converged([TOPIC]))
                and len(v["topics"].get(TOPIC, {})) == 4
                and {p: s[0] for p, s in v["topics"][TOPIC].items()}
            ),
            "the topic's leaders",
        )
        assert set(leaders.values()) == {1}
        on_disk = sorted(int(p.name.rsplit("-", 1)[1]) for p in failing_disk.glob(f"{TOPIC}-*"))
        on_good = sorted(int(p.name.rsplit("-", 1)[1]) for p in good.glob(f"{TOPIC}-*"))
        assert on_disk and on_good and sorted(on_disk + on_good) == [0, 1, 2, 3]
        written = {p: [f"before-{p}-{i}".encode() for i in range(200)] for p in range(4)}
        for p, values in written.items():
            produce(bootstrap, p, values)

        fail_disk(failing_disk)

        # Broker 1 notices (its next write there, at the latest the 5 s HW checkpoint), tells
        # the controller, and the partitions of the failed disk get leaders elsewhere.
        def moved() -> dict | None:
            view = cluster[2].metadata([TOPIC])
            parts = {p["partition_index"]: p for p in view["topics"][0]["partitions"]}
            if all(parts[p]["leader_id"] not in (1, -1) and 1 in parts[p]["offline_replicas"]
                   for p in on_disk):  # fmt: skip
                return parts
            return None

        parts = cluster.wait_until(moved, "leadership of the failed disk's partitions to move")
        for p in on_disk:
            assert 1 not in parts[p]["isr_nodes"]
        for p in on_good:  # broker 1 keeps leading and serving what lives on its good dir
            assert parts[p]["leader_id"] == 1 and parts[p]["offline_replicas"] == []
        for p in range(4):
            produce(bootstrap, p, [f"after-{p}".encode()])
            assert read(bootstrap, p) == [*written[p], f"after-{p}".encode()]

        async def dirs_of_broker_1():
            async with OdradekAdmin(bootstrap) as client:
                return (await client.describe_log_dirs([1]))[1]

        dirs = {d.path: d for d in run(dirs_of_broker_1())}
        assert dirs[str(failing_disk)].error == ErrorCode.KAFKA_STORAGE_ERROR
        assert dirs[str(good)].error == ErrorCode.NONE
        assert {tp.partition for tp in dirs[str(good)].replicas if tp.topic == TOPIC} == set(
            on_good
        )
        assert "is offline" in cluster[1].log_text()
    finally:
        cluster.stop()
