"""What the broker does not do is refused in words: Kafka's error code for it (which clients print),
and a broker log line naming it, never a silent wait.

- an API of Kafka 3.9 that ApiVersions does not list: UNSUPPORTED_VERSION when its response has a
  top-level error code, otherwise a closed connection (Kafka's rule for APIs it does not enable);
- settings Odradek does not implement (replication throttles, and old-format fetches on a topic
  with message.downconversion.enable=false): INVALID_CONFIG or UNSUPPORTED_VERSION with a message.
"""

from __future__ import annotations

import socket
import struct
import time

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from odradek.broker.protocol import codec
from odradek.broker.protocol.api_keys import ApiKey
from odradek.broker.protocol.errors import ErrorCode
from odradek.broker.protocol.messages import REGISTRY

IO_TIMEOUT = 30.0


def exchange(host: str, port: int, api_key: int, version: int, body: dict) -> dict | None:
    """Send one request on a fresh connection: its decoded response, or None when the broker
    closed the connection without one."""
    with socket.create_connection((host, port), timeout=IO_TIMEOUT) as sock:
        payload = codec.encode_request(api_key, version, 7, "odradek-tests", body)
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        buf = b""
        while len(buf) < 4 or len(buf) < 4 + struct.unpack(">i", buf[:4])[0]:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                assert buf == b"", f"connection closed after a partial response {buf[:32]!r}"
                return None
            buf += chunk
    correlation_id, response = codec.decode_response(api_key, version, buf[4:])
    assert correlation_id == 7
    return response


def advertised(host: str, port: int) -> set[int]:
    response = exchange(host, port, ApiKey.API_VERSIONS, 0, {})
    assert response is not None and response["error_code"] == 0
    return {e["api_key"] for e in response["api_keys"]}


def wait_for_log(broker, text: str, timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    while text not in broker.log_text():
        assert time.monotonic() < deadline, f"no log line with {text!r}\n{broker.log_tail()}"
        time.sleep(0.1)
    return broker.log_text()


def test_apis_not_advertised_are_refused_with_a_log_line(broker_factory) -> None:
    broker = broker_factory()
    served = advertised(broker.host, broker.port)
    not_served = sorted(set(REGISTRY) - served)
    assert not_served, "every API of Kafka 3.9 is served: nothing left to refuse"
    for key in not_served:
        api = REGISTRY[key]
        version = api.versions.hi
        fields = {f.name for f in api.response if version in f.versions}
        response = exchange(broker.host, broker.port, key, version, {})
        what = f"{api.name} (API key {key}) v{version}"
        if "error_code" in fields:
            assert response is not None, f"{what}: no answer"
            assert response["error_code"] == ErrorCode.UNSUPPORTED_VERSION, (what, response)
            if "error_message" in fields:
                assert response["error_message"] == (
                    f"{api.name} is not supported by this broker (Odradek)"
                )
            wait_for_log(broker, f"{what} from client 'odradek-tests' on ")
            assert "is not served by this broker: answered UNSUPPORTED_VERSION" in (
                broker.log_text()
            )
        else:
            assert response is None, f"{what}: answered {response} instead of closing"
            wait_for_log(broker, f"{what} is not served by this broker")
    # Nothing of this disturbed the broker.
    assert ApiKey.PRODUCE in advertised(broker.host, broker.port)


def test_replication_throttles_are_refused_as_invalid_config(broker_factory) -> None:
    broker = broker_factory()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_topics(
        [NewTopic("throttled", 1, 1, config={"leader.replication.throttled.replicas": "0:0"})]
    )
    with pytest.raises(KafkaException) as e:
        futures["throttled"].result(30)
    error = e.value.args[0]
    assert error.name() == "INVALID_CONFIG"
    assert error.str() == (
        "Invalid value [0:0] for configuration leader.replication.throttled.replicas: "
        "replication throttling is not supported by Odradek"
    )
    wait_for_log(broker, "refused a config of topic 'throttled': Invalid value [0:0]")

    (broker_id,) = admin.list_topics(timeout=30).brokers
    resource = ConfigResource(
        ConfigResource.Type.BROKER,
        str(broker_id),
        incremental_configs=[
            ConfigEntry(
                "leader.replication.throttled.rate",
                "1000000",
                incremental_operation=AlterConfigOpType.SET,
            )
        ],
    )
    with pytest.raises(KafkaException) as e:
        admin.incremental_alter_configs([resource])[resource].result(30)
    error = e.value.args[0]
    assert error.name() == "INVALID_CONFIG"
    assert error.str().endswith(
        "Invalid value 1000000 for configuration leader.replication.throttled.rate: "
        "replication throttling is not supported by Odradek"
    )


def fetch_v3(host: str, port: int, topic: str) -> dict:
    body = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": 1 << 20,
        "topics": [
            {
                "topic": topic,
                "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}],
            }
        ],
    }
    response = exchange(host, port, ApiKey.FETCH, 3, body)
    assert response is not None
    return response["responses"][0]["partitions"][0]


def test_old_format_fetch_is_refused_where_down_conversion_is_off(broker_factory) -> None:
    broker = broker_factory()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topics = {
        "converted": {},
        "not-converted": {"message.downconversion.enable": "false"},
    }
    futures = admin.create_topics([NewTopic(t, 1, 1, config=c) for t, c in topics.items()])
    for f in futures.values():
        f.result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for topic in topics:
        producer.produce(topic, b"v2 record")
    assert producer.flush(30) == 0
    assert fetch_v3(broker.host, broker.port, "converted")["error_code"] == 0
    assert fetch_v3(broker.host, broker.port, "converted")["records"]
    refused = fetch_v3(broker.host, broker.port, "not-converted")
    assert refused["error_code"] == ErrorCode.UNSUPPORTED_VERSION
    wait_for_log(
        broker,
        "Fetch v3 of not-converted from client 'odradek-tests' needs records in an older format; "
        "message.downconversion.enable=false: answered UNSUPPORTED_VERSION",
    )
