"""The group APIs on the wire, with the project's own protocol client against a real broker:
the error codes a client can provoke (and that they leave the group alone), the version-specific
behaviours (MEMBER_ID_REQUIRED, batched FindCoordinator/OffsetFetch/LeaveGroup, OffsetCommit v0
in the metadata store), and the admin views.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from odradek.broker.client.connection import BrokerConnection
from odradek.broker.protocol.api_keys import ApiKey
from odradek.broker.protocol.errors import ErrorCode as E

WAIT_S = 60.0
# ConsumerProtocolSubscription v0 for one topic (what the coordinator sees from a consumer).


def subscription(*topics: str) -> bytes:
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


class Member:
    """A hand-driven group member speaking JoinGroup v5 / SyncGroup v3 / Heartbeat v3."""

    def __init__(self, conn: BrokerConnection, group: str, topic: str) -> None:
        self.conn = conn
        self.group = group
        self.topic = topic
        self.member_id = ""
        self.generation = -1

    async def join(self, session_timeout_ms: int = 30000, version: int = 5) -> dict[str, Any]:
        body = {
            "group_id": self.group,
            "session_timeout_ms": session_timeout_ms,
            "rebalance_timeout_ms": 30000,
            "member_id": self.member_id,
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": subscription(self.topic)}],
        }
        resp = await self.conn.request(ApiKey.JOIN_GROUP, body, version)
        if resp["error_code"] == E.MEMBER_ID_REQUIRED:
            self.member_id = resp["member_id"]
            body["member_id"] = self.member_id
            resp = await self.conn.request(ApiKey.JOIN_GROUP, body, version)
        if resp["error_code"] == E.NONE:
            self.member_id = resp["member_id"]
            self.generation = resp["generation_id"]
        return resp

    async def sync(self, assignments: dict[str, bytes] | None = None) -> dict[str, Any]:
        body = {
            "group_id": self.group,
            "generation_id": self.generation,
            "member_id": self.member_id,
            "assignments": [
                {"member_id": m, "assignment": a} for m, a in (assignments or {}).items()
            ],
        }
        return await self.conn.request(ApiKey.SYNC_GROUP, body, 3)

    async def heartbeat(self, member_id: str | None = None, generation: int | None = None) -> int:
        body = {
            "group_id": self.group,
            "generation_id": self.generation if generation is None else generation,
            "member_id": self.member_id if member_id is None else member_id,
        }
        return (await self.conn.request(ApiKey.HEARTBEAT, body, 3))["error_code"]


@asynccontextmanager
async def coordinator(bootstrap: str, group: str) -> AsyncIterator[BrokerConnection]:
    """A connection to the coordinator of `group`, found through the bootstrap broker."""
    host, _, port = bootstrap.rpartition(":")
    conn = await BrokerConnection.open(host, int(port))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while True:
        resp = await conn.request(ApiKey.FIND_COORDINATOR, {"key": group, "key_type": 0}, 3)
        if resp["error_code"] == E.NONE:
            break
        assert resp["error_code"] == E.COORDINATOR_NOT_AVAILABLE
        assert loop.time() < deadline, "no coordinator"
        await asyncio.sleep(0.1)
    await conn.close()
    conn = await BrokerConnection.open(resp["host"], resp["port"])
    async with conn:
        yield conn


async def retry_loading(call: Any) -> dict[str, Any]:
    """Repeat a request while the coordinator is still loading its partition."""
    deadline = asyncio.get_running_loop().time() + WAIT_S
    while True:
        resp = await call()
        if resp.get("error_code") != E.COORDINATOR_LOAD_IN_PROGRESS:
            return resp
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.1)


def commit_body(
    group: str, member: str, generation: int, topic: str, offset: int, metadata: str = ""
) -> dict[str, Any]:
    return {
        "group_id": group,
        "generation_id_or_member_epoch": generation,
        "member_id": member,
        "topics": [
            {
                "name": topic,
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": offset,
                        "committed_metadata": metadata,
                    }
                ],
            }
        ],
    }


def partition_error(resp: dict[str, Any]) -> int:
    return resp["topics"][0]["partitions"][0]["error_code"]


def test_client_errors_leave_the_group_alone(bootstrap: str, new_topic) -> None:
    topic = new_topic(partitions=1)
    group = f"{topic}-group"

    async def main() -> None:
        async with coordinator(bootstrap, group) as conn:
            a = Member(conn, group, topic)
            joined = await retry_loading(a.join)
            assert joined["error_code"] == E.NONE and joined["leader"] == a.member_id
            assert (await a.sync({a.member_id: b"assignment"}))["assignment"] == b"assignment"
            gen = a.generation

            # Invalid session timeout (below group.min.session.timeout.ms and above the max).
            intruder = Member(conn, group, topic)
            for timeout in (1000, 1_800_001):
                resp = await intruder.join(session_timeout_ms=timeout)
                assert resp["error_code"] == E.INVALID_SESSION_TIMEOUT
            # Unknown member id, illegal generation.
            assert await a.heartbeat(member_id="no-such-member") == E.UNKNOWN_MEMBER_ID
            assert await a.heartbeat(generation=gen + 7) == E.ILLEGAL_GENERATION
            sync = await conn.request(
                ApiKey.SYNC_GROUP,
                {"group_id": group, "generation_id": gen - 1, "member_id": a.member_id,
                 "assignments": []},
                3,
            )  # fmt: skip
            assert sync["error_code"] == E.ILLEGAL_GENERATION
            # Commits from a non-member, from the wrong generation, a "simple" commit while the
            # group has members, and an oversized metadata string.
            commit = ApiKey.OFFSET_COMMIT
            bad = [
                (commit_body(group, "not-a-member", gen, topic, 5), E.UNKNOWN_MEMBER_ID),
                (commit_body(group, a.member_id, gen + 1, topic, 5), E.ILLEGAL_GENERATION),
                (commit_body(group, "", -1, topic, 5), E.UNKNOWN_MEMBER_ID),
                (commit_body(group, a.member_id, gen, topic, 5, "m" * 4097),
                 E.OFFSET_METADATA_TOO_LARGE),
            ]  # fmt: skip
            for body, expected in bad:
                assert partition_error(await conn.request(commit, body, 2)) == expected
            unknown_topic = commit_body(group, a.member_id, gen, topic + "-nope", 5)
            assert (
                partition_error(await conn.request(commit, unknown_topic, 8))
                == E.UNKNOWN_TOPIC_OR_PARTITION
            )
            # The member and its group carried on as if nothing happened.
            assert await a.heartbeat() == E.NONE
            described = await conn.request(
                ApiKey.DESCRIBE_GROUPS,
                {"groups": [group], "include_authorized_operations": True},
                5,
            )
            (g,) = described["groups"]
            assert g["error_code"] == E.NONE and g["group_state"] == "Stable"
            assert [m["member_id"] for m in g["members"]] == [a.member_id]
            assert g["members"][0]["member_assignment"] == b"assignment"
            assert g["authorized_operations"] != -(2**31)
            good = commit_body(group, a.member_id, gen, topic, 5, "m" * 4096)
            assert partition_error(await conn.request(commit, good, 8)) == E.NONE
            fetched = await conn.request(
                ApiKey.OFFSET_FETCH,
                {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]},
                5,
            )
            (p,) = fetched["topics"][0]["partitions"]
            assert (p["committed_offset"], p["metadata"], p["error_code"]) == (5, "m" * 4096, 0)

    asyncio.run(main())


def test_member_id_required_and_versions_without_it(bootstrap: str, new_topic) -> None:
    topic = new_topic(partitions=1)
    group = f"{topic}-group"

    async def main() -> None:
        async with coordinator(bootstrap, group) as conn:
            body = {
                "group_id": group,
                "session_timeout_ms": 10000,
                "rebalance_timeout_ms": 10000,
                "member_id": "",
                "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": subscription(topic)}],
            }
            first = await retry_loading(lambda: conn.request(ApiKey.JOIN_GROUP, body, 4))
            assert first["error_code"] == E.MEMBER_ID_REQUIRED
            assert first["member_id"].startswith("odradek-client-")
            # JoinGroup v0-v3 members are added at once (and v0 has no rebalance timeout).
            group0 = group + "-v0"
            body = dict(body, group_id=group0)
            old = await retry_loading(lambda: conn.request(ApiKey.JOIN_GROUP, body, 0))
            assert old["error_code"] == E.NONE and old["member_id"]
            assert old["protocol_name"] == "range" and old["generation_id"] == 1
            # LeaveGroup v0 leaves by member id; v3+ takes a batch and answers per member.
            left = await conn.request(
                ApiKey.LEAVE_GROUP, {"group_id": group0, "member_id": old["member_id"]}, 0
            )
            assert left["error_code"] == E.NONE
            batch = await conn.request(
                ApiKey.LEAVE_GROUP,
                {"group_id": group0, "members": [{"member_id": "gone", "group_instance_id": None},
                                                {"member_id": "", "group_instance_id": "none"}]},
                3,
            )  # fmt: skip
            assert batch["error_code"] == E.NONE
            assert [m["error_code"] for m in batch["members"]] == [E.UNKNOWN_MEMBER_ID] * 2
            left_again = await conn.request(
                ApiKey.LEAVE_GROUP, {"group_id": group0, "member_id": old["member_id"]}, 1
            )
            assert left_again["error_code"] == E.UNKNOWN_MEMBER_ID
            empty = dict(body, group_id="")
            assert (await conn.request(ApiKey.JOIN_GROUP, empty, 5))["error_code"] in (
                E.INVALID_GROUP_ID,
                E.NOT_COORDINATOR,
            )

    asyncio.run(main())


def test_offsets_v0_store_batched_fetch_and_admin(bootstrap: str, new_topic) -> None:
    topic = new_topic(partitions=2)
    group = f"{topic}-group"
    other = f"{topic}-other"

    async def main() -> None:
        host, _, port = bootstrap.rpartition(":")
        any_conn = await BrokerConnection.open(host, int(port))
        async with any_conn, coordinator(bootstrap, group) as conn:
            # FindCoordinator v4+ answers several keys at once.
            found = await any_conn.request(
                ApiKey.FIND_COORDINATOR, {"key_type": 0, "coordinator_keys": [group, other]}, 4
            )
            assert [c["key"] for c in found["coordinators"]] == [group, other]
            assert all(c["error_code"] == E.NONE for c in found["coordinators"])
            txn = await any_conn.request(ApiKey.FIND_COORDINATOR, {"key": "t", "key_type": 1}, 2)
            assert txn["error_code"] == E.NONE and txn["node_id"] >= 0

            # v0 goes to the metadata store; later versions to __consumer_offsets.
            v0 = commit_body(group, "", -1, topic, 11)
            assert partition_error(await any_conn.request(ApiKey.OFFSET_COMMIT, v0, 0)) == 0
            fetch = {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0, 1]}]}
            old = await any_conn.request(ApiKey.OFFSET_FETCH, fetch, 0)
            assert [p["committed_offset"] for p in old["topics"][0]["partitions"]] == [11, -1]
            new = await retry_loading(lambda: conn.request(ApiKey.OFFSET_FETCH, fetch, 3))
            assert [p["committed_offset"] for p in new["topics"][0]["partitions"]] == [-1, -1]
            for g, offset in ((group, 21), (other, 31)):
                async with coordinator(bootstrap, g) as c:
                    body = commit_body(g, "", -1, topic, offset, "meta")
                    resp = await retry_loading(
                        lambda c=c, body=body: c.request(ApiKey.OFFSET_COMMIT, body, 9)
                    )
                    assert partition_error(resp) == E.NONE
            # OffsetFetch v8+: several groups, a null topic list meaning "everything".
            if found["coordinators"][0]["node_id"] == found["coordinators"][1]["node_id"]:
                multi = await conn.request(
                    ApiKey.OFFSET_FETCH,
                    {"groups": [{"group_id": group, "topics": None},
                                {"group_id": other, "topics": [{"name": topic,
                                                                "partition_indexes": [0]}]}]},
                    8,
                )  # fmt: skip
                got = {
                    g["group_id"]: [
                        (p["partition_index"], p["committed_offset"], p["metadata"])
                        for t in g["topics"]
                        for p in t["partitions"]
                    ]
                    for g in multi["groups"]
                }
                assert got == {group: [(0, 21, "meta")], other: [(0, 31, "meta")]}

            # ListGroups (with a state filter) and DescribeGroups of a commit-only group.
            listed = await conn.request(ApiKey.LIST_GROUPS, {"states_filter": ["Empty"]}, 4)
            assert {group, other} <= {g["group_id"] for g in listed["groups"]}
            assert all(g["group_state"] == "Empty" for g in listed["groups"])
            stable = await conn.request(ApiKey.LIST_GROUPS, {"states_filter": ["Stable"]}, 4)
            assert group not in {g["group_id"] for g in stable["groups"]}
            (d,) = (await conn.request(ApiKey.DESCRIBE_GROUPS, {"groups": [group]}, 0))["groups"]
            assert (d["group_state"], d["protocol_type"], d["members"]) == ("Empty", "", [])

            # OffsetDelete then DeleteGroups.
            deleted = await conn.request(
                ApiKey.OFFSET_DELETE,
                {"group_id": group, "topics": [{"name": topic, "partitions": [{"partition_index": 0}]},
                                               {"name": "nope", "partitions": [{"partition_index": 0}]}]},
                0,
            )  # fmt: skip
            assert deleted["error_code"] == E.NONE
            errors = {t["name"]: t["partitions"][0]["error_code"] for t in deleted["topics"]}
            assert errors == {topic: E.NONE, "nope": E.UNKNOWN_TOPIC_OR_PARTITION}
            # Without offsets left, the commit-only group is gone; the other one is deleted.
            gone = await conn.request(
                ApiKey.DELETE_GROUPS, {"groups_names": [other, group, "x-none"]}, 2
            )
            results = {r["group_id"]: r["error_code"] for r in gone["results"]}
            assert results == {
                other: E.NONE,
                group: E.GROUP_ID_NOT_FOUND,
                "x-none": E.GROUP_ID_NOT_FOUND,
            }
            described = await conn.request(ApiKey.DESCRIBE_GROUPS, {"groups": [group, other]}, 5)
            assert [g["group_state"] for g in described["groups"]] == ["Dead", "Dead"]
            after = await conn.request(ApiKey.OFFSET_FETCH, dict(fetch, group_id=other), 5)
            assert [p["committed_offset"] for p in after["topics"][0]["partitions"]] == [-1, -1]

    asyncio.run(main())
