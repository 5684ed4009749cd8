"""What every area of the admin client builds on: the cluster, the operation timeout, and the
ways a request is routed (controller, any broker, every broker, a coordinator)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Self, Unpack

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ..cluster import (
    ClusterUser,
    ConnectionOptions,
    TopicPartition,
    error_of,
    partitions_by_topic,
)


def partition_indexes(partitions: Iterable[TopicPartition] | None) -> list[dict] | None:
    """The `topics` of a request naming partitions as (name, partition_indexes); None (every
    topic) stays None."""
    if partitions is None:
        return None
    return [
        {"name": t, "partition_indexes": ps} for t, ps in partitions_by_topic(partitions).items()
    ]


class AdminBase(ClusterUser):
    """The state the admin mixins share; AdminClient (in this package) assembles them."""

    default_client_id = "odradek-admin"

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] | None = None,
        *,
        operation_timeout: float = 30.0,
        retry_timeout: float = 30.0,
        **connection: Unpack[ConnectionOptions],
    ) -> None:
        super().__init__(bootstrap_servers, connection, retry_timeout=retry_timeout)
        self.operation_timeout = operation_timeout

    async def start(self) -> Self:
        # A shared cluster is started too: the admin client's first call needs the brokers.
        await self.cluster.start()
        return self

    @property
    def _timeout_ms(self) -> int:
        return int(self.operation_timeout * 1000)

    async def _controller_request(self, api_key: int, body: dict, what: str) -> dict:
        """A request to the controller whose top-level error is raised (NOT_CONTROLLER also
        marks the metadata stale, so a retry finds the new controller)."""
        resp = await self.cluster.request_controller(api_key, body)
        error = error_of(resp["error_code"], resp.get("error_message"), what)
        if error is not None:
            if error.code == ErrorCode.NOT_CONTROLLER:
                self.cluster.mark_stale()
            raise error
        return resp

    async def _request_any(
        self, api_key: int, body: dict, what: str, *, min_version: int = 0
    ) -> dict:
        """A request any broker can answer, retried; its top-level error is raised."""
        resp = await self.cluster.retry(
            lambda: self.cluster.request_any(api_key, body, min_version=min_version), what=what
        )
        error = error_of(resp["error_code"], resp.get("error_message"), what)
        if error is not None:
            raise error
        return resp

    async def _request_each_broker(
        self, api_key: int, body: dict, *, min_version: int, what: str
    ) -> list[tuple[int, dict]]:
        """The same request to every broker (listings each coordinator answers for itself),
        each retried on its own; a top-level error is raised."""
        await self.cluster.retry(lambda: self.cluster.refresh_metadata([]), what="Metadata")
        out: list[tuple[int, dict]] = []
        for node_id in sorted(self.cluster.brokers):

            async def attempt(n: int = node_id) -> dict:
                conn = await self.cluster.connection(n)
                version = conn.version_for(api_key, min_version=min_version)
                resp = await conn.request(api_key, body, version)
                error = error_of(resp["error_code"], None, f"{what} on broker {n}")
                if error is not None:
                    raise error
                return resp

            out.append((node_id, await self.cluster.retry(attempt, what=what)))
        return out

    async def _find_coordinator(self, key: str, key_type: int, what: str) -> int:
        """Node id of the coordinator of a group (key_type 0) or transactional id (1), retried
        while none is available yet."""

        async def attempt() -> int:
            conn = await self.cluster.any_connection()
            version = conn.version_for(ApiKey.FIND_COORDINATOR, min_version=1 if key_type else 0)
            if version >= 4:
                body = {"key_type": key_type, "coordinator_keys": [key]}
                result = (await conn.request(ApiKey.FIND_COORDINATOR, body, version))[
                    "coordinators"
                ][0]
            else:
                body = {"key": key, "key_type": key_type}
                result = await conn.request(ApiKey.FIND_COORDINATOR, body, version)
            error = error_of(result["error_code"], result.get("error_message"), what)
            if error is not None:
                raise error
            if result["node_id"] not in self.cluster.brokers:
                await self.cluster.refresh_metadata([])
            return result["node_id"]

        return await self.cluster.retry(attempt, what="FindCoordinator")
