"""The admin views of groups: the project's admin client and `odradek groups ...` against a real
broker with a live confluent-kafka group."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CTopicPartition
from conftest import run_checked
from odradek.broker.client.admin import AdminClient
from odradek.broker.client.cluster import TopicPartition
from odradek.broker.protocol.errors import ErrorCode, KafkaError

WAIT_S = 60.0


def odradek(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    cli = [sys.executable, "-m", "odradek.broker.cli"]
    return run_checked([*cli, *args, "--bootstrap-server", bootstrap], check=False)


def test_admin_client_and_cli_show_members_offsets_and_lag(bootstrap: str, new_topic) -> None:
    topic = new_topic(partitions=2)
    group = f"{topic}-group"
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        producer.produce(topic, value=b"v", partition=i % 2)
    assert producer.flush(30) == 0
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": "lag-reader",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        c.subscribe([topic])
        got = 0
        deadline = time.monotonic() + WAIT_S
        while got < 10 and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is not None and msg.error() is None:
                got += 1
                if got == 10:
                    # Leave a lag of 2 on partition 0.
                    c.commit(
                        offsets=[
                            CTopicPartition(topic, 0, 3),
                            CTopicPartition(topic, 1, 5),
                        ],
                        asynchronous=False,
                    )
        assert got == 10

        async def views() -> None:
            async with AdminClient(bootstrap) as admin:
                listed = {g.group_id: g for g in await admin.list_groups()}
                assert listed[group].protocol_type == "consumer"
                assert listed[group].state == "Stable"
                assert group not in {g.group_id for g in await admin.list_groups(["Empty"])}
                desc = (await admin.describe_groups([group]))[group]
                assert (desc.state, desc.protocol_type, desc.protocol) == (
                    "Stable",
                    "consumer",
                    "range",
                )
                (member,) = desc.members
                assert member.client_id == "lag-reader"
                assert sorted(member.assignment) == [
                    TopicPartition(topic, 0),
                    TopicPartition(topic, 1),
                ]
                offsets = await admin.list_consumer_group_offsets(group)
                assert {tp: o.offset for tp, o in offsets.items()} == {
                    TopicPartition(topic, 0): 3,
                    TopicPartition(topic, 1): 5,
                }
                one = await admin.list_consumer_group_offsets(group, [TopicPartition(topic, 1)])
                assert list(one) == [TopicPartition(topic, 1)]
                with pytest.raises(KafkaError) as e:
                    await admin.delete_groups([group])
                assert e.value.code == ErrorCode.NON_EMPTY_GROUP

        asyncio.run(views())

        described = odradek(bootstrap, "groups", "describe", "--group", group)
        assert described.returncode == 0, described.stderr
        lines = described.stdout.splitlines()
        assert lines[0] == f"Group {group}: state Stable, protocol range, 1 members"
        assert lines[1].split() == [
            "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
            "HOST", "CLIENT-ID",
        ]  # fmt: skip
        rows = [line.split() for line in lines[2:]]
        assert [r[:5] for r in rows] == [[topic, "0", "3", "5", "2"], [topic, "1", "5", "5", "0"]]
        assert all(r[7] == "lag-reader" for r in rows)
    finally:
        c.close()

    listed = odradek(bootstrap, "groups", "list", "--state", "Empty")
    assert listed.returncode == 0, listed.stderr
    assert group in listed.stdout.split()
    deleted = odradek(bootstrap, "groups", "delete", "--group", group)
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.strip() == f"Deleted group {group}."
    again = odradek(bootstrap, "groups", "delete", "--group", group)
    assert again.returncode == 1
    assert "GROUP_ID_NOT_FOUND" in again.stderr
    assert group not in odradek(bootstrap, "groups", "list").stdout.split()
