"""`odradek topics create|list|describe|alter|delete`, like kafka-topics.sh."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TextIO

from ..client.admin import AlterConfigOp, ConfigResource, ConfigSource, NewTopic
from ..protocol.errors import ErrorCode
from .common import (
    CliError,
    Commands,
    Subparsers,
    admin_client,
    client_parser,
    key_value,
    positive_int,
)


def add_parsers(sub: Subparsers) -> None:
    topics = sub.add_parser("topics", help="create, list, describe, alter, delete topics")
    tsub = topics.add_subparsers(dest="action", metavar="ACTION", required=True)

    p = client_parser(tsub, "create", help="create a topic")
    p.add_argument("--topic", required=True)
    p.add_argument("--partitions", type=positive_int, help="default: the broker's")
    p.add_argument("--replication-factor", type=positive_int, help="default: the broker's")
    p.add_argument("--config", action="append", type=key_value, default=[], metavar="KEY=VALUE")
    p.add_argument("--if-not-exists", action="store_true", help="no error if it exists")
    p.add_argument("--validate-only", action="store_true", help="check, do not create")

    p = client_parser(tsub, "list", help="list topic names")
    p.add_argument("--exclude-internal", action="store_true", help="hide internal topics")

    p = client_parser(tsub, "describe", help="partitions, leaders, replicas and configs")
    p.add_argument("--topic", action="append", default=[], help="repeatable; default: all")
    p.add_argument("--exclude-internal", action="store_true")

    p = client_parser(tsub, "alter", help="add partitions or change configs")
    p.add_argument("--topic", required=True)
    p.add_argument("--partitions", type=positive_int, help="new total partition count")
    p.add_argument("--config", action="append", type=key_value, default=[], metavar="KEY=VALUE")
    p.add_argument("--delete-config", action="append", default=[], metavar="KEY")

    p = client_parser(tsub, "delete", help="delete topics")
    p.add_argument("--topic", action="append", required=True, help="repeatable")
    p.add_argument("--if-exists", action="store_true", help="no error if it does not exist")


async def topics_create(args: argparse.Namespace, out: TextIO) -> int:
    topic = NewTopic(
        args.topic,
        args.partitions or -1,
        args.replication_factor or -1,
        dict(args.config),
    )
    async with admin_client(args) as admin:
        result = (
            await admin.create_topics([topic], validate_only=args.validate_only, raise_errors=False)
        )[args.topic]
    if result.error is not None:
        if args.if_not_exists and result.error.code == ErrorCode.TOPIC_ALREADY_EXISTS:
            return 0
        raise result.error
    verb = "Validated" if args.validate_only else "Created"
    out.write(f"{verb} topic {args.topic}.\n")
    return 0


async def topics_list(args: argparse.Namespace, out: TextIO) -> int:
    async with admin_client(args) as admin:
        names = await admin.list_topics(include_internal=not args.exclude_internal)
    for name in names:
        out.write(name + "\n")
    return 0


def _ids(nodes: Sequence[int]) -> str:
    return ",".join(str(n) for n in nodes)


async def topics_describe(args: argparse.Namespace, out: TextIO) -> int:
    async with admin_client(args) as admin:
        topics = await admin.describe_topics(args.topic or None)
        if args.exclude_internal:
            topics = {n: t for n, t in topics.items() if not t.is_internal}
        resources = [ConfigResource.topic(n) for n in topics]
        configs = await admin.describe_configs(resources) if resources else {}
    for name, t in topics.items():
        entries = configs.get(ConfigResource.topic(name), {})
        overrides = ",".join(
            f"{k}={'<sensitive>' if e.is_sensitive else e.value}"
            for k, e in sorted(entries.items())
            if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG
        )
        out.write(
            f"Topic: {name}\tTopicId: {t.topic_id}\tPartitionCount: {len(t.partitions)}\t"
            f"ReplicationFactor: {t.replication_factor}\tConfigs: {overrides}\n"
        )
        for p in t.partitions:
            line = (
                f"\tTopic: {name}\tPartition: {p.partition}\tLeader: "
                f"{p.leader if p.leader >= 0 else 'none'}\tReplicas: {_ids(p.replicas)}\t"
                f"Isr: {_ids(p.isr)}"
            )
            if p.offline_replicas:
                line += f"\tOffline: {_ids(p.offline_replicas)}"
            out.write(line + "\n")
    return 0


async def topics_alter(args: argparse.Namespace, out: TextIO) -> int:
    if args.partitions is None and not args.config and not args.delete_config:
        raise CliError("nothing to alter: give --partitions, --config or --delete-config")
    async with admin_client(args) as admin:
        if args.config or args.delete_config:
            ops = [AlterConfigOp.set(k, v) for k, v in args.config]
            ops += [AlterConfigOp.delete(k) for k in args.delete_config]
            await admin.incremental_alter_configs({ConfigResource.topic(args.topic): ops})
            out.write(f"Updated config of topic {args.topic}.\n")
        if args.partitions is not None:
            await admin.create_partitions({args.topic: args.partitions})
            out.write(f"Topic {args.topic} now has {args.partitions} partitions.\n")
    return 0


async def topics_delete(args: argparse.Namespace, out: TextIO) -> int:
    async with admin_client(args) as admin:
        results = await admin.delete_topics(args.topic, raise_errors=False)
    for name in args.topic:
        error = results[name].error
        if error is None:
            out.write(f"Deleted topic {name}.\n")
        elif not (args.if_exists and error.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
            raise error
    return 0


COMMANDS: Commands = {
    ("topics", "create"): topics_create,
    ("topics", "list"): topics_list,
    ("topics", "describe"): topics_describe,
    ("topics", "alter"): topics_alter,
    ("topics", "delete"): topics_delete,
}
