"""`odradek groups list|describe|delete`, like kafka-consumer-groups.sh."""

from __future__ import annotations

import argparse
from typing import TextIO

from ..client.admin import OffsetSpec
from .common import Commands, Subparsers, admin_client, client_parser, table


def add_parsers(sub: Subparsers) -> None:
    groups = sub.add_parser("groups", help="list, describe, delete consumer groups")
    gsub = groups.add_subparsers(dest="action", metavar="ACTION", required=True)

    p = client_parser(gsub, "list", help="list group ids")
    p.add_argument("--state", action="append", default=[], help="only groups in this state")

    p = client_parser(gsub, "describe", help="members, assignments, committed offsets and lag")
    p.add_argument("--group", action="append", required=True, help="repeatable")

    p = client_parser(gsub, "delete", help="delete empty groups and their offsets")
    p.add_argument("--group", action="append", required=True, help="repeatable")


async def groups_list(args: argparse.Namespace, out: TextIO) -> int:
    async with admin_client(args) as admin:
        listed = await admin.list_groups(args.state or None)
    for g in listed:
        out.write(g.group_id + "\n")
    return 0


async def groups_describe(args: argparse.Namespace, out: TextIO) -> int:
    """Like kafka-consumer-groups.sh --describe: one row per partition the group has an
    offset for or a member owns, with the log end offset and the lag."""
    async with admin_client(args) as admin:
        for group_id in args.group:
            desc = (await admin.describe_groups([group_id]))[group_id]
            committed = await admin.list_consumer_group_offsets(group_id)
            owner = {tp: m for m in desc.members for tp in m.assignment}
            partitions = sorted(set(committed) | set(owner))
            ends = (
                await admin.list_offsets(dict.fromkeys(partitions, OffsetSpec.LATEST))
                if partitions
                else {}
            )
            protocol = f", protocol {desc.protocol}" if desc.protocol else ""
            out.write(
                f"Group {group_id}: state {desc.state}{protocol}, {len(desc.members)} members\n"
            )
            rows = [
                ("TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                 "CONSUMER-ID", "HOST", "CLIENT-ID"),
            ]  # fmt: skip
            for tp in partitions:
                c = committed.get(tp)
                current = c.offset if c is not None and c.offset >= 0 else None
                end = ends[tp].offset
                member = owner.get(tp)
                rows.append(
                    (
                        tp.topic,
                        str(tp.partition),
                        "-" if current is None else str(current),
                        str(end),
                        "-" if current is None else str(max(end - current, 0)),
                        member.member_id if member else "-",
                        member.client_host if member else "-",
                        member.client_id if member else "-",
                    )
                )
            for m in desc.members:
                if not m.assignment:
                    rows.append(("-", "-", "-", "-", "-", m.member_id, m.client_host, m.client_id))
            table(rows, out)
    return 0


async def groups_delete(args: argparse.Namespace, out: TextIO) -> int:
    async with admin_client(args) as admin:
        results = await admin.delete_groups(args.group, raise_errors=False)
    failed = None
    for group_id in args.group:
        error = results[group_id]
        if error is None:
            out.write(f"Deleted group {group_id}.\n")
        elif failed is None:
            failed = error
    if failed is not None:
        raise failed
    return 0


COMMANDS: Commands = {
    ("groups", "list"): groups_list,
    ("groups", "describe"): groups_describe,
    ("groups", "delete"): groups_delete,
}
