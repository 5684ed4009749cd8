"""The e2e suite's clients, run inside the cluster by the Odradek image's Python.

The tests ship this file in the ConfigMap e2e-clients (mounted at /clients) and run it in client
pods (`python /clients/e2e_client.py COMMAND ...`); it talks to the brokers through the project's
own client, the way an application in the cluster would. Output is one line per fact, parsed by
the tests:

  produce     ack <partition> <offset> <seq>  per acknowledged record (acks=all), fail <seq> <error>
              per record given up on; runs until --stop-file exists, then `done <acked> <failed>`
  consume     rec <partition> <offset> <value> for every record below the end offsets it found
              when it started, then `done <count>`
  throttle    one JSON line: the largest throttle_time_ms of its Produce responses
  try         one JSON line: whether a produce and a fetch went through, and the error if not
  admin       one JSON line: a topic's layout and configs, broker configs, reassignments

The brokers are at $BOOTSTRAP. SASL settings, when given, come from $SECURITY_PROTOCOL,
$SASL_MECHANISM, $SASL_USERNAME and $SASL_PASSWORD (what a User's Secret holds).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from odradek.broker.client import AdminClient, Consumer, Producer, TopicPartition
from odradek.broker.client.admin import ConfigResource, ConfigSource, OffsetSpec
from odradek.broker.client.cluster import ClusterClient
from odradek.broker.client.security import ClientSecurity
from odradek.broker.protocol.api_keys import ApiKey
from odradek.broker.protocol.errors import KafkaError
from odradek.broker.records.record import Record, build_batch

BOOTSTRAP = os.environ.get("BOOTSTRAP", "odradek-bootstrap.kafka.svc.cluster.local:9092")


def security() -> ClientSecurity | None:
    props = {
        key: os.environ[env]
        for key, env in (
            ("security.protocol", "SECURITY_PROTOCOL"),
            ("sasl.mechanism", "SASL_MECHANISM"),
            ("sasl.username", "SASL_USERNAME"),
            ("sasl.password", "SASL_PASSWORD"),
        )
        if os.environ.get(env)
    }
    return ClientSecurity.from_properties(props) if props else None


def say(*parts: object) -> None:
    print(*parts, flush=True)


# -- produce / consume ---------------------------------------------------------------------


async def produce(args: argparse.Namespace) -> int:
    """Write "<seq>" keyed k<seq % keys> every --interval seconds until the stop file appears;
    report each acknowledgement as it comes."""
    acked = failed = 0

    def report(seq: int, fut: asyncio.Future) -> None:
        nonlocal acked, failed
        if fut.exception() is not None:
            failed += 1
            say("fail", seq, repr(fut.exception()))
        else:
            meta = fut.result()
            acked += 1
            say("ack", meta.partition, meta.offset, seq)

    async with Producer(
        BOOTSTRAP, acks="all", client_id="e2e-producer", security=security(), linger_ms=5
    ) as producer:
        pending: set[asyncio.Future] = set()
        seq = 0
        deadline = time.monotonic() + args.max_seconds
        while not os.path.exists(args.stop_file) and time.monotonic() < deadline:
            seq += 1
            try:
                fut = await producer.send(args.topic, str(seq), key=f"k{seq % args.keys}")
            except KafkaError as e:  # no metadata for now: that record is not written
                failed += 1
                say("fail", seq, repr(e))
            else:
                fut.add_done_callback(lambda f, s=seq: report(s, f))
                pending.add(fut)
                fut.add_done_callback(pending.discard)
            await asyncio.sleep(args.interval)
        if pending:
            await asyncio.wait(pending)
    say("done", acked, failed)
    return 0


async def consume(args: argparse.Namespace) -> int:
    count = 0
    async with Consumer(
        BOOTSTRAP, auto_offset_reset="earliest", client_id="e2e-consumer", security=security()
    ) as consumer:
        tps = await consumer.assign_topic(args.topic)
        ends = await consumer.end_offsets(tps)
        consumer.seek_to_beginning(*tps)
        remaining = {tp for tp in tps if ends[tp] > 0}
        while remaining:
            for r in await consumer.poll(timeout=1.0):
                tp = TopicPartition(r.topic, r.partition)
                if r.offset < ends[tp]:
                    say("rec", r.partition, r.offset, r.value.decode())
                    count += 1
                if r.offset + 1 >= ends[tp]:
                    remaining.discard(tp)
    say("done", count)
    return 0


# -- quotas and ACLs -------------------------------------------------------------------------


async def throttle(args: argparse.Namespace) -> int:
    """Send --requests Produce requests of --batch-bytes each as client id --client-id and report
    the largest throttle time the broker answered with (the producer hides it)."""
    most = 0
    async with ClusterClient(BOOTSTRAP, client_id=args.client_id) as cluster:
        meta = await cluster.retry(lambda: cluster.topic(args.topic), what="metadata")
        leader = meta.partitions[0].leader
        payload = b"x" * args.batch_bytes
        for _ in range(args.requests):
            batch = build_batch([Record(0, int(time.time() * 1000), None, payload)])
            conn = await cluster.connection(leader)
            resp = await conn.request(
                ApiKey.PRODUCE,
                {
                    "transactional_id": None,
                    "acks": -1,
                    "timeout_ms": 30000,
                    "topic_data": [
                        {"name": args.topic, "partition_data": [{"index": 0, "records": batch}]}
                    ],
                },
                min_version=3,
            )
            most = max(most, resp.get("throttle_time_ms", 0))
    say(json.dumps({"throttle_time_ms": most}))
    return 0


async def try_access(args: argparse.Namespace) -> int:
    """Produce one record to --topic, then read it back; report what the broker allowed."""
    result: dict[str, object] = {"produce": None, "fetch": None}
    try:
        async with Producer(
            BOOTSTRAP, security=security(), acks="all", max_block=20, delivery_timeout=20
        ) as producer:
            await producer.send_and_wait(args.topic, "allowed?")
        result["produce"] = "ok"
    except KafkaError as e:
        result["produce"] = e.code.name
    except Exception as e:  # a failed login surfaces as a connection error
        result["produce"] = f"{type(e).__name__}: {e}"
    try:
        async with Consumer(
            BOOTSTRAP, security=security(), auto_offset_reset="earliest", retry_timeout=20
        ) as consumer:
            tp = TopicPartition(args.topic, 0)
            consumer.assign([tp])
            consumer.seek_to_beginning(tp)
            records = await consumer.poll(timeout=5.0)
        result["fetch"] = "ok" if records else "empty"
    except KafkaError as e:
        result["fetch"] = e.code.name
    except Exception as e:
        result["fetch"] = f"{type(e).__name__}: {e}"
    say(json.dumps(result))
    return 0


# -- admin queries -----------------------------------------------------------------------------


async def admin(args: argparse.Namespace) -> int:
    async with AdminClient(BOOTSTRAP, security=security()) as a:
        if args.what == "topic":
            topics = await a.describe_topics()
            if args.name not in topics:
                say(json.dumps(None))
                return 0
            t = topics[args.name]
            configs = (await a.describe_configs([ConfigResource.topic(args.name)]))[
                ConfigResource.topic(args.name)
            ]
            tps = [TopicPartition(args.name, p.partition) for p in t.partitions]
            ends = await a.list_offsets({tp: OffsetSpec.LATEST for tp in tps}) if tps else {}
            say(
                json.dumps(
                    {
                        "partitions": {
                            str(p.partition): {
                                "replicas": p.replicas,
                                "isr": p.isr,
                                "leader": p.leader,
                            }
                            for p in t.partitions
                        },
                        "configs": {
                            k: e.value
                            for k, e in configs.items()
                            if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG
                        },
                        "end_offsets": {str(tp.partition): o.offset for tp, o in ends.items()},
                    }
                )
            )
        elif args.what == "broker-config":
            resource = ConfigResource.broker(args.name)
            entries = (await a.describe_configs([resource]))[resource]
            say(json.dumps({k: entries[k].value for k in args.keys if k in entries}))
        elif args.what == "reassignments":
            say(json.dumps(len(await a.list_partition_reassignments())))
        elif args.what == "topics":
            say(json.dumps(sorted(await a.list_topics(include_internal=True))))
        elif args.what == "brokers":
            say(json.dumps(sorted(b.node_id for b in (await a.describe_cluster()).brokers)))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(prog="e2e_client")
    sub = parser.add_subparsers(dest="command", required=True)

    def command(
        name: str, run: Callable[..., Any], *, topic: bool = True
    ) -> argparse.ArgumentParser:
        """A subcommand that runs `run`; all but `admin` act on one --topic."""
        p = sub.add_parser(name)
        p.set_defaults(run=run)
        if topic:
            p.add_argument("--topic", required=True)
        return p

    p = command("produce", produce)
    p.add_argument("--stop-file", required=True)
    p.add_argument("--interval", type=float, default=0.02)
    p.add_argument("--keys", type=int, default=24)
    p.add_argument("--max-seconds", type=float, default=1800)
    command("consume", consume)
    p = command("throttle", throttle)
    p.add_argument("--client-id", required=True)
    p.add_argument("--requests", type=int, default=20)
    p.add_argument("--batch-bytes", type=int, default=65536)
    command("try", try_access)
    p = command("admin", admin, topic=False)
    p.add_argument("what", choices=("topic", "topics", "broker-config", "reassignments", "brokers"))
    p.add_argument("name", nargs="?", default="")
    p.add_argument("keys", nargs="*")
    args = parser.parse_args()
    return asyncio.run(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
