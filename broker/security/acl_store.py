"""ACLs in the metadata store at Kafka's paths, and the listener that keeps a cache current.

Layout (reference §1.2): literal patterns in `/kafka-acl/<Type>/<name>`, prefixed ones in
`/kafka-acl-extended/prefixed/<Type>/<name>`, both `{"version":1,"acls":[...]}` with CamelCase
names. After a change the writer adds a sequential notification: `/kafka-acl-changes/` holds
`<Type>:<name>` for literal patterns, `/kafka-acl-extended-changes/` a small JSON for the others.
Brokers re-read the named resource when they see a notification. All functions here block;
async callers run them on the metadata-store executor.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor

from ..cluster.change_notifications import NOTIFICATION_EXPIRY_MS, ChangeNotificationListener
from ..cluster.kafka_zk import KafkaZk
from ..cluster.metadata_store import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    run_blocking,
)
from ..protocol.acl_types import camel_name
from .acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclCache,
    AclPatternType,
    AclResourceType,
    ResourcePattern,
    operation_from_name,
    permission_from_name,
    resource_type_from_name,
)

log = logging.getLogger(__name__)

LITERAL_ROOT = "/kafka-acl"
PREFIXED_ROOT = "/kafka-acl-extended/prefixed"
LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
STORED_RESOURCE_TYPES = (
    AclResourceType.TOPIC,
    AclResourceType.GROUP,
    AclResourceType.CLUSTER,
    AclResourceType.TRANSACTIONAL_ID,
    AclResourceType.DELEGATION_TOKEN,
    AclResourceType.USER,
)


def _root(pattern_type: AclPatternType) -> str:
    return PREFIXED_ROOT if pattern_type == AclPatternType.PREFIXED else LITERAL_ROOT


def resource_path(pattern: ResourcePattern) -> str:
    return f"{_root(pattern.pattern_type)}/{camel_name(pattern.resource_type)}/{pattern.name}"


def encode_acls(entries: Iterable[AccessControlEntry]) -> bytes:
    acls = [
        {
            "principal": e.principal,
            "permissionType": camel_name(e.permission),
            "operation": camel_name(e.operation),
            "host": e.host,
        }
        for e in sorted(entries)
    ]
    return json.dumps({"version": 1, "acls": acls}, separators=(",", ":")).encode()


def decode_acls(data: bytes | None) -> set[AccessControlEntry]:
    if not data:
        return set()
    doc = json.loads(bytes(data).decode("utf-8"))
    return {
        AccessControlEntry(
            a["principal"],
            a["host"],
            operation_from_name(a["operation"]),
            permission_from_name(a["permissionType"]),
        )
        for a in doc.get("acls", [])
    }


def encode_literal_change(pattern: ResourcePattern) -> bytes:
    return f"{camel_name(pattern.resource_type)}:{pattern.name}".encode()


def encode_extended_change(pattern: ResourcePattern) -> bytes:
    doc = {
        "version": 1,
        "resourceType": pattern.resource_type.name,
        "name": pattern.name,
        "patternType": pattern.pattern_type.name,
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def decode_change(root: str, data: bytes) -> ResourcePattern:
    text = bytes(data).decode("utf-8")
    if root == LITERAL_CHANGES:
        kind, _, name = text.partition(":")
        return ResourcePattern(resource_type_from_name(kind), name, AclPatternType.LITERAL)
    doc = json.loads(text)
    return ResourcePattern(
        AclResourceType[doc["resourceType"]], doc["name"], AclPatternType[doc["patternType"]]
    )


# -- blocking store operations --------------------------------------------------------------


def get_acls(zkc: KafkaZk, pattern: ResourcePattern) -> tuple[set[AccessControlEntry], int]:
    """Entries of one pattern and the znode version (-1 when absent)."""
    found = zkc.get_data(resource_path(pattern))
    if found is None:
        return set(), -1
    return decode_acls(found[0]), found[1].version


def load_all(zkc: KafkaZk) -> dict[ResourcePattern, set[AccessControlEntry]]:
    out: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for pattern_type in (AclPatternType.LITERAL, AclPatternType.PREFIXED):
        root = _root(pattern_type)
        for type_name in zkc.children(root):
            try:
                rtype = resource_type_from_name(type_name)
            except ValueError:
                log.warning("Ignoring ACLs of unknown resource type %s", type_name)
                continue
            for name in zkc.children(f"{root}/{type_name}"):
                pattern = ResourcePattern(rtype, name, pattern_type)
                entries, _ = get_acls(zkc, pattern)
                if entries:
                    out[pattern] = entries
    return out


def all_bindings(zkc: KafkaZk) -> list[AclBinding]:
    return sorted(AclBinding(p, e) for p, entries in load_all(zkc).items() for e in entries)


def _notify(zkc: KafkaZk, pattern: ResourcePattern) -> None:
    if pattern.pattern_type == AclPatternType.LITERAL:
        root, data = LITERAL_CHANGES, encode_literal_change(pattern)
    else:
        root, data = EXTENDED_CHANGES, encode_extended_change(pattern)
    zkc.store.ensure_path(root)
    zkc.store.create(f"{root}/{CHANGE_PREFIX}", data, sequential=True)


def update_acls(
    zkc: KafkaZk,
    pattern: ResourcePattern,
    change: Callable[[set[AccessControlEntry]], set[AccessControlEntry]],
) -> bool:
    """Apply `change` to the pattern's entries with conditional writes (retried on conflicts);
    the node is deleted when nothing is left. False when nothing changed."""
    path = resource_path(pattern)
    while True:
        current, version = get_acls(zkc, pattern)
        new = change(set(current))
        if new == current:
            return False
        try:
            if version < 0:
                zkc.create_recursive(path, encode_acls(new))
            elif new:
                zkc.store.set(path, encode_acls(new), version)
            else:
                zkc.store.delete(path, version)
        except (BadVersionError, NodeExistsError, NoNodeError):
            continue
        _notify(zkc, pattern)
        return True


def create_acls(zkc: KafkaZk, bindings: Sequence[AclBinding]) -> list[ResourcePattern]:
    """Add bindings (already validated), one conditional update per resource pattern; returns
    the patterns written, which the writing broker then re-reads into its own cache
    (`AclChangeListener.refresh`, Kafka's updateCache)."""
    by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for b in bindings:
        by_pattern.setdefault(b.pattern, set()).add(b.entry)
    return [
        pattern
        for pattern, entries in by_pattern.items()
        if update_acls(zkc, pattern, lambda cur, add=entries: cur | add)
    ]


def delete_acls(
    zkc: KafkaZk, filters: Sequence[AclBindingFilter]
) -> tuple[list[list[AclBinding]], list[ResourcePattern]]:
    """Delete every binding matching any filter; returns, per filter, what it matched, and
    the patterns written (as `create_acls`)."""
    existing = load_all(zkc)
    matched: list[list[AclBinding]] = [[] for _ in filters]
    doomed: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for pattern, entries in existing.items():
        for e in entries:
            binding = AclBinding(pattern, e)
            for i, f in enumerate(filters):
                if f.matches(binding):
                    matched[i].append(binding)
                    doomed.setdefault(pattern, set()).add(e)
    written = [
        pattern
        for pattern, entries in doomed.items()
        if update_acls(zkc, pattern, lambda cur, gone=entries: cur - gone)
    ]
    return [sorted(m) for m in matched], written


def describe_acls(zkc: KafkaZk, f: AclBindingFilter) -> list[AclBinding]:
    return [b for b in all_bindings(zkc) if f.matches(b)]


# -- the cache-keeping listener -------------------------------------------------------------


class AclChangeListener:
    """Loads every ACL into `cache`, then re-reads each resource named by a new notification
    under either change root.

    Every update of the cache reads the store and sets the entries under one lock, the writing
    broker's own (`refresh`) included: reads in one session see the store's changes in order,
    so a broker that wrote a pattern cannot put back its older entries over a newer write of
    another broker that it has already learned from a notification."""

    def __init__(
        self,
        zkc: KafkaZk,
        cache: AclCache,
        *,
        executor: Executor | None = None,
        expiry_ms: int = NOTIFICATION_EXPIRY_MS,
    ) -> None:
        self.zk = zkc
        self.cache = cache
        self._executor = executor
        self._roots = [
            ChangeNotificationListener(
                zkc,
                root,
                CHANGE_PREFIX,
                lambda data, root=root: self._reload(root, data),
                what="ACL change",
                executor=executor,
                expiry_ms=expiry_ms,
            )
            for root in (LITERAL_CHANGES, EXTENDED_CHANGES)
        ]
        self._updating = asyncio.Lock()

    async def start(self) -> None:
        for listener in self._roots:
            await listener.skip_existing()
        async with self._updating:
            self.cache.replace_all(await run_blocking(self._executor, load_all, self.zk))
        for listener in self._roots:
            await listener.start()

    async def stop(self) -> None:
        for listener in self._roots:
            await listener.stop()

    async def refresh(self, patterns: Iterable[ResourcePattern]) -> None:
        """Re-read these patterns into the cache: the writing broker's own change, seen before
        it answers (Kafka's updateCache), without waiting for the notification."""
        async with self._updating:
            for pattern in patterns:
                entries, _ = await run_blocking(self._executor, get_acls, self.zk, pattern)
                self.cache.set(pattern, entries)

    async def _reload(self, root: str, data: bytes) -> None:
        await self.refresh([decode_change(root, data)])
