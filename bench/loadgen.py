"""Load generator of bench/run.py: one client phase, run in its own process.

The runner starts this script once per phase (several at once for concurrent producers and
consumer groups) so the client never shares an interpreter with the orchestration code or with
another client. The last line printed on stdout is a JSON object with the measurement.

    loadgen.py create --topic PREFIX [--topic PREFIX ...] --partitions P [--replication R]
                      [--config K=V ...] [--one-by-one]
    loadgen.py produce --topic T --records N|--seconds S --size B --acks 1|all
                       [--compression C] [--idempotent] [--rate R] [--go-file F] [--stamp]
    loadgen.py consume --topic T --records N --partitions P [--seconds S [--readers K]]
    loadgen.py group-consume --topic T --group G --work-dir D [--latency]
    loadgen.py txn-produce --topic T --records N|--seconds S --size B --txn-records K|--txn-ms M
    loadgen.py metadata --topic T [--topic T ...] --partitions P --requests N
    loadgen.py list-offsets --topic T --partitions P --requests N

Every phase takes --bootstrap H:P and --duration S (a time bound).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import struct
import sys
import time
import uuid
from array import array
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

STAMP = struct.Struct("<d")  # the producer's wall clock, first 8 bytes of a stamped value
# A paced producer sleeps at least this long between the records it sends (then sends all that
# are due, each stamped as it goes): waking for every record, the cluster's 8 producers took 1.1
# of the machine's 2 cores to offer 10,000 records/s and every process waited for a core
# (bench/README.md, ninth round).
PACE_TICK = 0.005
WORDS = (
    b"order customer amount currency status created updated region product quantity price "
    b"warehouse shipped pending paid refunded EUR USD GBP north south east west alpha beta"
).split()


def payloads(size: int, kind: str, count: int = 16) -> list[bytes]:
    """`count` distinct values: random bytes (incompressible) or text made of a small
    vocabulary, which compresses about 3 to 4 times like typical JSON records do."""
    if kind == "random":
        return [os.urandom(size) for _ in range(count)]
    rng = random.Random(size)
    out = []
    for _ in range(count):
        words: list[bytes] = []
        length = 0
        while length < size:
            w = rng.choice(WORDS) + b'":"' + str(rng.randrange(100_000)).encode() + b'","'
            words.append(w)
            length += len(w)
        out.append(b"".join(words)[:size])
    return out


def create(args: argparse.Namespace) -> dict:
    """Create ``<prefix>-<random>`` for each --topic prefix (in one request, or one request
    per topic with --one-by-one) and wait until every partition has a leader."""
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    config = dict(item.split("=", 1) for item in args.config)
    return create_topics(admin, args.topic, args.partitions, args.replication, config,
                         args.duration, one_by_one=args.one_by_one)  # fmt: skip


def create_topics(
    admin: AdminClient,
    prefixes: list[str],
    partitions: int,
    replication: int,
    config: dict[str, str],
    timeout: float,
    *,
    one_by_one: bool = False,
) -> dict:
    """The create phase's work, which the runner also calls in its own process for the topics
    it does not time (a process per topic cost 0.3 s here, 0.2 of it the interpreter's start)."""
    names = [f"{prefix}-{uuid.uuid4().hex[:8]}" for prefix in prefixes]
    new = [NewTopic(n, partitions, replication, config=config) for n in names]
    started = time.perf_counter()
    for batch in [[t] for t in new] if one_by_one else [new]:
        futures = admin.create_topics(batch, operation_timeout=timeout)
        for future in futures.values():
            future.result(timeout)
    deadline = time.monotonic() + timeout
    waiting = list(names)
    while waiting and time.monotonic() < deadline:
        metas = admin.list_topics(timeout=10).topics
        for name in list(waiting):
            meta = metas.get(name)
            if (
                meta is not None
                and meta.error is None
                and len(meta.partitions) == partitions
                and all(p.leader >= 0 for p in meta.partitions.values())
            ):
                waiting.remove(name)
        if waiting:
            time.sleep(0.05)
    if waiting:
        return {"phase": "create", "topics": None, "error": f"no partition leaders for {waiting}"}
    return {"phase": "create", "topics": names, "seconds": time.perf_counter() - started}


def produce(args: argparse.Namespace) -> dict:
    """Send up to ``records`` values of ``size`` bytes, as fast as possible or at ``rate``
    records/s; time from the first send to the last acknowledgement. With ``seconds``: send as
    fast as the client accepts for that long (the clock starts once the producer is warm), then
    flush; the time runs to the flush's return."""
    conf = {
        "bootstrap.servers": args.bootstrap,
        "acks": args.acks,
        "linger.ms": args.linger_ms,
        "compression.type": args.compression,
        "queue.buffering.max.messages": 200_000,
        "queue.buffering.max.kbytes": 256 * 1024,
        "enable.idempotence": args.idempotent,
        "client.id": "odradek-bench-producer",
    }
    # As fast as can, unstamped: whole lists of records per call and delivery reports for
    # failures only (see send_batches); paced or stamped records go one by one.
    batched = not args.rate and not args.stamp
    if batched:
        conf["delivery.report.only.error"] = True
    producer = Producer(conf)
    # Several distinct payloads, so no layer can get away with caching one buffer.
    values = payloads(args.size, args.payload)
    failed = 0
    first_error: str | None = None

    def on_delivery(err, _msg) -> None:  # batched: called for failures only
        nonlocal failed, first_error
        if err is not None:
            failed += 1
            if first_error is None:
                first_error = str(err)

    meta = producer.list_topics(args.topic, timeout=30)  # connections and metadata first
    found = meta.topics.get(args.topic)
    count = len(found.partitions) if found is not None and found.partitions else 1
    if args.seconds:
        # Warm before the clock: one record to every partition, acknowledged, so the
        # connection to each leader and an idempotent producer's id (InitProducerId) are done.
        for partition in range(count):
            producer.produce(args.topic, values[partition & 15], partition=partition)
        producer.flush(30)
        failed = 0
        first_error = None
    if args.go_file:  # concurrent producers start together: ready, then wait for the signal
        go = Path(args.go_file)
        Path(f"{go}.ready-{os.getpid()}").write_text("1")
        deadline = time.monotonic() + 120
        while not go.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
    sent = 0
    start_wall = time.time()
    start = time.perf_counter()
    stop_at = start + (args.seconds or args.duration)
    limit = args.records if not args.seconds else sys.maxsize
    interval = 1.0 / args.rate if args.rate else 0.0
    if batched:
        sent = send_batches(producer, args.topic, values, count if args.even else 0, limit,
                            stop_at, on_delivery)  # fmt: skip
    else:
        while sent < limit:
            now = time.perf_counter()
            if now >= stop_at:
                break
            if interval and (wait := start + sent * interval - now) > 0:
                producer.poll(0)  # delivery reports
                time.sleep(max(wait, PACE_TICK))
                continue
            value = values[sent & 15]
            if args.stamp:
                value = STAMP.pack(time.time()) + value[STAMP.size :]
            try:
                # -1: the client's partitioner picks (librdkafka's RD_KAFKA_PARTITION_UA)
                partition = sent % count if args.even else -1
                producer.produce(args.topic, value, partition=partition, on_delivery=on_delivery)
                sent += 1
            except BufferError:
                producer.poll(0.05)
                continue
            if sent & 1023 == 0:
                producer.poll(0)
    remaining = producer.flush(max(args.duration, 30.0))
    elapsed = time.perf_counter() - start
    # Flushed: every record queued was delivered, failed (reported) or is left.
    delivered = sent - failed - remaining
    return {
        "phase": "produce",
        "sent": sent,
        "records": delivered,
        "failed": failed,
        "undelivered": remaining,
        "bytes": delivered * args.size,
        "seconds": elapsed,
        "start_wall": start_wall,
        "end_wall": time.time(),
        "error": first_error,
    }


BATCH = 1000  # records per produce_batch() call


def send_batches(
    producer: Producer,
    topic: str,
    values: list[bytes],
    partitions: int,
    limit: int,
    stop_at: float,
    on_delivery: Callable[[object, object], None],
) -> int:
    """Queue up to `limit` records until `stop_at` with produce_batch(), BATCH records a
    round; the records queued. Values cycle through `values`. With `partitions`, a round
    gives each partition its share (the client takes a list's partition from the call, not
    from its records), and the last round splits what is left evenly; without, the client's
    partitioner picks. One produce() and one delivery callback per record cost the Python
    client about 1.7 us a record, which capped a producer at 600,000 records of 100 B a second
    on either system (bench/README.md, "Phase length"). A full queue takes what fits of a
    list; the next round offers the whole list again."""
    targets = list(range(partitions)) if partitions else [-1]  # -1: the partitioner picks
    share = -(-BATCH // len(targets))
    lists = [[{"value": values[i % len(values)]} for i in range(share)] for _ in targets]
    sent = 0
    while sent < limit and time.perf_counter() < stop_at:
        left = limit - sent
        full = 0
        for index, (partition, records) in enumerate(zip(targets, lists, strict=True)):
            if left < share * len(targets):  # the last round: an even split of the rest
                records = records[: left // len(targets) + (index < left % len(targets))]
            if not records:
                continue
            queued = producer.produce_batch(topic, records, partition, on_delivery=on_delivery)
            sent += queued
            if queued < len(records):
                full += 1
                for record in records:
                    record.pop("_error", None)
        producer.poll(0.05 if full else 0)
    return sent


def txn_produce(args: argparse.Namespace) -> dict:
    """A transactional producer committing one transaction after the other: ``txn_records``
    values each, or with ``txn_ms`` as many values as the client takes in that many
    milliseconds (Kafka Streams commits every 100 ms under exactly-once). Time from the first
    begin to the last commit, counting committed records only, and the percentiles of the
    transactions' times from begin to the commit's return. With ``seconds``: transactions
    begin for that long, after one unmeasured transaction."""
    producer = Producer(
        {
            "bootstrap.servers": args.bootstrap,
            "transactional.id": f"odradek-bench-{uuid.uuid4().hex[:8]}",
            "linger.ms": args.linger_ms,
            "compression.type": "none",
            "client.id": "odradek-bench-txn-producer",
        }
    )
    producer.init_transactions(30)
    values = payloads(args.size, args.payload)

    def transaction() -> int:
        producer.begin_transaction()
        if args.txn_ms:
            sent = 0
            until = time.perf_counter() + args.txn_ms / 1000
            while time.perf_counter() < until:
                try:
                    producer.produce(args.topic, values[sent & 15])
                    sent += 1
                except BufferError:  # the queue is full: let librdkafka send
                    producer.poll(0.001)
        else:
            for i in range(args.txn_records):
                producer.produce(args.topic, values[i & 15])
            sent = args.txn_records
        producer.commit_transaction(30)
        return sent

    if args.seconds:  # one transaction before the clock: coordinator, leaders, partitions
        transaction()
    limit = args.records if not args.seconds else sys.maxsize
    committed = 0
    took: list[float] = []
    start = time.perf_counter()
    stop_at = start + (args.seconds or args.duration)
    while committed < limit and (began := time.perf_counter()) < stop_at:
        committed += transaction()
        took.append((time.perf_counter() - began) * 1000)
    elapsed = time.perf_counter() - start
    took.sort()
    return {
        "phase": "txn-produce",
        "records": committed,
        "bytes": committed * args.size,
        "seconds": elapsed,
        "transactions": len(took),
        "txn_p50_ms": percentile(took, 0.5),
        "txn_p99_ms": percentile(took, 0.99),
        "error": None,
    }


def percentile(ordered: list[float], q: float) -> float:
    """The `q` quantile of sorted samples (the sample at rank q*n, no interpolation); NaN when
    there are none."""
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)] if ordered else float("nan")


# Every consumer here refetches a partition 10 ms after its local queue was full, not
# librdkafka's default 1 s (fetch.queue.backoff.ms): the queue holds about 100,000 records
# (queued.min.messages) or 64 MB, which the reader drains in half a second, and then sat idle
# until the second was up. A 1,000,000-record read of 100 B values took 4.5 s that way on both
# systems alike, of which 3.8 s was this wait; 0.7 s without it.
REFETCH = {"fetch.queue.backoff.ms": 10}


def consume(args: argparse.Namespace) -> dict:
    """Read every partition from the beginning until ``records`` values have arrived. With
    ``seconds``: read for that long, starting over from the beginning each time ``records``
    (all the topic holds) have arrived, so a phase lasts the same on both systems however
    fast they serve (a 1 GB topic is read in under a second); ``readers`` consumers one after
    the other share those seconds. One consumer's rate stays within a few percent pass after
    pass but moved by a fifth from one consumer to the next, on both systems: a phase of one
    reader measures one draw of that."""
    received = nbytes = 0
    elapsed = 0.0
    first_error: str | None = None
    readers = args.readers if args.seconds else 1
    for _ in range(readers):
        got, size, seconds, error = read(args, args.seconds / readers)
        received, nbytes, elapsed = received + got, nbytes + size, elapsed + seconds
        first_error = first_error or error
    wanted = args.records if not args.seconds else 1
    return {
        "phase": "consume",
        "records": received,
        "bytes": nbytes,
        "seconds": elapsed,
        "passes": received / args.records,
        "error": first_error if received < wanted else None,
    }


def read(args: argparse.Namespace, seconds: float) -> tuple[int, int, float, str | None]:
    """One consumer's part of `consume`: records, bytes, seconds, the first error."""
    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": f"odradek-bench-{os.getpid()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "client.id": "odradek-bench-consumer",
            **REFETCH,
            # At the end of a pass every partition's fetch waits at the broker for new
            # records, 500 ms by default, before the next pass's fetch can go: 0.47 s lost
            # per pass, on both systems.
            "fetch.wait.max.ms": 10,
        }
    )
    everything = [TopicPartition(args.topic, p, OFFSET_BEGINNING) for p in range(args.partitions)]
    # Metadata before the assignment and the clock: a partition assigned before librdkafka
    # knows its leader waits for a 500 ms offset-query timer, which a race decided in about
    # half of the runs, on both systems (0.5 s of a 0.6 s phase over 1,000 partitions).
    consumer.list_topics(args.topic, timeout=30)
    consumer.assign(everything)
    received = nbytes = in_pass = 0
    first_error: str | None = None
    start = time.perf_counter()
    stop_at = start + (seconds or args.duration)
    limit = sys.maxsize if seconds else args.records
    try:
        while received < limit and time.perf_counter() < stop_at:
            if in_pass == args.records:  # the end of every partition: from the start again
                consumer.assign(everything)
                in_pass = 0
            # never ask for more than remain: consume() waits out its timeout for a short batch
            wanted = min(10_000, args.records - in_pass)
            for msg in consumer.consume(num_messages=wanted, timeout=0.5):
                err = msg.error()
                if err is not None:
                    if first_error is None and err.code() != KafkaError._PARTITION_EOF:
                        first_error = str(err)
                    continue
                received += 1
                in_pass += 1
                nbytes += len(msg.value() or b"")
        elapsed = time.perf_counter() - start
    finally:
        consumer.close()
    return received, nbytes, elapsed, first_error


class _Member:
    """A group member's rebalance callbacks: before the go it takes its partitions paused,
    after the go it reads them at once and counts the rebalance."""

    def __init__(self, assigned: Path, stop: Path) -> None:
        self.assigned, self.stop = assigned, stop
        self.went = False
        self.rebalances = 0

    def on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.assigned.write_text(str(len(partitions)))
        consumer.assign(partitions)
        if self.went:
            # A rebalance after the go (a coordinator that moved, a member that timed out):
            # a partition this member paused before the go would stay paused. Once told to
            # stop, the members leave one by one and the last ones are given the partitions of
            # those gone: not counted.
            self.rebalances += not self.stop.exists()
            consumer.resume(partitions)
        else:
            # Nothing fetched before the go: a member that had read its partitions to the end
            # waited at the go for its fetch held at the broker (fetch.wait.max.ms, 500 ms)
            # before asking from the beginning; the group's first 8,000 records took 0.6 s
            # after some goes and 0.1 s after others, on both systems.
            consumer.pause(partitions)

    def on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.assigned.write_text("0")


def group_consume(args: argparse.Namespace) -> None:
    """One member of a consumer group (subscribe, earliest, no commits). Writes
    `assigned-<pid>` (how many partitions it holds) on every rebalance. Nothing counts until
    `go` appears in the work directory (the runner writes it once the group has settled): then
    the member reads its partitions from the beginning, writes `count-<pid>` (records so far)
    as it goes and stops when `stop` appears. With --latency, each stamped value's send time
    and age at receipt (seconds) go to `latency-<pid>` as pairs of doubles. The result lists
    every batch's arrival (wall clock, records), so the runner can time the group's first N."""
    work = Path(args.work_dir)
    me = os.getpid()
    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": args.group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "client.id": "odradek-bench-group-consumer",
            # A member learns of a rebalance from its next heartbeat (every 3 s by default):
            # four members joining one by one took the group 5 to 6 s to settle.
            "heartbeat.interval.ms": 500,
            **REFETCH,
        }
    )

    go, stop = work / "go", work / "stop"
    member = _Member(work / f"assigned-{me}", stop)

    consumer.subscribe([args.topic], on_assign=member.on_assign, on_revoke=member.on_revoke)
    deadline = time.monotonic() + args.duration
    # The go is looked for every 10 ms, as the producers do: the consume row times the group
    # from the go, and at 0.1 s a member started up to a tenth of its one-second phase late.
    while not go.exists() and time.monotonic() < deadline:
        consumer.consume(num_messages=10_000, timeout=0.01)  # rebalances (on_assign pauses)
    start = [
        TopicPartition(tp.topic, tp.partition, OFFSET_BEGINNING) for tp in consumer.assignment()
    ]
    consumer.assign(start)
    consumer.resume(start)  # the pause outlives assign()
    member.went = True
    received = 0
    nbytes = 0
    last = 0.0
    ages = array("d")
    arrivals: list[float] = []  # wall clock and record count of every batch, in pairs
    next_note = 0.0
    try:
        while time.monotonic() < deadline:
            # consume() would wait out its whole timeout to fill a batch, and every record's age
            # would include that wait: poll() returns with the first record, then what else
            # has arrived is taken without waiting.
            first = consumer.poll(0.2)
            msgs = (
                [first, *consumer.consume(num_messages=10_000, timeout=0)]
                if first is not None
                else []
            )
            now = time.time()
            for msg in msgs:
                if msg.error() is not None:
                    continue
                value = msg.value() or b""
                if args.latency and len(value) >= STAMP.size:
                    sent = STAMP.unpack_from(value)[0]
                    ages.extend((sent, now - sent))
                received += 1
                nbytes += len(value)
            if msgs:
                last = now
                arrivals += (now, len(msgs))
            if time.monotonic() >= next_note:
                (work / f"count-{me}").write_text(str(received))
                next_note = time.monotonic() + 0.2
                if stop.exists():
                    break
        (work / f"count-{me}").write_text(str(received))
        if args.latency:
            with open(work / f"latency-{me}", "wb") as f:
                ages.tofile(f)
        # Printed before close(), which once did not return (a latency member of a full run
        # of 2026-11-28, its LeaveGroup sent, held its connections for another hour): the
        # runner kills a member that outlives the stop and keeps what it printed.
        result = {
            "phase": "group-consume",
            "records": received,
            "bytes": nbytes,
            "last_wall": last,
            "arrivals": arrivals,
            "rebalances": member.rebalances,
            "error": None,
        }
        print(json.dumps(result), flush=True)
    finally:
        consumer.close()
    return None


def metadata(args: argparse.Namespace) -> dict:
    """``requests`` Metadata requests for the topic, or for all topics when several are named
    (the client asks for one topic or all); milliseconds of each round trip."""
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    one = args.topic[0] if len(args.topic) == 1 else None
    admin.list_topics(one, timeout=60)
    samples = []
    for _ in range(args.requests):
        began = time.perf_counter()
        meta = admin.list_topics(one, timeout=60)
        samples.append((time.perf_counter() - began) * 1000)
        for topic in args.topic:
            found = meta.topics.get(topic)
            if found is None or len(found.partitions) != args.partitions:
                return {"phase": "metadata", "error": f"partitions of {topic} missing"}
    return {"phase": "metadata", "ms": samples, "error": None}


def list_offsets(args: argparse.Namespace) -> dict:
    """``requests`` ListOffsets (latest) for every partition of the topic; milliseconds each."""
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    query = {TopicPartition(args.topic, p): OffsetSpec.latest() for p in range(args.partitions)}
    samples = []
    for i in range(args.requests + 1):
        began = time.perf_counter()
        futures = admin.list_offsets(query, request_timeout=30)
        for future in futures.values():
            future.result(30)
        if i:  # the first call also looks up the leaders
            samples.append((time.perf_counter() - began) * 1000)
    return {"phase": "list-offsets", "ms": samples, "error": None}


PHASES = {
    "create": create,
    "produce": produce,
    "consume": consume,
    "group-consume": group_consume,
    "txn-produce": txn_produce,
    "metadata": metadata,
    "list-offsets": list_offsets,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("phase", choices=sorted(PHASES))
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True, action="append",
                        help="(create, metadata: repeatable)")  # fmt: skip
    parser.add_argument("--one-by-one", action="store_true", help="create: a request per topic")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--payload", choices=["random", "text"], default="random")
    parser.add_argument("--acks", default="1")
    parser.add_argument("--compression", default="none")
    parser.add_argument("--idempotent", action="store_true")
    parser.add_argument("--rate", type=float, default=0.0, help="records/s (0: as fast as can)")
    parser.add_argument("--go-file", help="start when this file exists (after writing .ready-PID)")
    parser.add_argument("--stamp", action="store_true", help="send time in each value")
    parser.add_argument("--even", action="store_true",
                        help="produce: every partition gets as many records (round robin)")  # fmt: skip
    parser.add_argument("--linger-ms", type=int, default=5)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--replication", type=int, default=1)
    parser.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--seconds", type=float, default=0.0,
                        help="produce, txn-produce: send for this long (0: --records); "
                             "consume: read for this long, --records a pass")  # fmt: skip
    parser.add_argument("--readers", type=int, default=1,
                        help="consume --seconds: consumers one after the other")  # fmt: skip
    parser.add_argument("--txn-records", type=int, default=100)
    parser.add_argument("--txn-ms", type=float, default=0.0,
                        help="txn-produce: commit every this many ms, not every --txn-records")  # fmt: skip
    parser.add_argument("--group")
    parser.add_argument("--work-dir")
    parser.add_argument("--latency", action="store_true")
    parser.add_argument("--requests", type=int, default=20)
    args = parser.parse_args(argv)
    if args.phase not in ("create", "metadata"):
        args.topic = args.topic[-1]
    try:
        result = PHASES[args.phase](args)
    except KafkaException as exc:
        result = {"phase": args.phase, "records": 0, "bytes": 0, "seconds": 0.0, "error": str(exc)}
    if result is not None:  # None: the phase printed its result itself (group-consume)
        print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
