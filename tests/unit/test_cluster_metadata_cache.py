"""MetadataCache.derived: an answer built once per version of the cache, rebuilt after it."""

from __future__ import annotations

from odradek.broker.cluster import zk_data as zk
from odradek.broker.cluster.control import UpdateMetadataPartition, UpdateMetadataRequest
from odradek.broker.cluster.metadata_cache import MetadataCache
from odradek.broker.config import Endpoint

BROKER = zk.BrokerRegistration(1, (Endpoint("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT"),))


def update(cache: MetadataCache, leader: int) -> None:
    part = UpdateMetadataPartition("t", None, 0, 1, leader, 1, (1,), 0, (1,), ())
    cache.update(UpdateMetadataRequest(1, 1, 1, (part,), (BROKER,)))


def test_derived_is_built_once_per_version():
    cache = MetadataCache(1)
    update(cache, leader=1)
    built = []

    def leader() -> int:
        built.append(1)
        p = cache.get_partition("t", 0)
        assert p is not None
        return p.leader

    assert cache.derived("leader", leader) == cache.derived("leader", leader) == 1
    assert len(built) == 1
    update(cache, leader=-1)  # the controller changed something: answers are rebuilt
    assert cache.derived("leader", leader) == -1
    assert len(built) == 2
