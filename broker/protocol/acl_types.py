"""The ACL codes of the wire protocol (CreateAcls, DescribeAcls, DeleteAcls and
authorized-operations bit fields): shared by the broker's authorizer and the client."""

from __future__ import annotations

from enum import IntEnum


class AclResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class AclPatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


def camel_name(member: IntEnum) -> str:
    """The name Kafka gives a code in /kafka-acl, its tools and its CRD-style APIs:
    TRANSACTIONAL_ID -> TransactionalId, CLUSTER_ACTION -> ClusterAction."""
    return "".join(w.capitalize() for w in member.name.split("_"))
