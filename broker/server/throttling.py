"""Client quotas on the request path: what to record, the throttle time, when to answer.

Like Kafka, a client over a quota gets no error: its response carries `throttle_time_ms` and its
connection reads no further request for that long. Clients that honour the field (KIP-219, the
response versions in `_CLIENT_THROTTLES_FROM`) get the response at once; older ones get it only
when the throttle is over, so the delay itself slows them down.

Request quotas count the time the broker spends working on a request, not the time it waits
(fetch long polls, acks=all, rebalances): see broker/wait_time.py.
"""

from __future__ import annotations

import time
from typing import Any

from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.messages import REGISTRY
from ..quotas.manager import QuotaKind, QuotaManager
from .fetch_session import FINAL_EPOCH, INITIAL_EPOCH, FetchSessionCache

# The first response version whose clients throttle themselves (Kafka's shouldClientThrottle).
# APIs added after KIP-219 are not listed: every version of them does.
_CLIENT_THROTTLES_FROM = {
    ApiKey.PRODUCE: 6,
    ApiKey.FETCH: 8,
    ApiKey.LIST_OFFSETS: 3,
    ApiKey.METADATA: 6,
    ApiKey.OFFSET_COMMIT: 4,
    ApiKey.OFFSET_FETCH: 4,
    ApiKey.FIND_COORDINATOR: 2,
    ApiKey.JOIN_GROUP: 3,
    ApiKey.HEARTBEAT: 2,
    ApiKey.LEAVE_GROUP: 2,
    ApiKey.SYNC_GROUP: 2,
    ApiKey.DESCRIBE_GROUPS: 2,
    ApiKey.LIST_GROUPS: 2,
    ApiKey.API_VERSIONS: 2,
    ApiKey.CREATE_TOPICS: 3,
    ApiKey.DELETE_TOPICS: 2,
    ApiKey.DELETE_RECORDS: 1,
    ApiKey.INIT_PRODUCER_ID: 1,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: 2,
    ApiKey.ADD_PARTITIONS_TO_TXN: 1,
    ApiKey.ADD_OFFSETS_TO_TXN: 1,
    ApiKey.END_TXN: 1,
    ApiKey.TXN_OFFSET_COMMIT: 1,
    ApiKey.DESCRIBE_ACLS: 1,
    ApiKey.CREATE_ACLS: 1,
    ApiKey.DELETE_ACLS: 1,
    ApiKey.DESCRIBE_CONFIGS: 2,
    ApiKey.ALTER_CONFIGS: 1,
    ApiKey.ALTER_REPLICA_LOG_DIRS: 1,
    ApiKey.DESCRIBE_LOG_DIRS: 1,
    ApiKey.SASL_AUTHENTICATE: 1,
    ApiKey.CREATE_PARTITIONS: 1,
    ApiKey.CREATE_DELEGATION_TOKEN: 1,
    ApiKey.RENEW_DELEGATION_TOKEN: 1,
    ApiKey.EXPIRE_DELEGATION_TOKEN: 1,
    ApiKey.DESCRIBE_DELEGATION_TOKEN: 1,
    ApiKey.DELETE_GROUPS: 1,
}

# Requests between brokers (and the SASL exchange) are never throttled by request quotas.
_EXEMPT = frozenset(
    {
        ApiKey.LEADER_AND_ISR,
        ApiKey.STOP_REPLICA,
        ApiKey.UPDATE_METADATA,
        ApiKey.CONTROLLED_SHUTDOWN,
        ApiKey.WRITE_TXN_MARKERS,
        ApiKey.ALTER_PARTITION,
        ApiKey.ALLOCATE_PRODUCER_IDS,
        ApiKey.SASL_HANDSHAKE,
        ApiKey.SASL_AUTHENTICATE,
    }
)


def has_throttle_field(api_key: int, version: int) -> bool:
    api = REGISTRY.get(api_key)
    if api is None:
        return False
    return any(f.name == "throttle_time_ms" and version in f.versions for f in api.response)


def client_throttles(api_key: int, version: int) -> bool:
    """True when the client waits out `throttle_time_ms` itself (answer now, then mute)."""
    if not has_throttle_field(api_key, version):
        return False
    return version >= _CLIENT_THROTTLES_FROM.get(api_key, 0)


# The first versions whose clients are refused, not slowed, over a mutation quota (KIP-599).
_STRICT_MUTATIONS_FROM = {
    ApiKey.CREATE_TOPICS: 6,
    ApiKey.CREATE_PARTITIONS: 3,
    ApiKey.DELETE_TOPICS: 5,
}
THROTTLING_MESSAGE = "The throttling quota has been exceeded."


class MutationQuota:
    """The controller-mutation quota of one CreateTopics, CreatePartitions or DeleteTopics
    request: called with the partitions one topic creates or deletes, right before the change
    is made; raises THROTTLING_QUOTA_EXCEEDED for a topic that must not be changed."""

    def __init__(
        self,
        quotas: QuotaManager | None,
        principal: str,
        client_id: str,
        api_key: int,
        version: int,
    ) -> None:
        self.quotas = quotas
        self.principal = principal
        self.client_id = client_id
        self.strict = version >= _STRICT_MUTATIONS_FROM[api_key]
        self.throttle_ms = 0

    def __call__(self, partitions: int) -> None:
        if self.quotas is None:
            return
        admitted, throttle = self.quotas.record_mutations(
            self.principal, self.client_id, partitions, time.monotonic() * 1000.0,
            strict=self.strict,
        )  # fmt: skip
        self.throttle_ms = max(self.throttle_ms, throttle)
        if not admitted:
            raise KafkaError(ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLING_MESSAGE)


def records_size(records: Any) -> int:
    """Bytes of a records field: bytes, a memoryview, or a file region (sendfile)."""
    if records is None:
        return 0
    return records.size if hasattr(records, "fileno") else len(records)


def produce_bytes(request: dict[str, Any]) -> int:
    return sum(
        records_size(p.get("records"))
        for t in request.get("topic_data", [])
        for p in t.get("partition_data", [])
    )


def fetch_bytes(response: dict[str, Any]) -> int:
    return sum(
        records_size(p.get("records"))
        for t in response.get("responses", [])
        for p in t.get("partitions", [])
    )


def is_follower_fetch(version: int, request: dict[str, Any]) -> bool:
    if version >= 15:
        return (request.get("replica_state") or {}).get("replica_id", -1) >= 0
    return request.get("replica_id", -1) >= 0


def limit_fetch(
    quotas: QuotaManager, principal: str, client_id: str, version: int, request: dict[str, Any]
) -> None:
    """Cap a consumer fetch at what its byte-rate quota admits in one quota window (Kafka
    does the same), so a throttled, emptied fetch can succeed once the throttle is over."""
    if is_follower_fetch(version, request):
        return
    bound = quotas.quota(principal, client_id, QuotaKind.FETCH)
    if bound is None:
        return
    settings = quotas.settings
    window_bytes = max(int(bound * (settings.samples - 1) * settings.window_seconds), 1)
    if "max_bytes" in request:
        request["max_bytes"] = min(request["max_bytes"], window_bytes)
    request["min_bytes"] = min(request.get("min_bytes", 0), window_bytes)


def apply_quotas(
    quotas: QuotaManager,
    fetch_sessions: FetchSessionCache | None,
    principal: str,
    client_id: str,
    api_key: int,
    version: int,
    request: dict[str, Any],
    response: dict[str, Any] | None,
    busy_ns: int,
    now_ms: float,
) -> int:
    """Record this request against its quotas; return the throttle time (0: none).

    Puts the time in the response's `throttle_time_ms`; a throttled consumer fetch is answered
    empty (and its bytes unrecorded), as Kafka does, so throttled data is fetched again later
    (and its new fetch session, if it opened one, dropped from `fetch_sessions`)."""
    if api_key in _EXEMPT:
        return 0
    follower = api_key == ApiKey.FETCH and is_follower_fetch(version, request)
    if follower:
        return 0
    bandwidth = 0
    if api_key == ApiKey.PRODUCE:
        bandwidth = quotas.record_and_get_throttle_ms(
            principal, client_id, QuotaKind.PRODUCE, produce_bytes(request), now_ms
        )
    fetched = 0
    if api_key == ApiKey.FETCH and response is not None:
        fetched = fetch_bytes(response)
        bandwidth = quotas.record_and_get_throttle_ms(
            principal, client_id, QuotaKind.FETCH, fetched, now_ms
        )
    request_time = quotas.record_and_get_throttle_ms(
        principal, client_id, QuotaKind.REQUEST, busy_ns, now_ms
    )
    # A handler may have set one already (controller mutations); the longest applies.
    handler = response.get("throttle_time_ms", 0) if response is not None else 0
    throttle = max(bandwidth, request_time, handler)
    if throttle <= 0:
        return 0
    if response is not None:
        if api_key == ApiKey.FETCH:
            _empty_fetch(
                quotas, fetch_sessions, principal, client_id, request, response, fetched, now_ms
            )
        if has_throttle_field(api_key, version):
            response["throttle_time_ms"] = throttle
    return throttle


def _empty_fetch(
    quotas: QuotaManager,
    fetch_sessions: FetchSessionCache | None,
    principal: str,
    client_id: str,
    request: dict[str, Any],
    response: dict[str, Any],
    fetched: int,
    now_ms: float,
) -> None:
    if response.get("error_code", 0):
        return
    if fetched:
        quotas.record_and_get_throttle_ms(principal, client_id, QuotaKind.FETCH, -fetched, now_ms)
    response["responses"] = []
    session_id = response.get("session_id", 0)
    if session_id and request.get("session_epoch", FINAL_EPOCH) == INITIAL_EPOCH:
        # Kafka creates no session for a throttled full fetch: the client starts over.
        if fetch_sessions is not None:
            fetch_sessions.remove(session_id)
        response["session_id"] = 0
