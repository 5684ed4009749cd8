"""Authorization of requests: the handlers' side of Kafka's ACL authorizer.

As in Kafka, authorization applies only when an authorizer is configured: any non-empty
`authorizer.class.name` turns it on (Kafka's own names, `kafka.security.authorizer.AclAuthorizer`
and `org.apache.kafka.metadata.authorizer.StandardAuthorizer`, are the documented values; both
select the ACL authorizer of `security/acl.py`). With it empty every request is allowed and the
`authorized_operations` fields list every operation the resource type supports.

The principal is the connection's (TLS or SASL, else `User:ANONYMOUS`), the host its peer address.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..security.acl import CLUSTER_NAME, AclOperation, AclResourceType

if TYPE_CHECKING:
    from .handlers.registry import RequestContext

log = logging.getLogger(__name__)

KNOWN_AUTHORIZERS = frozenset(
    {
        "kafka.security.authorizer.AclAuthorizer",
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    }
)

Op = AclOperation
RT = AclResourceType

# The operations each resource type can be asked about (Kafka's supported operations, ALL
# excluded): the bits of an `authorized_operations` field.
_SUPPORTED: dict[AclResourceType, tuple[AclOperation, ...]] = {
    RT.TOPIC: (Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER,
               Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS),
    RT.GROUP: (Op.READ, Op.DESCRIBE, Op.DELETE),
    RT.CLUSTER: (Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS,
                 Op.IDEMPOTENT_WRITE, Op.ALTER, Op.DESCRIBE),
    RT.TRANSACTIONAL_ID: (Op.DESCRIBE, Op.WRITE),
    RT.DELEGATION_TOKEN: (Op.DESCRIBE,),
    RT.USER: (Op.CREATE_TOKENS, Op.DESCRIBE_TOKENS),
}  # fmt: skip

_warned: set[str] = set()


def enabled(ctx: RequestContext) -> bool:
    name = (ctx.broker.config.get("authorizer.class.name") or "").strip()
    if name and name not in KNOWN_AUTHORIZERS and name not in _warned:
        _warned.add(name)
        log.warning("authorizer.class.name=%s is not a known authorizer; using ACLs", name)
    return bool(name)


def authorized(ctx: RequestContext, op: AclOperation, rtype: AclResourceType, name: str) -> bool:
    """May this connection's principal perform `op` on the resource?"""
    if not enabled(ctx):
        return True
    security = ctx.broker.security
    if security is None:
        return False  # fail closed while the ACLs are not loaded
    if rtype == RT.CLUSTER:
        name = CLUSTER_NAME
    return security.authorizer.authorize(ctx.conn.principal, ctx.conn.peer_host, op, rtype, name)


def cluster(ctx: RequestContext, op: AclOperation) -> bool:
    return authorized(ctx, op, RT.CLUSTER, CLUSTER_NAME)


def authorized_names(
    ctx: RequestContext, op: AclOperation, rtype: AclResourceType, names: Iterable[str | None]
) -> set[str]:
    """The names among `names` the principal may perform `op` on (each asked once)."""
    distinct = {n for n in names if n is not None}
    if not enabled(ctx):
        return distinct
    return {n for n in distinct if authorized(ctx, op, rtype, n)}


def authorized_any(ctx: RequestContext, op: AclOperation, rtype: AclResourceType) -> bool:
    """Kafka's authorizeByResourceType: allowed on at least one resource of the type."""
    if not enabled(ctx):
        return True
    security = ctx.broker.security
    if security is None:
        return False
    return security.authorizer.authorize_any(ctx.conn.principal, ctx.conn.peer_host, op, rtype)


def authorized_operations(ctx: RequestContext, rtype: AclResourceType, name: str) -> int:
    """The bit field (1 << operation code) of what the principal may do with the resource."""
    bits = 0
    for op in _SUPPORTED[rtype]:
        if authorized(ctx, op, rtype, name):
            bits |= 1 << op
    return bits


def cluster_authorized_operations(ctx: RequestContext) -> int:
    """Metadata and DescribeCluster: 0 without DESCRIBE on the cluster, else the bit field."""
    if not cluster(ctx, Op.DESCRIBE):
        return 0
    return authorized_operations(ctx, RT.CLUSTER, CLUSTER_NAME)
