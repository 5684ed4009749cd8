"""SecurityService with the real embedded store and the real config-change listener: ACLs,
SCRAM credentials and quotas written the way the admin handlers write them reach the caches."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kafka.net.sasl.scram import ScramClient
from odradek.broker.cluster.config_changes import ConfigChangeListener
from odradek.broker.cluster.embedded_store import EmbeddedStore
from odradek.broker.cluster.kafka_zk import KafkaZk
from odradek.broker.config import BrokerConfig
from odradek.broker.quotas import config as qc
from odradek.broker.security import acl_store
from odradek.broker.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    AclResourceType,
    ResourcePattern,
)
from odradek.broker.security.entity_config import update_entity_config
from odradek.broker.security.scram import ScramMechanism, generate_credential
from odradek.broker.security.service import SecurityService


async def eventually(check, timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        assert loop.time() < deadline, "condition not reached"
        await asyncio.sleep(0.02)


def test_service_follows_store_changes(tmp_path: Path) -> None:
    store = EmbeddedStore(str(tmp_path / "meta"))
    zkc = KafkaZk(store)
    zkc.create_top_level_paths()
    config = BrokerConfig({"broker.id": "0"})
    props = {
        "super.users": "User:admin",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,PLAIN",
        "sasl.jaas.config": 'x required user_bob="bob-pw";',
    }

    async def run() -> None:
        service = SecurityService(zkc, props)
        await service.start()
        changes = ConfigChangeListener(zkc, config, on_entity_config=service.on_entity_config)
        await changes.start()
        try:
            auth = service.authorizer
            assert not auth.authorize(
                "User:alice", "h", AclOperation.READ, AclResourceType.TOPIC, "t"
            )
            assert auth.authorize("User:admin", "h", AclOperation.READ, AclResourceType.TOPIC, "t")
            binding = AclBinding(
                ResourcePattern(AclResourceType.TOPIC, "t"),
                AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW),
            )
            await asyncio.to_thread(acl_store.create_acls, zkc, [binding])
            await eventually(
                lambda: auth.authorize(
                    "User:alice", "h", AclOperation.READ, AclResourceType.TOPIC, "t"
                )
            )

            cred = generate_credential(ScramMechanism.SCRAM_SHA_256, "pw")
            await asyncio.to_thread(
                update_entity_config,
                zkc,
                "users",
                "alice",
                lambda c: {**c, "SCRAM-SHA-256": cred.to_config_value()},
            )
            await asyncio.to_thread(
                qc.alter_quotas, zkc, qc.make_entity([("client-id", "app")]),
                {qc.PRODUCER_BYTE_RATE: 100.0},
            )  # fmt: skip
            await eventually(lambda: service.scram_credentials.get("alice", "SCRAM-SHA-256"))
            await eventually(lambda: service.quotas.quota("User:x", "app", "producer_byte_rate"))

            server = service.new_sasl_server("SASL_PLAINTEXT", "SCRAM-SHA-256")
            client = ScramClient("alice", "pw", "SCRAM-SHA-256")
            client.process_server_first_message(server.evaluate(client.first_message()))
            client.process_server_final_message(server.evaluate(client.final_message()))
            assert server.authorization_id == "alice"
            plain = service.new_sasl_server("SASL_PLAINTEXT", "PLAIN")
            plain.evaluate(b"\x00bob\x00bob-pw")
            assert plain.authorization_id == "bob"
        finally:
            await changes.stop()
            await service.stop()

    try:
        asyncio.run(run())
    finally:
        store.close()
