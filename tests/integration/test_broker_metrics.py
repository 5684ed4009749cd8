"""The broker's Prometheus endpoint: Kafka's metric names, counted from real client traffic."""

from __future__ import annotations

import re
import time
import urllib.request
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from odradek.broker.testing.processes import free_port


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        return resp.read().decode()


def sample(text: str, name: str, **labels: str) -> float:
    """The value of one sample; labels given must all match."""
    for line in text.splitlines():
        m = re.match(rf"{re.escape(name)}(\{{[^}}]*\}})? (\S+)$", line)
        if m and all(f'{k}="{v}"' in (m.group(1) or "") for k, v in labels.items()):
            return float(m.group(2))
    raise AssertionError(f"no sample {name} {labels} in:\n{text[:3000]}")


def test_metrics_follow_produce_and_fetch(broker_factory) -> None:
    port = free_port()
    broker = broker_factory(overrides={"prometheus.metrics.port": str(port),
                                       "prometheus.metrics.host": "127.0.0.1"})  # fmt: skip
    topic = "metrics-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)], operation_timeout=30)[topic].result(60)

    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50})
    for i in range(10):
        producer.produce(topic, value=b"x" * 100, partition=i % 2)
    assert producer.flush(30) == 0

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "metrics",
                         "enable.auto.commit": False})  # fmt: skip
    consumer.assign([TopicPartition(topic, p, 0) for p in range(2)])
    got = 0
    deadline = time.monotonic() + 30
    while got < 10 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got += 1
    consumer.close()
    assert got == 10

    text = scrape(port)
    assert sample(text, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == 10
    assert sample(text, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic) > 1000
    assert sample(text, "kafka_server_brokertopicmetrics_bytesout_total", topic=topic) > 1000
    assert sample(text, "kafka_network_requestmetrics_requests_total", request="Produce") >= 1
    assert sample(text, "kafka_network_requestmetrics_totaltimems_count", request="Fetch") >= 1
    assert sample(text, "kafka_server_replicamanager_partitioncount") >= 2
    assert sample(text, "kafka_server_replicamanager_leadercount") >= 2
    assert sample(text, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert sample(text, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert sample(text, "kafka_log_log_size", topic=topic, partition="0") > 0
    assert sample(text, "kafka_server_socketservermetrics_connection_count") >= 1
