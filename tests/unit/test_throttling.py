"""Quota enforcement on the request path (broker/server/throttling.py), without sockets."""

from __future__ import annotations

import asyncio
import time

import pytest
from odradek.broker.protocol.api_keys import ApiKey
from odradek.broker.quotas.config import CLIENT_ID, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE
from odradek.broker.quotas.manager import QuotaManager
from odradek.broker.server.throttling import apply_quotas, client_throttles
from odradek.broker.wait_time import metered, waiting


def test_waits_are_metered_once_even_when_they_overlap() -> None:
    """A request parks 0.2 s in two concurrent waits (acks=all on two partitions) and works
    0.02 s: the meter sees the 0.2 s once, and the work stays outside it."""

    async def wait(seconds: float) -> None:
        with waiting():
            await asyncio.sleep(seconds)

    async def handler() -> tuple[int, int]:
        with metered() as meter:
            parked = time.perf_counter_ns()
            await asyncio.gather(wait(0.2), wait(0.15))  # tasks inherit the meter
            parked = time.perf_counter_ns() - parked
            start = time.perf_counter()
            while time.perf_counter() - start < 0.02:
                pass  # work the broker does
        return meter.ns, parked

    started = time.perf_counter_ns()
    waited, parked = asyncio.run(handler())
    wall = time.perf_counter_ns() - started
    assert 0.2e9 <= waited <= parked  # counted once: never more than the time it was parked
    assert wall - waited >= 0.02e9


def test_waits_outside_a_request_and_failing_waits() -> None:
    async def run() -> int:
        with waiting():  # no request: nothing to meter, and no error
            await asyncio.sleep(0)
        with metered() as meter:
            with pytest.raises(TimeoutError):
                with waiting():
                    await asyncio.sleep(0.05)
                    raise TimeoutError
        return meter.ns

    assert asyncio.run(run()) >= 0.05e9


def test_which_responses_the_client_waits_out_itself() -> None:
    assert client_throttles(ApiKey.PRODUCE, 9)
    assert not client_throttles(ApiKey.PRODUCE, 5)  # has the field; the broker delays it
    assert not client_throttles(ApiKey.PRODUCE, 0)  # no field at all
    assert client_throttles(ApiKey.FETCH, 8)
    assert not client_throttles(ApiKey.FETCH, 7)
    assert client_throttles(ApiKey.DESCRIBE_CLIENT_QUOTAS, 0)  # newer than KIP-219


def _produce(size: int) -> dict:
    return {"topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"x" * size}]}]}


def test_produce_over_its_byte_rate_gets_a_throttle_time_and_no_error() -> None:
    quotas = QuotaManager()
    quotas.cache.set(((CLIENT_ID, "app"),), {PRODUCER_BYTE_RATE: 1000.0})
    response = {"responses": [], "throttle_time_ms": 0}
    args = ("User:ANONYMOUS", "app", ApiKey.PRODUCE, 9)
    # 10 s of samples at 1000 B/s admit 10 000 bytes before throttling
    assert apply_quotas(quotas, None, *args, _produce(9000), response, 0, 0.0) == 0
    throttle = apply_quotas(quotas, None, *args, _produce(2000), response, 0, 10.0)
    assert throttle > 0
    assert response["throttle_time_ms"] == throttle
    # another client id shares nothing
    other = {"responses": [], "throttle_time_ms": 0}
    free = ("User:ANONYMOUS", "other", ApiKey.PRODUCE, 9)
    assert apply_quotas(quotas, None, *free, _produce(20000), other, 0, 20.0) == 0
    assert other["throttle_time_ms"] == 0


def test_request_percentage_counts_handler_time_and_exempts_broker_requests() -> None:
    quotas = QuotaManager()
    quotas.cache.set(((CLIENT_ID, "app"),), {REQUEST_PERCENTAGE: 1.0})
    busy = int(2e9)  # 2 s of work: 20% over 10 s of samples
    response = {"throttle_time_ms": 0}
    args = ("User:ANONYMOUS", "app", ApiKey.METADATA, 9)
    throttle = apply_quotas(quotas, None, *args, {}, response, busy, 0.0)
    assert 0 < throttle <= 1000  # bounded to one quota window, like Kafka
    assert response["throttle_time_ms"] == throttle
    exempt = ("User:ANONYMOUS", "app", ApiKey.UPDATE_METADATA, 8)
    assert apply_quotas(quotas, None, *exempt, {}, {}, busy, 0.0) == 0
