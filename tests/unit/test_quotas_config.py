"""Quota entities, validation, storage at Kafka's paths, and the precedence of quota levels."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from odradek.broker.cluster.embedded_store import EmbeddedStore
from odradek.broker.cluster.kafka_zk import KafkaZk
from odradek.broker.quotas import config as qc
from odradek.broker.quotas.manager import QuotaKind, QuotaManager, QuotaSettings
from odradek.broker.quotas.rate import SampledRate, TokenBucket, throttle_time_ms, token_throttle_ms

P = qc.PRODUCER_BYTE_RATE


def test_entity_validation() -> None:
    assert qc.entity_path(qc.make_entity([("user", "a b")])) == ("users", "a%20b")
    assert qc.entity_path(qc.make_entity([("client-id", "c"), ("user", None)])) == (
        "users",
        "<default>/clients/c",
    )
    for bad in ([("user", "a"), ("user", "b")], [("ip", "1.2.3.4"), ("user", "a")], [("x", "y")]):
        with pytest.raises(qc.InvalidQuotaError):
            qc.make_entity(bad)
    entity = qc.make_entity([("user", "a")])
    for ops in ([("nope", 1.0)], [(P, 1.5)], [(P, -1.0)]):
        with pytest.raises(qc.InvalidQuotaError):
            qc.validate_ops(entity, ops)
    qc.validate_ops(entity, [(P, 1024.0), (qc.REQUEST_PERCENTAGE, 12.5)])


def test_storage_keeps_other_keys_and_notifies(tmp_path: Path) -> None:
    store = EmbeddedStore(str(tmp_path / "meta"))
    try:
        zkc = KafkaZk(store)
        zkc.create_top_level_paths()
        zkc.set_entity_config("users", "alice", {"SCRAM-SHA-256": "salt=x"})
        qc.alter_quotas(zkc, qc.make_entity([("user", "alice")]), {P: 1024.0})
        qc.alter_quotas(zkc, qc.make_entity([("user", "alice"), ("client-id", None)]), {P: 5.0})
        qc.alter_quotas(zkc, qc.make_entity([("client-id", "app")]), {qc.CONSUMER_BYTE_RATE: 9.0})
        assert json.loads(store.get("/config/users/alice")[0])["config"] == {
            "SCRAM-SHA-256": "salt=x",
            P: "1024",
        }
        assert store.exists("/config/users/alice/clients/<default>") is not None
        changes = [
            store.get(f"/config/changes/{c}")[0] for c in store.get_children("/config/changes")
        ]
        assert b'"entity_path":"users/alice/clients/<default>"' in b"".join(changes)
        everything = qc.all_quotas(zkc)
        assert everything[(("user", "alice"),)] == {P: 1024.0}
        comps = [qc.Component("user", qc.MatchType.EXACT, "alice")]
        assert len(qc.describe_quotas(zkc, comps, strict=False)) == 2
        assert list(qc.describe_quotas(zkc, comps, strict=True)) == [(("user", "alice"),)]
        default_client = [qc.Component("client-id", qc.MatchType.DEFAULT)]
        assert list(qc.describe_quotas(zkc, default_client, strict=False)) == [
            (("client-id", None), ("user", "alice"))
        ]
        qc.alter_quotas(zkc, qc.make_entity([("user", "alice")]), {P: None})
        assert (("user", "alice"),) not in qc.all_quotas(zkc)
        cache = qc.QuotaConfigCache()
        cache.load(zkc)
        assert cache.find("alice", "x", P) == (5.0, ("alice", "x"))
    finally:
        store.close()


def test_precedence() -> None:
    cache = qc.QuotaConfigCache()
    levels = [
        ([("user", "u"), ("client-id", "c")], ("u", "c")),
        ([("user", "u"), ("client-id", None)], ("u", "c")),
        ([("user", "u")], ("u", "")),
        ([("user", None), ("client-id", "c")], ("u", "c")),
        ([("user", None), ("client-id", None)], ("u", "c")),
        ([("user", None)], ("u", "")),
        ([("client-id", "c")], ("", "c")),
        ([("client-id", None)], ("", "c")),
    ]
    for i, (comps, _) in enumerate(levels):
        cache.set(qc.make_entity(comps), {P: float(i + 1)})
    for i, (comps, group) in enumerate(levels):
        assert cache.find("u", "c", P) == (float(i + 1), group)
        cache.set(qc.make_entity(comps), {})
    assert cache.find("u", "c", P) is None


def test_every_update_moves_the_version() -> None:
    """What callers key a kept answer on: any set or reload changes it."""
    cache = qc.QuotaConfigCache()
    seen = [cache.version]
    cache.set(qc.make_entity([("client-id", "c")]), {P: 1.0})
    seen.append(cache.version)
    cache.set(qc.make_entity([("client-id", "c")]), {})
    seen.append(cache.version)
    cache.replace_all({qc.make_entity([("user", "u")]): {P: 2.0}})
    seen.append(cache.version)
    assert len(set(seen)) == len(seen)


def test_sampled_rate_and_throttle_math() -> None:
    rate = SampledRate(samples=11, window_ms=1000)
    rate.record(10_000, 0)
    # A first burst is spread over at least (samples - 1) windows.
    assert rate.window_size_ms(0) == 10_000
    assert rate.rate(0) == 1000.0
    assert throttle_time_ms(rate.rate(0), 500.0, rate.window_size_ms(0)) == 10_000
    assert throttle_time_ms(400.0, 500.0, 10_000) == 0
    rate.record(10_000, 12_500)  # the old sample has expired
    assert rate.rate(12_500) == 1000.0


def test_manager_throttles_over_quota_only() -> None:
    manager = QuotaManager()
    manager.cache.set(qc.make_entity([("client-id", "app")]), {P: 1000.0})
    assert manager.record_and_get_throttle_ms("User:ANONYMOUS", "other", "producer_byte_rate",
                                              10**9, 0) == 0  # fmt: skip
    assert manager.record_and_get_throttle_ms("User:a", "app", "producer_byte_rate", 5000, 0) == 0
    assert manager.record_and_get_throttle_ms("User:b", "app", "producer_byte_rate", 10_000, 0) == (
        5000
    )  # both users share the client-id quota: 15 kB over 10 s = 1.5x the bound


def test_request_quota_is_a_percentage_bounded_by_one_window() -> None:
    settings = QuotaSettings.from_props({"quota.window.num": "5"}.__getitem__)
    assert settings == QuotaSettings(samples=5, window_seconds=1)
    manager = QuotaManager(settings=settings)
    manager.cache.set(qc.make_entity([("user", None)]), {qc.REQUEST_PERCENTAGE: 10.0})
    # 0.2 s of handling time within a 4 s minimum window = 5 %: fine
    assert manager.record_and_get_throttle_ms("User:u", "c", QuotaKind.REQUEST, 2e8, 0) == 0
    # another 2 s: 55 % against 10 % -> far over, but never more than one window
    assert manager.record_and_get_throttle_ms("User:u", "c", QuotaKind.REQUEST, 2e9, 10) == 1000
    assert manager.quota("User:other", "x", QuotaKind.REQUEST) == 10.0


def test_controller_mutation_quota_is_a_token_bucket() -> None:
    """KIP-599: 2 partitions/s with 11 one-second samples allow a burst of 22 partitions."""
    manager = QuotaManager()
    manager.cache.set(qc.make_entity([("client-id", "ops")]), {qc.CONTROLLER_MUTATION_RATE: 2.0})
    now = 1_000_000.0
    # Strict (new request versions): admitted while credits remain, even when it overdraws them.
    assert manager.record_mutations("User:u", "ops", 30, now, strict=True) == (True, 0)
    # 22 - 30 = -8 credits: refused, and told to wait the 4 s the bucket needs to reach zero.
    assert manager.record_mutations("User:u", "ops", 1, now, strict=True) == (False, 4000)
    assert manager.record_mutations("User:u", "ops", 1, now + 1000, strict=True) == (False, 3000)
    assert manager.record_mutations("User:u", "ops", 1, now + 4000, strict=True) == (True, 0)
    # Permissive (old versions): always admitted, throttled once overdrawn.
    assert manager.record_mutations("User:u", "ops", 3, now + 4000, strict=False) == (True, 2000)
    # Clients without a quota are never limited.
    assert manager.record_mutations("User:u", "other", 10**6, now, strict=True) == (True, 0)


def test_token_bucket_refills_up_to_its_burst() -> None:
    bucket = TokenBucket()
    assert bucket.measure(5.0, 50.0, 1_000_000.0) == 50.0  # starts full
    assert bucket.record(60, 5.0, 50.0, 1_000_000.0) == -10.0
    assert token_throttle_ms(-10.0, 5.0) == 2000
    assert bucket.measure(5.0, 50.0, 1_001_000.0) == -5.0
    assert bucket.measure(5.0, 50.0, 1_100_000.0) == 50.0
    assert token_throttle_ms(1.0, 5.0) == 0


def test_connection_rate_quota_per_ip_with_a_default() -> None:
    settings = QuotaSettings(samples=2, window_seconds=1)
    manager = QuotaManager(settings=settings)
    manager.cache.set(qc.make_entity([("ip", None)]), {qc.CONNECTION_CREATION_RATE: 2.0})
    manager.cache.set(qc.make_entity([("ip", "10.0.0.9")]), {qc.CONNECTION_CREATION_RATE: 100.0})
    now = 5_000.0
    # Two samples of one second never measure over less than one second: 2 connections fit.
    assert [manager.record_connection("10.0.0.1", now) for _ in range(2)] == [0, 0]
    third = manager.record_connection("10.0.0.1", now)
    assert third > 0
    # A refused connection is not counted: the next one is refused for the same time.
    assert manager.record_connection("10.0.0.1", now) == third
    # Every address has its own rate; a specific quota overrides the default one.
    assert manager.record_connection("10.0.0.2", now) == 0
    assert all(manager.record_connection("10.0.0.9", now) == 0 for _ in range(50))
    assert manager.cache.find_ip("10.0.0.3", qc.CONNECTION_CREATION_RATE) == 2.0


def test_idle_clients_are_forgotten() -> None:
    """Kafka expires quota sensors after an hour without use: an address or client id that
    went away leaves nothing behind, and one that comes back starts afresh."""
    manager = QuotaManager(settings=QuotaSettings(samples=2, window_seconds=1))
    manager.cache.set(qc.make_entity([("ip", None)]), {qc.CONNECTION_CREATION_RATE: 2.0})
    manager.cache.set(qc.make_entity([("client-id", None)]), {qc.CONTROLLER_MUTATION_RATE: 1.0})
    for i in range(100):
        manager.record_connection(f"10.1.0.{i}", 0.0)
    manager.record_mutations("User:u", "ops", 50, 0.0, strict=True)
    manager.record_connection("10.1.0.7", 3_000_000.0)  # still in use
    assert manager.expire_idle(3_700_000.0) == 100  # 99 addresses and the bucket
    assert manager.expire_idle(3_700_000.0) == 0
    # The overdrawn bucket is gone with its client: a new one starts full.
    assert manager.record_mutations("User:u", "ops", 1, 3_700_000.0, strict=True) == (True, 0)
