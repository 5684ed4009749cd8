"""Offsets and records of partitions, sent to each partition's leader: ListOffsets and
DeleteRecords."""

from __future__ import annotations

from collections.abc import Mapping

from ...protocol.api_keys import ApiKey
from ...protocol.errors import KafkaError
from ..cluster import TopicPartition, error_of, group_by_topic, unwrap
from ..connection import BrokerConnection
from ..offsets import OFFSET_SPEC_MIN_VERSION, ListedOffset, list_offsets
from .base import AdminBase


class RecordsAdmin(AdminBase):
    async def list_offsets(
        self,
        specs: Mapping[TopicPartition, int],
        *,
        isolation_level: int = 0,
    ) -> dict[TopicPartition, ListedOffset]:
        """Offsets by OffsetSpec (EARLIEST, LATEST, MAX_TIMESTAMP) or timestamp (ms), sent to
        each partition's leader. A timestamp later than every record gives offset -1."""
        min_version = max(
            (OFFSET_SPEC_MIN_VERSION.get(int(ts), 0) for ts in specs.values()), default=0
        )
        if isolation_level:
            min_version = max(min_version, 2)
        return await list_offsets(self.cluster, specs, isolation_level, min_version=min_version)

    async def delete_records(
        self, before: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int]:
        """Delete records below the given offsets (-1: the high watermark); returns each
        partition's new low watermark."""

        async def send(
            conn: BrokerConnection, part: dict[TopicPartition, int]
        ) -> dict[TopicPartition, int | KafkaError]:
            topics = group_by_topic(
                (tp, {"partition_index": tp.partition, "offset": off}) for tp, off in part.items()
            )
            body = {
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
                "timeout_ms": self._timeout_ms,
            }
            resp = await conn.request(ApiKey.DELETE_RECORDS, body)
            out: dict[TopicPartition, int | KafkaError] = {}
            for t in resp["topics"]:
                for p in t["partitions"]:
                    tp = TopicPartition(t["name"], p["partition_index"])
                    error = error_of(p["error_code"], None, f"partition {tp}")
                    out[tp] = error if error is not None else p["low_watermark"]
            return out

        outcome = await self.cluster.route_to_leaders(before, send, what="DeleteRecords")
        return unwrap(outcome)
