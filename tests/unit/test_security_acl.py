"""ACL semantics (Kafka's authorizer), filters, and storage at Kafka's paths with notifications."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from odradek.broker.cluster.embedded_store import EmbeddedStore
from odradek.broker.cluster.kafka_zk import KafkaZk
from odradek.broker.security import acl_store
from odradek.broker.security.acl import (
    AccessControlEntry,
    AclAuthorizer,
    AclBinding,
    AclBindingFilter,
    AclCache,
    AclOperation,
    AclPatternType,
    AclPermissionType,
    AclResourceType,
    InvalidAclError,
    ResourcePattern,
    parse_super_users,
    validate_binding,
)

T = AclResourceType.TOPIC
Op = AclOperation
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LIT, PRE = AclPatternType.LITERAL, AclPatternType.PREFIXED


def entry(op: AclOperation, perm=ALLOW, principal="User:alice", host="*") -> AccessControlEntry:
    return AccessControlEntry(principal, host, op, perm)


def authorizer(acls: dict, **kw) -> AclAuthorizer:
    cache = AclCache()
    cache.replace_all(acls)
    return AclAuthorizer(cache, **kw)


def test_no_acl_means_denied_unless_allow_everyone() -> None:
    assert not authorizer({}).authorize("User:alice", "1.2.3.4", Op.READ, T, "t")
    assert authorizer({}, allow_everyone_if_no_acl_found=True).authorize(
        "User:alice", "h", Op.READ, T, "t"
    )
    other = {ResourcePattern(T, "t"): {entry(Op.READ, principal="User:bob")}}
    assert not authorizer(other, allow_everyone_if_no_acl_found=True).authorize(
        "User:alice", "h", Op.READ, T, "t"
    )


def test_allow_deny_wildcards_and_implied_describe() -> None:
    a = authorizer({ResourcePattern(T, "t"): {entry(Op.READ)}})
    assert a.authorize("User:alice", "h", Op.READ, T, "t")
    assert a.authorize("User:alice", "h", Op.DESCRIBE, T, "t")  # READ implies DESCRIBE
    assert not a.authorize("User:alice", "h", Op.WRITE, T, "t")
    assert not a.authorize("User:bob", "h", Op.READ, T, "t")
    a = authorizer(
        {
            ResourcePattern(T, "*"): {entry(Op.ALL, principal="User:*")},
            ResourcePattern(T, "secret"): {entry(Op.READ, DENY, host="10.0.0.1")},
        }
    )
    assert a.authorize("User:alice", "10.0.0.2", Op.READ, T, "secret")
    assert not a.authorize("User:alice", "10.0.0.1", Op.READ, T, "secret")  # deny beats allow
    assert a.authorize("User:alice", "10.0.0.1", Op.WRITE, T, "secret")
    a = authorizer({ResourcePattern(T, "t"): {entry(Op.ALTER_CONFIGS)}})
    assert a.authorize("User:alice", "h", Op.DESCRIBE_CONFIGS, T, "t")


def test_prefixed_patterns_and_super_users() -> None:
    a = authorizer(
        {ResourcePattern(T, "app-", PRE): {entry(Op.WRITE)}},
        super_users=parse_super_users("User:admin;User:ops"),
    )
    assert a.authorize("User:alice", "h", Op.WRITE, T, "app-new-topic")
    assert not a.authorize("User:alice", "h", Op.WRITE, T, "other")
    assert a.authorize("User:admin", "h", Op.DELETE, T, "anything")


def test_filters() -> None:
    lit = AclBinding(ResourcePattern(T, "foo"), entry(Op.READ))
    star = AclBinding(ResourcePattern(T, "*"), entry(Op.READ))
    pre = AclBinding(ResourcePattern(T, "fo", PRE), entry(Op.READ))
    match = AclBindingFilter(T, "foo", AclPatternType.MATCH)
    assert all(match.matches(b) for b in (lit, star, pre))
    assert AclBindingFilter(T, "foo", AclPatternType.ANY).matches(lit)
    assert not AclBindingFilter(T, "foo", AclPatternType.ANY).matches(pre)
    assert not AclBindingFilter(T, "foo", LIT).matches(star)
    assert AclBindingFilter().matches(pre)
    assert not AclBindingFilter(operation=Op.WRITE).matches(lit)
    with pytest.raises(InvalidAclError):
        AclBindingFilter(resource_type=AclResourceType.UNKNOWN).validate()


def test_binding_validation() -> None:
    ok = AclBinding(ResourcePattern(T, "t"), entry(Op.READ))
    validate_binding(ok)
    bad = [
        AclBinding(ResourcePattern(T, "t", AclPatternType.MATCH), entry(Op.READ)),
        AclBinding(ResourcePattern(AclResourceType.GROUP, "g"), entry(Op.WRITE)),
        AclBinding(ResourcePattern(AclResourceType.CLUSTER, "c"), entry(Op.ALTER)),
        AclBinding(ResourcePattern(T, "t"), entry(Op.READ, principal="alice")),
        AclBinding(ResourcePattern(T, ""), entry(Op.READ)),
        AclBinding(ResourcePattern(T, "t"), entry(Op.ANY)),
    ]
    for b in bad:
        with pytest.raises(InvalidAclError):
            validate_binding(b)


Body = Callable[[EmbeddedStore, KafkaZk, AclCache, acl_store.AclChangeListener], Awaitable[None]]


def with_listener(tmp_path: Path, body: Body) -> None:
    """Run `body` against a fresh store with an ACL change listener started on it."""
    store = EmbeddedStore(str(tmp_path / "meta"))
    zkc = KafkaZk(store)
    cache = AclCache()

    async def run() -> None:
        listener = acl_store.AclChangeListener(zkc, cache)
        await listener.start()
        try:
            await body(store, zkc, cache, listener)
        finally:
            await listener.stop()

    try:
        asyncio.run(run())
    finally:
        store.close()


async def until(holds: Callable[[], bool]) -> None:
    """Wait (10 s at most) for the listener to have applied the notifications."""
    for _ in range(200):
        if holds():
            return
        await asyncio.sleep(0.05)


def test_store_paths_notifications_and_listener(tmp_path: Path) -> None:
    async def body(store, zkc, cache, listener) -> None:
        written = acl_store.create_acls(
            zkc,
            [
                AclBinding(ResourcePattern(T, "orders"), entry(Op.READ)),
                AclBinding(ResourcePattern(T, "app-", PRE), entry(Op.WRITE, DENY)),
            ],
        )
        assert written == [ResourcePattern(T, "orders"), ResourcePattern(T, "app-", PRE)]
        data, _ = store.get("/kafka-acl/Topic/orders")
        assert json.loads(data) == {
            "version": 1,
            "acls": [
                {"principal": "User:alice", "permissionType": "Allow",
                 "operation": "Read", "host": "*"}
            ],
        }  # fmt: skip
        assert store.exists("/kafka-acl-extended/prefixed/Topic/app-") is not None
        (change,) = store.get_children("/kafka-acl-changes")
        assert store.get(f"/kafka-acl-changes/{change}")[0] == b"Topic:orders"
        (ext,) = store.get_children("/kafka-acl-extended-changes")
        assert json.loads(store.get(f"/kafka-acl-extended-changes/{ext}")[0]) == {
            "version": 1, "resourceType": "TOPIC", "name": "app-", "patternType": "PREFIXED",
        }  # fmt: skip
        await until(lambda: len(cache.bindings()) == 2)
        assert len(cache.bindings()) == 2
        deleted, written = acl_store.delete_acls(zkc, [AclBindingFilter(T, "orders", LIT)])
        assert [b.pattern.name for b in deleted[0]] == ["orders"]
        assert written == [ResourcePattern(T, "orders")]  # for the writer's cache
        assert store.exists("/kafka-acl/Topic/orders") is None
        await until(lambda: len(cache.bindings()) == 1)
        assert [b.pattern.name for b in cache.bindings()] == ["app-"]

    with_listener(tmp_path, body)


def test_the_writers_own_cache_update_does_not_bring_back_a_newer_removal(tmp_path: Path) -> None:
    """Broker A writes an ACL; before A's CreateAcls handler updates A's cache, broker B deletes
    it and A's listener has already applied B's notification. A's late update must not put the
    ACL back: A would go on granting what B revoked until the pattern next changed."""
    granted = AclBinding(ResourcePattern(T, "orders"), entry(Op.READ))
    marker = AclBinding(ResourcePattern(T, "marker"), entry(Op.DESCRIBE))

    async def body(store, zkc, cache, listener) -> None:
        written = acl_store.create_acls(zkc, [granted])  # broker A
        acl_store.delete_acls(zkc, [AclBindingFilter(T, "orders", LIT)])  # broker B
        acl_store.create_acls(zkc, [marker])  # B again: notified after the removal
        await until(lambda: cache.bindings() == [marker])
        assert cache.bindings() == [marker]
        await listener.refresh(written)  # A's handler, late
        assert cache.bindings() == [marker]
        await listener.refresh([marker.pattern])
        assert cache.bindings() == [marker]

    with_listener(tmp_path, body)
