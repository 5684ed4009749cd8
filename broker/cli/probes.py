"""`odradek ready` and `odradek wait-drained`: the broker pod's readiness probe and preStop
hook, asking the cluster through the admin client."""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import TextIO

from .common import (
    CliError,
    Commands,
    Subparsers,
    admin_client,
    client_parser,
    env_int,
    seconds,
    seconds_option,
)


def add_parsers(sub: Subparsers) -> None:
    p = client_parser(
        sub,
        "ready",
        help="check that a broker serves the cluster (a readiness probe)",
        description="Exit 0 when the broker at --bootstrap-server answers DescribeCluster with "
        "a controller (and lists --broker-id, when given); otherwise print why and exit 1.",
    )
    p.add_argument("--broker-id", type=int, help="this broker's id must be registered")

    p = client_parser(
        sub,
        "wait-drained",
        help="wait while a reassignment moves a broker's replicas away (a preStop hook)",
        description="Exit 0 once no partition reassignment is removing --broker-id from its "
        "replicas and either one did (the broker was drained) or --settle seconds passed "
        "without one starting (a restart, not a scale-down). Exit 1 after --timeout seconds "
        "while it is still being drained.",
    )
    p.add_argument(
        "--broker-id",
        type=int,
        default=env_int("BROKER_ID"),
        help="the broker to wait for (default: $BROKER_ID, which the Helm chart sets)",
    )
    seconds_option(p, "--settle", 10.0, "how long to wait for a drain to start (default 10)")
    seconds_option(p, "--timeout", 60.0, "give up waiting after this long (default 60)")
    p.add_argument("--interval", type=seconds, default=1.0, help=argparse.SUPPRESS)


async def ready(args: argparse.Namespace, out: TextIO) -> int:
    async with admin_client(args) as admin:
        cluster = await admin.describe_cluster()
    if cluster.controller_id < 0:
        raise CliError("no controller elected yet")
    if args.broker_id is not None and all(b.node_id != args.broker_id for b in cluster.brokers):
        raise CliError(f"broker {args.broker_id} is not registered in the cluster")
    out.write(f"ready: cluster {cluster.cluster_id}, controller {cluster.controller_id}\n")
    return 0


async def wait_drained(args: argparse.Namespace, out: TextIO) -> int:
    if args.broker_id is None:
        raise CliError("--broker-id is required (or set BROKER_ID)")
    start = time.monotonic()
    drained_some = False
    async with admin_client(args) as admin:
        while True:
            moving = [
                tp
                for tp, r in (await admin.list_partition_reassignments()).items()
                if args.broker_id in r.removing_replicas
            ]
            elapsed = time.monotonic() - start
            if moving:
                if not drained_some:
                    out.write(f"broker {args.broker_id}: {len(moving)} partitions moving away\n")
                    out.flush()
                drained_some = True
                if elapsed >= args.timeout:
                    raise CliError(
                        f"broker {args.broker_id} still has {len(moving)} partitions moving "
                        f"away after {args.timeout:g} s"
                    )
            elif drained_some:
                out.write(f"broker {args.broker_id}: drained\n")
                return 0
            elif elapsed >= args.settle:
                out.write(f"broker {args.broker_id}: no drain started\n")
                return 0
            await asyncio.sleep(args.interval)


COMMANDS: Commands = {
    ("ready", None): ready,
    ("wait-drained", None): wait_drained,
}
