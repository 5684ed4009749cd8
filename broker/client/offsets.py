"""ListOffsets as the admin client and the consumer both send it: by partition leader, one
request per broker, for special offsets (OffsetSpec) or timestamps."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum

from ..protocol.api_keys import ApiKey
from ..protocol.errors import KafkaError
from .cluster import ClusterClient, TopicPartition, error_of, group_by_topic, unwrap
from .connection import BrokerConnection

__all__ = ["ListedOffset", "OffsetSpec", "list_offsets"]


class OffsetSpec(IntEnum):
    """Special timestamps for list_offsets; any other int is a timestamp in ms."""

    LATEST = -1
    EARLIEST = -2
    MAX_TIMESTAMP = -3
    EARLIEST_LOCAL = -4
    LATEST_TIERED = -5


# ListOffsets version needed for each special timestamp.
OFFSET_SPEC_MIN_VERSION = {
    OffsetSpec.MAX_TIMESTAMP: 7,
    OffsetSpec.EARLIEST_LOCAL: 8,
    OffsetSpec.LATEST_TIERED: 9,
}


@dataclass(slots=True)
class ListedOffset:
    offset: int
    timestamp: int = -1
    leader_epoch: int = -1


async def list_offsets(
    cluster: ClusterClient,
    specs: Mapping[TopicPartition, int],
    isolation_level: int = 0,
    *,
    min_version: int = 0,
    wait_for_topics: bool = False,
) -> dict[TopicPartition, ListedOffset]:
    """Offsets of `specs` from each partition's leader; raises the first partition's error."""

    async def send(
        conn: BrokerConnection, part: dict[TopicPartition, int]
    ) -> dict[TopicPartition, ListedOffset | KafkaError]:
        return await _list_offsets_request(conn, part, isolation_level, min_version)

    outcome = await cluster.route_to_leaders(
        specs, send, what="ListOffsets", wait_for_topics=wait_for_topics
    )
    return unwrap(outcome)


async def _list_offsets_request(
    conn: BrokerConnection,
    part: Mapping[TopicPartition, int],
    isolation_level: int = 0,
    min_version: int = 0,
) -> dict[TopicPartition, ListedOffset | KafkaError]:
    """One ListOffsets request to a leader; per-partition results or errors."""
    version = conn.version_for(ApiKey.LIST_OFFSETS, min_version=min_version)
    topics = group_by_topic(
        (tp, {"partition_index": tp.partition, "timestamp": int(ts), "max_num_offsets": 1})
        for tp, ts in part.items()
    )
    body = {
        "replica_id": -1,
        "isolation_level": isolation_level,
        "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()],
    }
    resp = await conn.request(ApiKey.LIST_OFFSETS, body, version)
    out: dict[TopicPartition, ListedOffset | KafkaError] = {}
    for t in resp["topics"]:
        for p in t["partitions"]:
            tp = TopicPartition(t["name"], p["partition_index"])
            error = error_of(p["error_code"], None, f"partition {tp}")
            if error is not None:
                out[tp] = error
            elif version == 0:
                olds = p["old_style_offsets"]
                out[tp] = ListedOffset(olds[0] if olds else -1)
            else:
                out[tp] = ListedOffset(p["offset"], p["timestamp"], p["leader_epoch"])
    return out
