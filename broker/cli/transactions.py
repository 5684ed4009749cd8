"""`odradek transactions list|describe`, like kafka-transactions.sh."""

from __future__ import annotations

import argparse
from typing import TextIO

from .common import Commands, Subparsers, admin_client, client_parser, table


def add_parsers(sub: Subparsers) -> None:
    txns = sub.add_parser("transactions", help="list and describe transactions")
    xsub = txns.add_subparsers(dest="action", metavar="ACTION", required=True)

    p = client_parser(xsub, "list", help="transactional ids with their producer id and state")
    p.add_argument("--state", action="append", default=[], help="only this state (repeatable)")
    p.add_argument(
        "--producer-id", type=int, action="append", default=[], help="only this producer id"
    )
    p.add_argument(
        "--duration-ms",
        type=int,
        default=-1,
        metavar="MS",
        help="only transactions open longer than this",
    )

    p = client_parser(xsub, "describe", help="state, producer, timeout and partitions")
    p.add_argument("--transactional-id", action="append", required=True, help="repeatable")


async def transactions_list(args: argparse.Namespace, out: TextIO) -> int:
    """Like kafka-transactions.sh list: one row per transactional id."""
    async with admin_client(args) as admin:
        listed = await admin.list_transactions(args.state, args.producer_id, args.duration_ms)
    rows = [("TRANSACTIONAL-ID", "COORDINATOR", "PRODUCER-ID", "STATE")]
    rows += [(t.transactional_id, str(t.coordinator), str(t.producer_id), t.state) for t in listed]
    table(rows, out)
    return 0


async def transactions_describe(args: argparse.Namespace, out: TextIO) -> int:
    """Like kafka-transactions.sh describe, with the partitions of the open transaction."""
    async with admin_client(args) as admin:
        described = await admin.describe_transactions(args.transactional_id)
    rows = [
        ("TRANSACTIONAL-ID", "COORDINATOR", "PRODUCER-ID", "EPOCH", "STATE", "TIMEOUT-MS",
         "START-TIME-MS", "PARTITIONS"),
    ]  # fmt: skip
    for d in described.values():
        partitions = ",".join(f"{tp.topic}-{tp.partition}" for tp in d.partitions) or "-"
        start = str(d.start_time_ms) if d.start_time_ms >= 0 else "-"
        rows.append(
            (d.transactional_id, str(d.coordinator), str(d.producer_id), str(d.producer_epoch),
             d.state, str(d.timeout_ms), start, partitions)
        )  # fmt: skip
    table(rows, out)
    return 0


COMMANDS: Commands = {
    ("transactions", "list"): transactions_list,
    ("transactions", "describe"): transactions_describe,
}
