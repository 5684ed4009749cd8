"""Brokers talking to each other over SASL_SSL: controller requests, replica fetches and the
controlled shutdown log in as the broker principal, and nothing falls back to PLAINTEXT."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from certs import CertificateAuthority
from cluster import Cluster
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from odradek.broker.testing.processes import free_port
from odradek.broker.testing.zookeeper import ZkEnsemble

BROKER_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="broker" password="broker-secret" user_broker="broker-secret";'
)


def _secured(cluster: Cluster, ca: CertificateAuthority, jaas: dict[int, str]) -> None:
    server = ca.issue("server", "localhost", server=True)
    for b in cluster.brokers.values():
        sasl_port = free_port()
        b.settings = {
            **b.settings,
            "listeners": f"PLAINTEXT://127.0.0.1:{b.port},SASL_SSL://127.0.0.1:{sasl_port}",
            "inter.broker.listener.name": "SASL_SSL",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.sasl_ssl.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas.get(b.broker_id, BROKER_JAAS),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(server.combined),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(ca.pem.cert),
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:broker",
            "allow.everyone.if.no.acl.found": "true",
        }


def _lock_the_cluster_resource(bootstrap: str) -> None:
    """An ACL on the cluster: from now on User:ANONYMOUS (the PLAINTEXT listener) lacks
    ClusterAction, so only a broker logged in over SASL_SSL can fetch as a follower."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    binding = AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL,
                         "User:admin", "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW)  # fmt: skip
    admin.create_acls([binding])[binding].result(30)


def test_replication_and_control_over_sasl_ssl(zk_ensemble: ZkEnsemble, tmp_path: Path) -> None:
    cluster = Cluster(zk_ensemble, tmp_path, 3)
    _secured(cluster, CertificateAuthority(tmp_path / "certs"), {})
    topic = "secured-" + uuid.uuid4().hex[:8]
    try:
        cluster.start()
        bootstrap = cluster[1].bootstrap
        cluster.wait_until(lambda: cluster.converged(), "a controller and all brokers")
        _lock_the_cluster_resource(bootstrap)
        cluster.create_topic(topic, 3, 3)  # LeaderAndIsr from the controller over SASL_SSL
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        for i in range(60):
            producer.produce(topic, value=f"v{i}".encode(), partition=i % 3)
        assert producer.flush(60) == 0

        def full_isr() -> dict | None:
            view = cluster.converged([topic])
            if view is None or len(view["topics"].get(topic, {})) != 3:
                return None
            ok = all(len(isr) == 3 for *_, isr in view["topics"][topic].values())
            return view if ok else None

        cluster.wait_until(full_isr, "every follower in the ISR (fetching over SASL_SSL)")
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "g"})
        consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
        got = 0
        while got < 60:
            msg = consumer.poll(10)
            assert msg is not None, f"only {got} of 60 records came back"
            got += msg.error() is None
        consumer.close()
        # A controlled shutdown asks the controller over SASL_SSL too.
        victim = next(b for b in cluster.brokers.values() if b is not cluster.controller())
        assert victim.stop() == 0, victim.log_tail()
        assert "controlled shutdown succeeded" in victim.log_text().lower(), victim.log_tail()
    finally:
        cluster.stop()


def test_a_broker_with_a_wrong_inter_broker_password_stays_out_of_the_isr(
    zk_ensemble: ZkEnsemble, tmp_path: Path
) -> None:
    wrong = BROKER_JAAS.replace('password="broker-secret"', 'password="wrong"')
    cluster = Cluster(zk_ensemble, tmp_path, 3, {"replica.lag.time.max.ms": "3000"})
    _secured(cluster, CertificateAuthority(tmp_path / "certs"), {3: wrong})
    try:
        # Brokers 1 and 2 first, so that one of them is the controller: a controller that
        # cannot log in to the others would leave the whole cluster without metadata.
        cluster[1].start()
        cluster[2].start()
        cluster.wait_until(lambda: cluster.zk_controller() in (1, 2), "a controller among 1, 2")
        cluster[3].start()
        _lock_the_cluster_resource(cluster[1].bootstrap)
        topic = "half-" + uuid.uuid4().hex[:8]
        cluster.create_topic(topic, 3, 3)  # broker 3 follows the partitions 1 and 2 lead

        def three_dropped() -> dict | None:
            view = cluster.converged([topic])
            if view is None or len(view["topics"].get(topic, {})) != 3:
                return None
            states = view["topics"][topic].values()
            ok = all(3 not in isr for leader, _, _, isr in states if leader != 3)
            return view if ok else None

        cluster.wait_until(three_dropped, "broker 3 out of the ISR of what it follows")
        assert "SASL_AUTHENTICATION_FAILED" in cluster[3].log_text(), cluster[3].log_tail()
    finally:
        cluster.stop()


pytestmark = pytest.mark.timeout(600)
