"""Kazoo's results and errors in the MetadataStore's terms, for `zk_store.py`.

Kept apart from the store so the store holds only session and watch behaviour; everything here
is a pure mapping from one library's types to the interface's.
"""

from __future__ import annotations

from kazoo import exceptions as kz
from kazoo.protocol.states import EventType as KzEventType
from kazoo.protocol.states import ZnodeStat

from .metadata_store import (
    BadVersionError,
    CreateOp,
    EventType,
    MetadataStoreError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    Op,
    Stat,
    StoreClosedError,
    parent_of,
)


class SessionExpiredError(StoreClosedError):
    """The ZooKeeper session ended under a call; the store continues with a new session."""


def stat_of(z: ZnodeStat) -> Stat:
    """The interface's Stat for kazoo's."""
    return Stat(
        czxid=z.czxid,
        mzxid=z.mzxid,
        pzxid=z.pzxid,
        ctime=z.ctime,
        mtime=z.mtime,
        version=z.version,
        cversion=z.cversion,
        aversion=z.aversion,
        ephemeral_owner=z.ephemeralOwner,
        data_length=z.dataLength,
        num_children=z.numChildren,
    )


_ERRORS: list[tuple[type[Exception], type[MetadataStoreError]]] = [
    (kz.NoNodeError, NoNodeError),
    (kz.NodeExistsError, NodeExistsError),
    (kz.BadVersionError, BadVersionError),
    (kz.NotEmptyError, NotEmptyError),
    (kz.NoChildrenForEphemeralsError, NoChildrenForEphemeralsError),
    (kz.SessionExpiredError, SessionExpiredError),
    (kz.ConnectionClosedError, StoreClosedError),
]


def translate(exc: Exception, path: str | None) -> MetadataStoreError:
    """The interface's error for a kazoo exception raised on `path`."""
    for kz_type, ours in _ERRORS:
        if isinstance(exc, kz_type):
            return ours(path)
    return MetadataStoreError(path, f"ZooKeeper error on {path}: {exc!r}")


def op_error_path(op: Op, exc: Exception) -> str:
    """The path a failed multi-op's error names."""
    # ZooKeeper reports a missing parent as NONODE on the create itself; name the parent, as the
    # embedded store does.
    if isinstance(op, CreateOp) and isinstance(exc, kz.NoNodeError):
        return parent_of(op.path)
    return op.path


EVENT_TYPES = {
    KzEventType.CREATED: EventType.CREATED,
    KzEventType.DELETED: EventType.DELETED,
    KzEventType.CHANGED: EventType.CHANGED,
    KzEventType.CHILD: EventType.CHILD,
}
