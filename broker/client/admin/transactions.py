"""Transactions: the transactional ids every coordinator knows, and the state of each one
(ListTransactions, DescribeTransactions)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...protocol.api_keys import ApiKey
from ..cluster import TopicPartition, error_of
from .base import AdminBase


@dataclass(frozen=True, slots=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str
    coordinator: int


@dataclass(slots=True)
class TransactionDescription:
    transactional_id: str
    coordinator: int
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time_ms: int  # -1: no transaction started yet
    partitions: list[TopicPartition]


class TransactionsAdmin(AdminBase):
    async def find_transaction_coordinator(self, transactional_id: str) -> int:
        """Node id of the transactional id's coordinator (retried while none is available)."""
        return await self._find_coordinator(
            transactional_id, 1, f"transactional id {transactional_id!r}"
        )

    async def list_transactions(
        self,
        states: Sequence[str] | None = None,
        producer_ids: Sequence[int] | None = None,
        min_duration_ms: int = -1,
    ) -> list[TransactionListing]:
        """The transactional ids every broker coordinates, optionally only those in `states`,
        of `producer_ids`, or open longer than `min_duration_ms`."""
        body = {
            "state_filters": list(states or []),
            "producer_id_filters": list(producer_ids or []),
            "duration_filter": min_duration_ms,
        }
        answers = await self._request_each_broker(
            ApiKey.LIST_TRANSACTIONS,
            body,
            min_version=1 if min_duration_ms >= 0 else 0,
            what="ListTransactions",
        )
        found = [
            TransactionListing(
                t["transactional_id"], t["producer_id"], t["transaction_state"], node_id
            )
            for node_id, resp in answers
            for t in resp["transaction_states"]
        ]
        return sorted(found, key=lambda t: t.transactional_id)

    async def describe_transactions(
        self, transactional_ids: Sequence[str]
    ) -> dict[str, TransactionDescription]:
        """State, producer, timeout and partitions of each transactional id, from its
        coordinator."""
        out: dict[str, TransactionDescription] = {}
        for txn_id in dict.fromkeys(transactional_ids):

            async def attempt(txn_id: str = txn_id) -> TransactionDescription:
                node = await self.find_transaction_coordinator(txn_id)
                resp = await self.cluster.request_node(
                    node, ApiKey.DESCRIBE_TRANSACTIONS, {"transactional_ids": [txn_id]}
                )
                (t,) = resp["transaction_states"]
                error = error_of(t["error_code"], None, f"transactional id {txn_id!r}")
                if error is not None:
                    raise error
                return TransactionDescription(
                    txn_id,
                    node,
                    t["transaction_state"],
                    t["producer_id"],
                    t["producer_epoch"],
                    t["transaction_timeout_ms"],
                    t["transaction_start_time_ms"],
                    sorted(
                        TopicPartition(topic["topic"], p)
                        for topic in t["topics"]
                        for p in topic["partitions"]
                    ),
                )

            out[txn_id] = await self.cluster.retry(attempt, what="DescribeTransactions")
        return out
