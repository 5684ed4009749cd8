"""Offsets of OffsetCommit/OffsetFetch v0, kept where Kafka 0.8 kept them: in the metadata
store at /consumers/<group>/offsets/<topic>/<partition>, the offset as a decimal string.

These calls block (they talk to the store): run them on the store's executor.
"""

from __future__ import annotations

from ...cluster.metadata_store import MetadataStore, NodeExistsError, NoNodeError

TopicPartition = tuple[str, int]


def offset_path(group: str, topic: str, partition: int) -> str:
    return f"/consumers/{group}/offsets/{topic}/{partition}"


def commit(store: MetadataStore, group: str, tp: TopicPartition, offset: int) -> None:
    path = offset_path(group, tp[0], tp[1])
    data = str(offset).encode()
    try:
        store.set(path, data)
    except NoNodeError:
        try:
            store.create(path, data, makepath=True)
        except NodeExistsError:
            store.set(path, data)


def fetch(store: MetadataStore, group: str, tp: TopicPartition) -> int:
    """The committed offset, -1 when there is none."""
    try:
        data, _ = store.get(offset_path(group, tp[0], tp[1]))
    except NoNodeError:
        return -1
    try:
        return int(data.decode())
    except ValueError:
        return -1
