"""`odradek produce` and `odradek consume`: records from and to a terminal, like
kafka-console-producer.sh and kafka-console-consumer.sh."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import threading
from typing import Any, TextIO

from ..client.cluster import TopicPartition
from ..client.consumer import Consumer, ConsumerRecord
from ..client.producer import Producer, parse_compression
from ..protocol.errors import ErrorCode, KafkaError
from .common import (
    CliError,
    Commands,
    Subparsers,
    acks,
    client_parser,
    connection,
    key_value,
    offset,
    positive_int,
    seconds_option,
    unescape,
)

COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")


def _records_parser(
    sub: Subparsers, name: str, help: str, description: str
) -> argparse.ArgumentParser:
    """A client command on the records of one topic: produce and consume."""
    p = client_parser(sub, name, help=help, description=description)
    p.add_argument("--topic", required=True)
    return p


def _key_separator(p: argparse.ArgumentParser, default: str | None, help: str) -> None:
    p.add_argument("--key-separator", type=unescape, default=default, metavar="SEP", help=help)


def add_parsers(sub: Subparsers) -> None:
    p = _records_parser(
        sub,
        "produce",
        "write records",
        "Write records: each --value, or else one per line of standard input.",
    )
    p.add_argument("--value", action="append", help="a record value (repeatable)")
    p.add_argument("--key", help="key for every record")
    _key_separator(p, None, "split each input at the first SEP into key and value")
    p.add_argument("--partition", type=int, help="default: by key, else spread")
    p.add_argument("--header", action="append", type=key_value, default=[], metavar="KEY=VALUE")
    p.add_argument("--acks", type=acks, default=-1, help="0, 1 or all (default all)")
    p.add_argument("--compression", choices=COMPRESSIONS, default="none")
    p.add_argument("--linger-ms", type=float, default=5.0, metavar="MS")
    p.add_argument(
        "--print-offsets", action="store_true", help="print partition and offset per record"
    )

    p = _records_parser(
        sub,
        "consume",
        "read records",
        "Print records (value only by default), newest unless told otherwise.",
    )
    p.add_argument("--partition", type=int, action="append", help="repeatable; default: all")
    start = p.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true", help="start at the oldest")
    start.add_argument("--offset", type=offset, help="an offset, earliest or latest")
    p.add_argument("--max-messages", type=positive_int, help="stop after N records")
    seconds_option(
        p, "--timeout", None, "stop when no record arrived for this long (default: never)"
    )
    p.add_argument("--print-key", action="store_true")
    p.add_argument("--print-offset", action="store_true")
    p.add_argument("--print-partition", action="store_true")
    p.add_argument("--print-timestamp", action="store_true")
    p.add_argument("--print-headers", action="store_true")
    _key_separator(p, "\t", "between key and value (default tab)")
    p.add_argument(
        "--isolation-level",
        choices=("read_uncommitted", "read_committed"),
        default="read_uncommitted",
    )


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
        acks=args.acks,
        compression=compression,
        linger_ms=args.linger_ms,
        max_block=args.request_timeout,
        delivery_timeout=max(args.request_timeout, 1.0) * 2,
        **connection(args),
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
        auto_offset_reset="earliest" if args.from_beginning else "latest",
        isolation_level=args.isolation_level,
        retry_timeout=args.request_timeout,
        **connection(args),
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


COMMANDS: Commands = {
    ("produce", None): produce,
    ("consume", None): consume,
}
