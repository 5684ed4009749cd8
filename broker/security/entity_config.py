"""Read-modify-write of one /config/<type>/<name> node, then Kafka's change notification.

SCRAM credentials and quotas share `/config/users/<user>`, so neither writer may clobber the
other's keys: updates are conditional on the znode version and retried on conflicts.
Blocking; run on the metadata-store executor.
"""

from __future__ import annotations

from collections.abc import Callable

from ..cluster import zk_data as zk
from ..cluster.kafka_zk import KafkaZk
from ..cluster.metadata_store import BadVersionError, NodeExistsError, NoNodeError


def update_entity_config(
    zkc: KafkaZk,
    entity_type: str,
    entity_name: str,
    change: Callable[[dict[str, str]], dict[str, str]],
) -> dict[str, str]:
    """`entity_name` is the sanitized znode name below /config/<type> (may contain
    `/clients/<c>` for user+client quotas). Returns the new config."""
    path = zk.entity_config_path(entity_type, entity_name)
    while True:
        found = zkc.get_data(path)
        current = zk.decode_entity_config(found[0]) if found else {}
        new = change(dict(current))
        if new == current and found is not None:
            return new
        data = zk.encode_entity_config(new)
        try:
            if found is None:
                zkc.create_recursive(path, data)
            else:
                zkc.store.set(path, data, found[1].version)
        except (BadVersionError, NodeExistsError, NoNodeError):
            continue
        break
    zkc.store.ensure_path(zk.CONFIG_CHANGES)
    zkc.store.create(
        f"{zk.CONFIG_CHANGES}/{zk.CONFIG_CHANGE_PREFIX}",
        zk.encode_config_change(f"{entity_type}/{entity_name}"),
        sequential=True,
    )
    return new
