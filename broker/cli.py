"""The `odradek` command: run a broker, manage topics, produce and consume from a terminal.

    odradek broker [--config FILE] [--override key=value ...]
    odradek topics create|list|describe|alter|delete ...
    odradek produce --topic T [--value V ...]     (otherwise one record per stdin line)
    odradek consume --topic T [--from-beginning] [--max-messages N] [--timeout S]
    odradek groups list|describe|delete ...
    odradek transactions list|describe ...        (transactional ids and their state)
    odradek log-dirs describe [--broker N ...] [--topic T ...]
    odradek log-dirs move --topic T --partition P --broker N --dir PATH
    odradek ready [--broker-id N]                 (exit 0 when the broker serves the cluster)
    odradek wait-drained [--broker-id N]          (a preStop hook: wait while N is drained)
    odradek kafka-tool NAME [ARGS ...]            (Apache Kafka's own tools, e.g. kafka-topics.sh)

Client commands talk to --bootstrap-server (default 127.0.0.1:9092). A failure prints one line
starting with "error:" on stderr and exits with status 1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TextIO

from .client.admin import (
    AdminClient,
    AlterConfigOp,
    ConfigResource,
    ConfigSource,
    NewTopic,
    OffsetSpec,
)
from .client.cluster import TopicPartition
from .client.consumer import Consumer, ConsumerRecord
from .client.producer import Producer, parse_acks, parse_compression
from .client.security import ClientSecurity
from .protocol.errors import ErrorCode, KafkaError

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")


class CliError(Exception):
    """A usage problem found after argument parsing (exits 1 with the message)."""


# -- argument parsing -------------------------------------------------------------------------


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    return key.strip(), value


def _positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if n <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return n


def _env_int(name: str) -> int | None:
    value = os.environ.get(name, "").strip()
    return int(value) if value.lstrip("-").isdigit() else None


def _seconds(text: str) -> float:
    try:
        s = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if s < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text!r}")
    return s


def _acks(text: str) -> int:
    try:
        return parse_acks(text)
    except ValueError:
        raise argparse.ArgumentTypeError("acks must be 0, 1, -1 or all") from None


def _offset(text: str) -> int:
    lowered = text.strip().lower()
    if lowered == "earliest":
        return OffsetSpec.EARLIEST
    if lowered == "latest":
        return OffsetSpec.LATEST
    try:
        n = int(lowered)
    except ValueError:
        raise argparse.ArgumentTypeError("offset must be a number, earliest or latest") from None
    if n < 0:
        raise argparse.ArgumentTypeError("offset must not be negative")
    return n


def _unescape(text: str) -> str:
    """Separators typed on a command line: "\\t" and "\\n" mean tab and newline."""
    return text.replace("\\t", "\t").replace("\\n", "\n")


def _client_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--bootstrap-server",
        default=DEFAULT_BOOTSTRAP,
        metavar="HOST:PORT[,...]",
        help=f"brokers to connect to first (default {DEFAULT_BOOTSTRAP})",
    )
    p.add_argument(
        "--request-timeout",
        type=_seconds,
        default=30.0,
        metavar="SECONDS",
        help="how long to wait for the cluster, retries included (default 30)",
    )
    p.add_argument(
        "--command-config",
        metavar="FILE",
        help="client properties: security.protocol, sasl.mechanism, sasl.username, "
        "sasl.password (or sasl.jaas.config), ssl.ca.location, ssl.certificate.location, "
        "ssl.key.location",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="odradek", description="Odradek: a Kafka-compatible broker and its tools."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("broker", help="run a broker", description="Run one broker.")
    p.add_argument("--config", metavar="FILE", help="server.properties-style config file")
    p.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set a config property (repeatable; wins over --config)",
    )

    topics = sub.add_parser("topics", help="create, list, describe, alter, delete topics")
    tsub = topics.add_subparsers(dest="action", metavar="ACTION", required=True)

    p = tsub.add_parser("create", help="create a topic")
    _client_options(p)
    p.add_argument("--topic", required=True)
    p.add_argument("--partitions", type=_positive_int, help="default: the broker's")
    p.add_argument("--replication-factor", type=_positive_int, help="default: the broker's")
    p.add_argument("--config", action="append", type=_key_value, default=[], metavar="KEY=VALUE")
    p.add_argument("--if-not-exists", action="store_true", help="no error if it exists")
    p.add_argument("--validate-only", action="store_true", help="check, do not create")

    p = tsub.add_parser("list", help="list topic names")
    _client_options(p)
    p.add_argument("--exclude-internal", action="store_true", help="hide internal topics")

    p = tsub.add_parser("describe", help="partitions, leaders, replicas and configs")
    _client_options(p)
    p.add_argument("--topic", action="append", default=[], help="repeatable; default: all")
    p.add_argument("--exclude-internal", action="store_true")

    p = tsub.add_parser("alter", help="add partitions or change configs")
    _client_options(p)
    p.add_argument("--topic", required=True)
    p.add_argument("--partitions", type=_positive_int, help="new total partition count")
    p.add_argument("--config", action="append", type=_key_value, default=[], metavar="KEY=VALUE")
    p.add_argument("--delete-config", action="append", default=[], metavar="KEY")

    p = tsub.add_parser("delete", help="delete topics")
    _client_options(p)
    p.add_argument("--topic", action="append", required=True, help="repeatable")
    p.add_argument("--if-exists", action="store_true", help="no error if it does not exist")

    groups = sub.add_parser("groups", help="list, describe, delete consumer groups")
    gsub = groups.add_subparsers(dest="action", metavar="ACTION", required=True)

    p = gsub.add_parser("list", help="list group ids")
    _client_options(p)
    p.add_argument("--state", action="append", default=[], help="only groups in this state")

    p = gsub.add_parser("describe", help="members, assignments, committed offsets and lag")
    _client_options(p)
    p.add_argument("--group", action="append", required=True, help="repeatable")

    p = gsub.add_parser("delete", help="delete empty groups and their offsets")
    _client_options(p)
    p.add_argument("--group", action="append", required=True, help="repeatable")

    txns = sub.add_parser("transactions", help="list and describe transactions")
    xsub = txns.add_subparsers(dest="action", metavar="ACTION", required=True)

    p = xsub.add_parser("list", help="transactional ids with their producer id and state")
    _client_options(p)
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

    p = xsub.add_parser("describe", help="state, producer, timeout and partitions")
    _client_options(p)
    p.add_argument("--transactional-id", action="append", required=True, help="repeatable")
    log_dirs = sub.add_parser("log-dirs", help="describe log dirs, move replicas between them")
    lsub = log_dirs.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = lsub.add_parser(
        "describe",
        help="each broker's log dirs, their replicas, sizes and lag",
        description="Like kafka-log-dirs --describe, as a table: one row per replica (a "
        "replica being moved into a dir shows as future, its lag the offsets it still misses).",
    )
    _client_options(p)
    p.add_argument("--broker", type=int, action="append", help="repeatable; default: all")
    p.add_argument("--topic", action="append", help="repeatable; default: all")
    p = lsub.add_parser(
        "move",
        help="move a replica to another log dir of its broker",
        description="Ask --broker to move its replica of --topic/--partition into --dir "
        "(AlterReplicaLogDirs); with --wait, return once the move is done.",
    )
    _client_options(p)
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", type=int, action="append", required=True, help="repeatable")
    p.add_argument("--broker", type=int, required=True)
    p.add_argument("--dir", required=True, metavar="PATH", help="an absolute log dir of --broker")
    p.add_argument("--wait", action="store_true", help="wait until the replicas moved")

    p = sub.add_parser(
        "ready",
        help="check that a broker serves the cluster (a readiness probe)",
        description="Exit 0 when the broker at --bootstrap-server answers DescribeCluster with "
        "a controller (and lists --broker-id, when given); otherwise print why and exit 1.",
    )
    _client_options(p)
    p.add_argument("--broker-id", type=int, help="this broker's id must be registered")

    p = sub.add_parser(
        "wait-drained",
        help="wait while a reassignment moves a broker's replicas away (a preStop hook)",
        description="Exit 0 once no partition reassignment is removing --broker-id from its "
        "replicas and either one did (the broker was drained) or --settle seconds passed "
        "without one starting (a restart, not a scale-down). Exit 1 after --timeout seconds "
        "while it is still being drained.",
    )
    _client_options(p)
    p.add_argument(
        "--broker-id",
        type=int,
        default=_env_int("BROKER_ID"),
        help="the broker to wait for (default: $BROKER_ID, which the Helm chart sets)",
    )
    p.add_argument(
        "--settle",
        type=_seconds,
        default=10.0,
        metavar="SECONDS",
        help="how long to wait for a drain to start (default 10)",
    )
    p.add_argument(
        "--timeout",
        type=_seconds,
        default=60.0,
        metavar="SECONDS",
        help="give up waiting after this long (default 60)",
    )
    p.add_argument("--interval", type=_seconds, default=1.0, help=argparse.SUPPRESS)

    sub.add_parser(
        "kafka-tool",
        help="run one of Apache Kafka's tools (kafka-topics.sh, ...): kafka-tool --help",
        add_help=False,
    )

    p = sub.add_parser(
        "produce",
        help="write records",
        description="Write records: each --value, or else one per line of standard input.",
    )
    _client_options(p)
    p.add_argument("--topic", required=True)
    p.add_argument("--value", action="append", help="a record value (repeatable)")
    p.add_argument("--key", help="key for every record")
    p.add_argument(
        "--key-separator",
        type=_unescape,
        metavar="SEP",
        help="split each input at the first SEP into key and value",
    )
    p.add_argument("--partition", type=int, help="default: by key, else spread")
    p.add_argument("--header", action="append", type=_key_value, default=[], metavar="KEY=VALUE")
    p.add_argument("--acks", type=_acks, default=-1, help="0, 1 or all (default all)")
    p.add_argument("--compression", choices=COMPRESSIONS, default="none")
    p.add_argument("--linger-ms", type=float, default=5.0, metavar="MS")
    p.add_argument(
        "--print-offsets", action="store_true", help="print partition and offset per record"
    )

    p = sub.add_parser(
        "consume",
        help="read records",
        description="Print records (value only by default), newest unless told otherwise.",
    )
    _client_options(p)
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", type=int, action="append", help="repeatable; default: all")
    start = p.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true", help="start at the oldest")
    start.add_argument("--offset", type=_offset, help="an offset, earliest or latest")
    p.add_argument("--max-messages", type=_positive_int, help="stop after N records")
    p.add_argument(
        "--timeout",
        type=_seconds,
        metavar="SECONDS",
        help="stop when no record arrived for this long (default: never)",
    )
    p.add_argument("--print-key", action="store_true")
    p.add_argument("--print-offset", action="store_true")
    p.add_argument("--print-partition", action="store_true")
    p.add_argument("--print-timestamp", action="store_true")
    p.add_argument("--print-headers", action="store_true")
    p.add_argument(
        "--key-separator",
        type=_unescape,
        default="\t",
        metavar="SEP",
        help="between key and value (default tab)",
    )
    p.add_argument(
        "--isolation-level",
        choices=("read_uncommitted", "read_committed"),
        default="read_uncommitted",
    )
    return parser


# -- commands ---------------------------------------------------------------------------------


def _security(args: argparse.Namespace) -> ClientSecurity | None:
    return ClientSecurity.from_file(args.command_config) if args.command_config else None


def _admin(args: argparse.Namespace) -> AdminClient:
    return AdminClient(
        args.bootstrap_server,
        client_id="odradek-cli",
        request_timeout=args.request_timeout,
        operation_timeout=args.request_timeout,
        retry_timeout=args.request_timeout,
        security=_security(args),
    )


async def topics_create(args: argparse.Namespace, out: TextIO) -> int:
    topic = NewTopic(
        args.topic,
        args.partitions or -1,
        args.replication_factor or -1,
        dict(args.config),
    )
    async with _admin(args) as admin:
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
    async with _admin(args) as admin:
        names = await admin.list_topics(include_internal=not args.exclude_internal)
    for name in names:
        out.write(name + "\n")
    return 0


def _ids(nodes: Sequence[int]) -> str:
    return ",".join(str(n) for n in nodes)


async def topics_describe(args: argparse.Namespace, out: TextIO) -> int:
    async with _admin(args) as admin:
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
    async with _admin(args) as admin:
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
    async with _admin(args) as admin:
        results = await admin.delete_topics(args.topic, raise_errors=False)
    for name in args.topic:
        error = results[name].error
        if error is None:
            out.write(f"Deleted topic {name}.\n")
        elif not (args.if_exists and error.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
            raise error
    return 0


async def groups_list(args: argparse.Namespace, out: TextIO) -> int:
    async with _admin(args) as admin:
        listed = await admin.list_groups(args.state or None)
    for g in listed:
        out.write(g.group_id + "\n")
    return 0


async def groups_describe(args: argparse.Namespace, out: TextIO) -> int:
    """Like kafka-consumer-groups.sh --describe: one row per partition the group has an
    offset for or a member owns, with the log end offset and the lag."""
    async with _admin(args) as admin:
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
            widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
            for r in rows:
                out.write("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())
                out.write("\n")
    return 0


async def groups_delete(args: argparse.Namespace, out: TextIO) -> int:
    async with _admin(args) as admin:
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


def _table(rows: list[tuple[str, ...]], out: TextIO) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        out.write("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() + "\n")


async def transactions_list(args: argparse.Namespace, out: TextIO) -> int:
    """Like kafka-transactions.sh list: one row per transactional id."""
    async with _admin(args) as admin:
        listed = await admin.list_transactions(args.state, args.producer_id, args.duration_ms)
    rows = [("TRANSACTIONAL-ID", "COORDINATOR", "PRODUCER-ID", "STATE")]
    rows += [(t.transactional_id, str(t.coordinator), str(t.producer_id), t.state) for t in listed]
    _table(rows, out)
    return 0


async def transactions_describe(args: argparse.Namespace, out: TextIO) -> int:
    """Like kafka-transactions.sh describe, with the partitions of the open transaction."""
    async with _admin(args) as admin:
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
    _table(rows, out)
    return 0


async def log_dirs_describe(args: argparse.Namespace, out: TextIO) -> int:
    async with _admin(args) as admin:
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
    _table(rows, out)
    return 0


async def log_dirs_move(args: argparse.Namespace, out: TextIO) -> int:
    if not os.path.isabs(args.dir):
        raise CliError(f"--dir must be an absolute path, not {args.dir!r}")
    replicas = [(TopicPartition(args.topic, p), args.broker) for p in args.partition]
    async with _admin(args) as admin:
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


async def _stdin_lines() -> Any:
    """Lines of standard input as bytes (line ending removed), read by a thread so the event
    loop keeps sending; at most a bounded number of lines wait in memory."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[bytes | BaseException | None] = asyncio.Queue()
    room = threading.Semaphore(10000)

    def reader() -> None:
        try:
            for line in sys.stdin.buffer:
                room.acquire()
                loop.call_soon_threadsafe(queue.put_nowait, line)
        except BaseException as e:  # noqa: BLE001 - handed to the loop
            loop.call_soon_threadsafe(queue.put_nowait, e)
        loop.call_soon_threadsafe(queue.put_nowait, None)

    threading.Thread(target=reader, name="odradek-stdin", daemon=True).start()
    while True:
        item = await queue.get()
        if item is None:
            return
        if isinstance(item, BaseException):
            raise item
        room.release()
        if item.endswith(b"\n"):
            item = item[:-1]
            if item.endswith(b"\r"):
                item = item[:-1]
        yield item


async def produce(args: argparse.Namespace, out: TextIO) -> int:
    try:
        compression = parse_compression(args.compression)
    except ValueError as e:
        raise CliError(str(e)) from None
    headers = [(k, v.encode()) for k, v in args.header]
    separator = args.key_separator.encode() if args.key_separator else None
    failures: list[BaseException] = []

    def report(future: asyncio.Future[Any]) -> None:
        if future.cancelled():
            return
        error = future.exception()
        if error is not None:
            failures.append(error)
        elif args.print_offsets:
            meta = future.result()
            out.write(f"{meta.topic}\t{meta.partition}\t{meta.offset}\n")

    async def values() -> Any:
        if args.value is not None:
            for v in args.value:
                yield v.encode()
        else:
            async for line in _stdin_lines():
                yield line

    async with Producer(
        args.bootstrap_server,
        client_id="odradek-cli",
        acks=args.acks,
        compression=compression,
        linger_ms=args.linger_ms,
        request_timeout=args.request_timeout,
        max_block=args.request_timeout,
        delivery_timeout=max(args.request_timeout, 1.0) * 2,
        security=_security(args),
    ) as producer:
        key = args.key.encode() if args.key is not None else None
        async for data in values():
            if failures:
                break
            k, v = key, data
            if separator is not None:
                head, sep, tail = data.partition(separator)
                if not sep:
                    raise CliError(f"no key separator {args.key_separator!r} in {data[:60]!r}")
                k, v = head, tail
            future = await producer.send(
                args.topic, v, key=k, partition=args.partition, headers=headers
            )
            future.add_done_callback(report)
        with contextlib.suppress(KafkaError):
            await producer.flush()
    if failures:
        raise failures[0]
    return 0


def format_record(r: ConsumerRecord, args: argparse.Namespace) -> bytes:
    parts: list[bytes] = []
    if args.print_timestamp:
        kind = "LogAppendTime" if r.timestamp_type == 1 else "CreateTime"
        parts.append(f"{kind}:{r.timestamp}".encode())
    if args.print_partition:
        parts.append(f"Partition:{r.partition}".encode())
    if args.print_offset:
        parts.append(f"Offset:{r.offset}".encode())
    if args.print_headers:
        parts.append(
            b",".join(k.encode() + b":" + (b"null" if v is None else v) for k, v in r.headers)
            or b"NO_HEADERS"
        )
    value = b"null" if r.value is None else r.value
    if args.print_key:
        key = b"null" if r.key is None else r.key
        value = key + args.key_separator.encode() + value
    parts.append(value)
    return b"\t".join(parts) + b"\n"


async def consume(args: argparse.Namespace, out: TextIO) -> int:
    sink = out.buffer if hasattr(out, "buffer") else None
    count = 0
    async with Consumer(
        args.bootstrap_server,
        client_id="odradek-cli",
        auto_offset_reset="earliest" if args.from_beginning else "latest",
        isolation_level=args.isolation_level,
        request_timeout=args.request_timeout,
        retry_timeout=args.request_timeout,
        security=_security(args),
    ) as consumer:
        tps = await consumer.assign_topic(args.topic)
        if args.partition:
            missing = [p for p in args.partition if TopicPartition(args.topic, p) not in tps]
            if missing:
                raise KafkaError(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"topic {args.topic!r} has no partition {missing[0]} ({len(tps)} partitions)",
                )
            tps = [TopicPartition(args.topic, p) for p in args.partition]
            consumer.assign(tps)
        if args.offset is not None:
            for tp in tps:
                consumer.seek(tp, args.offset)
        idle_since = asyncio.get_running_loop().time()
        while args.max_messages is None or count < args.max_messages:
            wait = 1.0
            if args.timeout is not None:
                left = args.timeout - (asyncio.get_running_loop().time() - idle_since)
                if left <= 0:
                    break
                wait = min(wait, left)
            limit = None if args.max_messages is None else args.max_messages - count
            records = await consumer.poll(wait, max_records=limit)
            if not records:
                continue
            idle_since = asyncio.get_running_loop().time()
            data = b"".join(format_record(r, args) for r in records)
            if sink is not None:
                sink.write(data)
                sink.flush()
            else:
                out.write(data.decode(errors="replace"))
                out.flush()
            count += len(records)
    sys.stderr.write(f"Processed a total of {count} messages\n")
    return 0


async def ready(args: argparse.Namespace, out: TextIO) -> int:
    async with _admin(args) as admin:
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
    async with _admin(args) as admin:
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


_COMMANDS: dict[tuple[str, str | None], Callable[[argparse.Namespace, TextIO], Awaitable[int]]] = {
    ("topics", "create"): topics_create,
    ("topics", "list"): topics_list,
    ("topics", "describe"): topics_describe,
    ("topics", "alter"): topics_alter,
    ("topics", "delete"): topics_delete,
    ("groups", "list"): groups_list,
    ("groups", "describe"): groups_describe,
    ("groups", "delete"): groups_delete,
    ("transactions", "list"): transactions_list,
    ("transactions", "describe"): transactions_describe,
    ("log-dirs", "describe"): log_dirs_describe,
    ("log-dirs", "move"): log_dirs_move,
    ("produce", None): produce,
    ("consume", None): consume,
    ("ready", None): ready,
    ("wait-drained", None): wait_drained,
}


def run_broker_command(args: argparse.Namespace) -> int:
    # Imported here: the client commands must work without the server's dependencies loaded.
    from odradek.broker.server.main import run_broker

    result = run_broker(args.config, list(args.override))
    return result if isinstance(result, int) else 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["kafka-tool"]:
        # Everything after the tool's name is the tool's own: no parsing here.
        from .kafka_tools import main as kafka_tool

        return kafka_tool(argv[1:])
    args = build_parser().parse_args(argv)
    if args.command == "broker":
        return run_broker_command(args)
    handler = _COMMANDS[(args.command, getattr(args, "action", None))]
    try:
        return asyncio.run(handler(args, sys.stdout))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): not an error; keep Python from complaining.
        with contextlib.suppress(OSError):
            sys.stdout = open("/dev/null", "w")  # noqa: SIM115
        return 0
    except (KafkaError, CliError, ValueError, OSError) as e:
        sys.stderr.write(f"error: {_describe_error(e)}\n")
        return 1


def _describe_error(e: BaseException) -> str:
    if isinstance(e, KafkaError):
        return f"{e.code.name}: {e.message}" if e.message else e.code.name
    return str(e) or type(e).__name__


if __name__ == "__main__":
    sys.exit(main())
