"""`odradek log-dirs describe|move`, like kafka-log-dirs.sh and kafka-reassign-partitions.sh's
log dir moves."""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from typing import TextIO

from ..client.cluster import TopicPartition
from ..protocol.errors import ErrorCode
from .common import CliError, Commands, Subparsers, admin_client, client_parser, table


def add_parsers(sub: Subparsers) -> None:
    log_dirs = sub.add_parser("log-dirs", help="describe log dirs, move replicas between them")
    lsub = log_dirs.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = client_parser(
        lsub,
        "describe",
        help="each broker's log dirs, their replicas, sizes and lag",
        description="Like kafka-log-dirs --describe, as a table: one row per replica (a "
        "replica being moved into a dir shows as future, its lag the offsets it still misses).",
    )
    p.add_argument("--broker", type=int, action="append", help="repeatable; default: all")
    p.add_argument("--topic", action="append", help="repeatable; default: all")
    p = client_parser(
        lsub,
        "move",
        help="move a replica to another log dir of its broker",
        description="Ask --broker to move its replica of --topic/--partition into --dir "
        "(AlterReplicaLogDirs); with --wait, return once the move is done.",
    )
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", type=int, action="append", required=True, help="repeatable")
    p.add_argument("--broker", type=int, required=True)
    p.add_argument("--dir", required=True, metavar="PATH", help="an absolute log dir of --broker")
    p.add_argument("--wait", action="store_true", help="wait until the replicas moved")


async def log_dirs_describe(args: argparse.Namespace, out: TextIO) -> int:
    async with admin_client(args) as admin:
        topics = None
        if args.topic:
            described = await admin.describe_topics(args.topic)
            topics = {n: [p.partition for p in t.partitions] for n, t in described.items()}
        found = await admin.describe_log_dirs(args.broker or None, topics)
    rows = [("BROKER", "LOG-DIR", "STATUS", "TOPIC", "PARTITION", "SIZE", "LAG", "FUTURE")]
    for broker, dirs in sorted(found.items()):
        for d in dirs:
            status = "online" if d.error == ErrorCode.NONE else d.error.name
            if not d.replicas:
                rows.append((str(broker), d.path, status, "-", "-", "-", "-", "-"))
            for tp, info in sorted(d.replicas.items()):
                rows.append(
                    (str(broker), d.path, status, tp.topic, str(tp.partition), str(info.size),
                     str(info.offset_lag), "yes" if info.is_future else "no")
                )  # fmt: skip
    table(rows, out)
    return 0


async def log_dirs_move(args: argparse.Namespace, out: TextIO) -> int:
    if not os.path.isabs(args.dir):
        raise CliError(f"--dir must be an absolute path, not {args.dir!r}")
    replicas = [(TopicPartition(args.topic, p), args.broker) for p in args.partition]
    async with admin_client(args) as admin:
        results = await admin.alter_replica_log_dirs(dict.fromkeys(replicas, args.dir))
        for (tp, broker), error in sorted(results.items()):
            if error is not None:
                raise error
            out.write(f"Moving {tp.topic}-{tp.partition} on broker {broker} to {args.dir}.\n")
        if not args.wait:
            return 0
        deadline = time.monotonic() + args.request_timeout
        pending = {tp for tp, _ in replicas}
        while pending:
            dirs = (await admin.describe_log_dirs([args.broker], {args.topic: args.partition}))[
                args.broker
            ]
            pending = {
                tp for d in dirs for tp, info in d.replicas.items()
                if info.is_future or d.path != args.dir
            }  # fmt: skip
            if not pending:
                break
            if time.monotonic() > deadline:
                raise CliError(f"still moving after {args.request_timeout:g}s: {sorted(pending)}")
            await asyncio.sleep(0.2)
        out.write(f"Done: the replicas are in {args.dir}.\n")
    return 0


COMMANDS: Commands = {
    ("log-dirs", "describe"): log_dirs_describe,
    ("log-dirs", "move"): log_dirs_move,
}
