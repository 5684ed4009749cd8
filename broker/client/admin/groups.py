"""Consumer groups: list, describe, delete, and their committed offsets, each sent to the
group's coordinator (found again when it moved or is still loading)."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode, KafkaError
from ..cluster import TopicPartition, error_of, raise_first
from .base import AdminBase, partition_indexes


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    protocol_type: str  # "consumer" for consumer groups, "" for commit-only groups
    state: str  # "" from brokers without ListGroups v4


@dataclass(slots=True)
class GroupMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: list[TopicPartition]


@dataclass(slots=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[GroupMember]


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    offset: int  # -1: nothing committed
    leader_epoch: int = -1
    metadata: str | None = ""


# Coordinator moved, not there yet, or still loading: find it again and retry.
_COORDINATOR_ERRORS = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    }
)


def _group_error_code(resp: dict) -> int:
    """The coordinator-level error of a group response (first group / top level)."""
    if resp.get("groups"):
        return resp["groups"][0].get("error_code", 0)
    if resp.get("results"):
        return resp["results"][0].get("error_code", 0)
    return resp.get("error_code", 0)


def parse_consumer_assignment(data: bytes | memoryview | None) -> list[TopicPartition]:
    """Partitions of a ConsumerProtocolAssignment (any version begins with them); [] when
    empty or unreadable."""
    if not data or len(data) < 6:
        return []
    buf = bytes(data)
    out: list[TopicPartition] = []
    try:
        pos = 2
        (n_topics,) = struct.unpack_from(">i", buf, pos)
        pos += 4
        for _ in range(max(n_topics, 0)):
            (n,) = struct.unpack_from(">h", buf, pos)
            pos += 2
            topic = buf[pos : pos + n].decode()
            pos += n
            (n_parts,) = struct.unpack_from(">i", buf, pos)
            pos += 4
            parts = struct.unpack_from(f">{max(n_parts, 0)}i", buf, pos)
            pos += 4 * max(n_parts, 0)
            out.extend(TopicPartition(topic, p) for p in parts)
    except (struct.error, UnicodeDecodeError):
        return []
    return out


class GroupsAdmin(AdminBase):
    async def find_group_coordinator(self, group_id: str) -> int:
        """Node id of the group's coordinator (retried while none is available yet)."""
        return await self._find_coordinator(group_id, 0, f"group {group_id!r}")

    async def _group_request(self, group_id: str, api_key: int, body: dict, what: str) -> dict:
        """Send to the group's coordinator, finding it again when it moved or was loading."""

        async def attempt() -> dict:
            node = await self.find_group_coordinator(group_id)
            resp = await self.cluster.request_node(node, api_key, body)
            code = _group_error_code(resp)
            if code in _COORDINATOR_ERRORS:
                raise KafkaError(code, f"group {group_id!r}")
            return resp

        return await self.cluster.retry(attempt, what=what)

    async def list_groups(self, states: Sequence[str] | None = None) -> list[GroupListing]:
        """Groups of every broker's coordinator, optionally only those in `states`."""
        found: dict[str, GroupListing] = {}
        answers = await self._request_each_broker(
            ApiKey.LIST_GROUPS,
            {"states_filter": list(states or []), "types_filter": []},
            min_version=4 if states else 0,
            what="ListGroups",
        )
        for _, resp in answers:
            for g in resp["groups"]:
                found[g["group_id"]] = GroupListing(
                    g["group_id"], g["protocol_type"], g.get("group_state", "")
                )
        return [found[g] for g in sorted(found)]

    async def describe_groups(self, group_ids: Sequence[str]) -> dict[str, GroupDescription]:
        """State, protocol and members (with their decoded assignments) of each group."""
        out: dict[str, GroupDescription] = {}
        for group_id in dict.fromkeys(group_ids):
            resp = await self._group_request(
                group_id,
                ApiKey.DESCRIBE_GROUPS,
                {"groups": [group_id], "include_authorized_operations": False},
                "DescribeGroups",
            )
            (g,) = resp["groups"]
            error = error_of(g["error_code"], None, f"group {group_id!r}")
            if error is not None:
                raise error
            consumer = g["protocol_type"] == "consumer"
            members = [
                GroupMember(
                    m["member_id"],
                    m.get("group_instance_id"),
                    m["client_id"],
                    m["client_host"],
                    parse_consumer_assignment(m["member_assignment"]) if consumer else [],
                )
                for m in g["members"]
            ]
            out[group_id] = GroupDescription(
                group_id, g["group_state"], g["protocol_type"], g["protocol_data"], members
            )
        return out

    async def delete_groups(
        self, group_ids: Sequence[str], *, raise_errors: bool = True
    ) -> dict[str, KafkaError | None]:
        """Delete empty groups and their committed offsets."""
        out: dict[str, KafkaError | None] = {}
        for group_id in dict.fromkeys(group_ids):
            resp = await self._group_request(
                group_id, ApiKey.DELETE_GROUPS, {"groups_names": [group_id]}, "DeleteGroups"
            )
            (r,) = resp["results"]
            out[group_id] = error_of(r["error_code"], None, f"group {group_id!r}")
        if raise_errors:
            raise_first(out.values())
        return out

    async def list_consumer_group_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition] | None = None
    ) -> dict[TopicPartition, CommittedOffset]:
        """Committed offsets of a group (all of them when `partitions` is None)."""
        wanted = partition_indexes(partitions)
        body = {
            "group_id": group_id,
            "topics": wanted,
            "groups": [{"group_id": group_id, "topics": wanted}],
            "require_stable": False,
        }
        resp = await self._group_request(group_id, ApiKey.OFFSET_FETCH, body, "OffsetFetch")
        result = resp["groups"][0] if "groups" in resp and resp["groups"] else resp
        error = error_of(result.get("error_code", 0), None, f"group {group_id!r}")
        if error is not None:
            raise error
        out: dict[TopicPartition, CommittedOffset] = {}
        for t in result["topics"]:
            for p in t["partitions"]:
                tp = TopicPartition(t["name"], p["partition_index"])
                error = error_of(p["error_code"], None, f"group {group_id!r} partition {tp}")
                if error is not None:
                    raise error
                out[tp] = CommittedOffset(
                    p["committed_offset"], p.get("committed_leader_epoch", -1), p["metadata"]
                )
        return out
