"""Malformed input against a live broker while a well-behaved client keeps working.

Thousands of bad frames arrive over many connections: random bytes, valid headers with random
bodies, mutated and truncated valid requests, huge array counts, negative and absurd sizes. Each bad
connection must be closed (a mutated frame that happens to be a valid request may be answered, or,
like a Produce turned into acks=0, legitimately get no answer), the broker must stay up, and a
confluent-kafka producer and consumer running the whole time must lose nothing they were promised.

The seed is printed; rerun one case with ODRADEK_FUZZ_SEED=<seed>.

Then every API and version the broker advertises gets bodies drawn by hypothesis from its schema
(schema_strategies.py), mutated on the way: truncated, announcing more bytes than it sends, sent
with an unsupported api_version, with unknown tagged fields (well-formed or not) in its header,
or with flipped bytes. And a peer announcing huge frames must hold no memory for bytes it never
sent: a 2 GB size prefix is refused at once (socket.request.max.bytes), and sizes under the limit
cost only what actually arrives.
"""

from __future__ import annotations

import os
import random
import selectors
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from odradek.broker.client.blocking import recv_exact
from odradek.broker.protocol import codec
from odradek.broker.protocol.api_keys import ApiKey
from odradek.broker.protocol.messages import REGISTRY
from odradek.broker.protocol.primitives import write_uvarint
from odradek.broker.records.record import Record, build_batch
from schema_strategies import body_strategy

FRAMES = 3000
BATCH = 40  # connections in flight at once
CHECKPOINT_EVERY = 300  # frames between checks that the good client is still being served
MAX_REQUEST = 104857600  # Kafka's default socket.request.max.bytes (the broker under test uses it)
FRAMES_PER_VERSION = 4  # mutated frames per advertised API version
OUTCOME_DEADLINE = 60.0  # per batch: how long a bad connection may take to be closed
SILENT_GRACE = 1.0  # extra wait for lenient connections once the strict ones are settled
CLIENT_ID = "fuzz"

# Categories of bad frames and what the broker may do with each.
STRICT = "closed"  # must be closed without a response
ANSWERED = "answered"  # must be answered
CLOSED_OR_ANSWERED = "closed-or-answered"
ANY = "any"  # closed, answered, or (for a request that parks or wants no reply) silent
CATEGORIES = [
    # (name, weight, allowed outcome)
    ("random-bytes", 20, CLOSED_OR_ANSWERED),
    ("valid-header-random-body", 15, ANY),
    ("mutated-request", 25, ANY),
    ("truncated-request", 15, STRICT),
    ("huge-array-count", 10, STRICT),
    ("negative-size", 7, STRICT),
    ("absurd-size", 8, STRICT),
]


# --- the well-behaved client --------------------------------------------------------------------


class GoodClient:
    """A producer (acks=all) and a consumer running in threads for the whole test."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.acked: dict[int, bytes] = {}
        self.errors: list[str] = []
        self.consumed: dict[int, bytes] = {}
        self.consume_errors: list[str] = []
        self.lock = threading.Lock()
        self.stop_producing = threading.Event()
        self.stop_consuming = threading.Event()
        self.producer = Producer(
            {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "client.id": "good"}
        )
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"good-{time.monotonic_ns()}",
                "enable.auto.commit": False,
                "client.id": "good-consumer",
            }
        )
        self.consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        self.threads = [
            threading.Thread(target=self._produce, name="good-producer", daemon=True),
            threading.Thread(target=self._consume, name="good-consumer", daemon=True),
        ]

    def _on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        with self.lock:
            if err is not None:
                self.errors.append(f"{msg.value()!r}: {err}")
            else:
                self.acked[msg.offset()] = msg.value()

    def _produce(self) -> None:
        i = 0
        while not self.stop_producing.is_set():
            try:
                self.producer.produce(
                    self.topic, value=f"good-{i}".encode(), on_delivery=self._on_delivery
                )
            except BufferError:  # the local queue is full: wait for deliveries, then go on
                self.producer.poll(0.1)
                continue
            i += 1
            self.producer.poll(0.005)

    def _consume(self) -> None:
        while not self.stop_consuming.is_set():
            for msg in self.consumer.consume(num_messages=500, timeout=0.2):
                with self.lock:
                    if msg.error() is not None:
                        self.consume_errors.append(str(msg.error()))
                    else:
                        self.consumed[msg.offset()] = msg.value()

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def acked_count(self) -> int:
        with self.lock:
            return len(self.acked)

    def wait_until(self, predicate, what: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if predicate():
                    return
            time.sleep(0.05)
        raise AssertionError(f"good client: {what} not reached within {timeout}s")

    def checkpoint(self) -> None:
        """New records are acknowledged, and everything acknowledged so far is consumed."""
        before = self.acked_count()
        self.wait_until(lambda: len(self.acked) > before, "a new acknowledgement")
        with self.lock:
            target = max(self.acked)
        self.wait_until(lambda: self.consumed and max(self.consumed) >= target, f"offset {target}")

    def finish(self) -> None:
        self.stop_producing.set()
        self.threads[0].join(30)
        assert self.producer.flush(60) == 0, "good producer still has queued records after 60 s"
        with self.lock:
            assert not self.errors, f"good producer delivery errors: {self.errors[:5]}"
            assert self.acked, "the good producer got nothing acknowledged"
            wanted = set(self.acked)
        self.wait_until(lambda: wanted <= set(self.consumed), "every acknowledged offset consumed")
        self.stop_consuming.set()
        self.threads[1].join(30)
        self.consumer.close()


# --- bad frames ---------------------------------------------------------------------------------


def templates(topic: str, advertised: dict[int, tuple[int, int]]) -> list[tuple[int, int, bytes]]:
    """Valid requests (api key, version, frame without size) at every advertised version."""
    batch = build_batch(
        [
            Record(offset=i, timestamp=1_700_000_000_000 + i, key=b"k", value=b"fuzz-%d" % i)
            for i in range(3)
        ]
    )
    bodies = {
        ApiKey.API_VERSIONS: (
            range(0, 4),
            lambda v: {"client_software_name": "fuzz", "client_software_version": "1"},
        ),
        ApiKey.METADATA: (
            range(1, 13),
            lambda v: {"topics": [{"name": topic}], "allow_auto_topic_creation": False},
        ),
        ApiKey.PRODUCE: (
            range(3, 12),
            lambda v: {
                "acks": 1,
                "timeout_ms": 30000,
                "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
            },
        ),
        ApiKey.LIST_OFFSETS: (
            range(1, 10),
            lambda v: {
                "replica_id": -1,
                "topics": [
                    {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}
                ],
            },
        ),
        ApiKey.FETCH: (
            range(4, 13),
            lambda v: {
                "max_wait_ms": 0,
                "min_bytes": 0,
                "max_bytes": 65536,
                "topics": [
                    {
                        "topic": topic,
                        "partitions": [
                            {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 65536}
                        ],
                    }
                ],
            },
        ),
        ApiKey.DESCRIBE_CONFIGS: (
            range(0, 5),
            lambda v: {
                "resources": [
                    {"resource_type": 2, "resource_name": topic, "configuration_keys": None}
                ]
            },
        ),
    }
    out = []
    for key, (versions, body) in bodies.items():
        lo, hi = advertised.get(key, (0, -1))
        for v in versions:
            if lo <= v <= hi:
                out.append((key, v, codec.encode_request(key, v, 1, CLIENT_ID, body(v))))
    assert out, "the broker advertises none of the fuzz templates' APIs"
    return out


def array_count_position(key: int, version: int) -> int | None:
    """Offset in the body of the first top-level array count, for templates that have one."""
    if key in (ApiKey.METADATA, ApiKey.DESCRIBE_CONFIGS):
        return 0
    if key == ApiKey.LIST_OFFSETS:
        return 4 if version < 2 else 5
    if key == ApiKey.PRODUCE:
        return 8 if version < 9 else 7
    return None


def with_correlation_id(frame: bytes, correlation_id: int) -> bytes:
    return frame[:4] + struct.pack(">i", correlation_id) + frame[8:]


def make_bad_frame(rng: random.Random, category: str, tmpl: list[tuple[int, int, bytes]]) -> bytes:
    """The bytes to send on one connection (size prefix included)."""
    corr = rng.randrange(1, 1 << 31)
    if category == "random-bytes":
        body = rng.randbytes(rng.choice([0, 1, 3, 7, 8, 9, 12, rng.randrange(0, 400)]))
        return struct.pack(">i", len(body)) + body
    if category == "valid-header-random-body":
        key, version, _ = rng.choice(tmpl)
        header = struct.pack(">hhi", key, version, corr)
        if codec.request_header_version(key, version) >= 1:
            header += struct.pack(">h", len(CLIENT_ID)) + CLIENT_ID.encode()
        if codec.request_header_version(key, version) == 2:
            header += b"\x00"
        body = header + rng.randbytes(rng.randrange(0, 200))
        return struct.pack(">i", len(body)) + body
    if category == "mutated-request":
        _, _, frame = rng.choice(tmpl)
        data = bytearray(with_correlation_id(frame, corr))
        how = rng.randrange(4)
        if how == 0:  # overwrite a few bytes
            for _ in range(rng.randint(1, 4)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        elif how == 1:  # drop a byte
            del data[rng.randrange(len(data))]
        elif how == 2:  # insert a byte
            data.insert(rng.randrange(len(data) + 1), rng.randrange(256))
        else:  # a boundary value in a 2- or 4-byte window
            width = rng.choice([2, 4])
            pos = rng.randrange(max(1, len(data) - width))
            value = rng.choice([0, 1, -1, 0x7FFF, -0x8000, 0x7FFFFFFF, -0x80000000])
            fmt = ">h" if width == 2 else ">i"
            value = max(min(value, 0x7FFF), -0x8000) if width == 2 else value
            data[pos : pos + width] = struct.pack(fmt, value)
        return struct.pack(">i", len(data)) + bytes(data)
    if category == "truncated-request":
        _, _, frame = rng.choice(tmpl)
        frame = with_correlation_id(frame, corr)
        cut = frame[: rng.randrange(len(frame))]
        return struct.pack(">i", len(cut)) + cut
    if category == "huge-array-count":
        choices = [(k, v, f) for k, v, f in tmpl if array_count_position(k, v) is not None]
        key, version, frame = rng.choice(choices)
        frame = with_correlation_id(frame, corr)
        _, body_at = codec.read_request_header(frame)
        pos = body_at + array_count_position(key, version)
        count = rng.choice([1 << 16, 1 << 24, 0x7FFFFFFE, rng.randrange(1 << 16, 1 << 31)])
        if version >= codec.get_api(key).flexible.lo:
            assert frame[pos] == 2, f"{key} v{version}: no one-element compact array at {pos}"
            frame = frame[:pos] + write_uvarint(count + 1) + frame[pos + 1 :]
        else:
            assert frame[pos : pos + 4] == b"\0\0\0\1", f"{key} v{version}: no array at {pos}"
            frame = frame[:pos] + struct.pack(">i", count) + frame[pos + 4 :]
        return struct.pack(">i", len(frame)) + frame
    if category == "negative-size":
        size = rng.choice([-1, -2, -0x80000000, rng.randrange(-0x80000000, 0)])
        return struct.pack(">i", size) + rng.randbytes(rng.randrange(0, 64))
    if category == "absurd-size":
        size = rng.choice([MAX_REQUEST + 1, 0x7FFFFFFF, rng.randrange(MAX_REQUEST + 1, 1 << 31)])
        return struct.pack(">i", size) + rng.randbytes(rng.randrange(0, 64))
    raise AssertionError(category)


def allowed(conn: BadConnection) -> bool:
    if conn.allowed == ANSWERED:
        return conn.outcome == "answered"
    return (
        conn.outcome == "closed"
        or (conn.outcome == "answered" and conn.allowed in (CLOSED_OR_ANSWERED, ANY))
        or (conn.outcome == "silent" and conn.allowed == ANY)
    )


@dataclass
class BadConnection:
    category: str
    allowed: str
    payload: bytes
    sock: socket.socket
    received: bytearray = field(default_factory=bytearray)
    outcome: str | None = None  # "closed", "answered" or "silent"

    @property
    def correlation_id(self) -> int | None:
        return struct.unpack_from(">i", self.payload, 8)[0] if len(self.payload) >= 12 else None

    def check_responses(self) -> bool:
        """True once a whole response frame is in; it must echo the request's correlation id."""
        if len(self.received) < 8:
            return False
        size, corr = struct.unpack_from(">ii", self.received)
        assert corr == self.correlation_id, (
            f"{self.category}: response correlation id {corr} for request {self.correlation_id}"
        )
        return len(self.received) >= 4 + size


def api_versions_frame() -> bytes:
    """A healthy ApiVersions v0 request, length prefix included."""
    hello = codec.encode_request(ApiKey.API_VERSIONS, 0, 7, CLIENT_ID, {})
    return struct.pack(">i", len(hello)) + hello


def report_outcomes(
    tally: dict[tuple[str, str], int], wrong: list[str], seed: int, width: int
) -> None:
    """Print how often each kind of frame met each outcome; fail if any outcome was wrong."""
    for (kind, outcome), n in sorted(tally.items()):
        print(f"  {kind:{width}} {outcome:9} {n}")
    assert not wrong, f"seed {seed}: {len(wrong)} wrong outcomes, e.g. {wrong[:10]}"


def run_batch(
    host: str, port: int, conns: list[tuple[str, str, bytes, bool]] | list[tuple], hello: bytes
) -> list[BadConnection]:
    """Open a connection per frame, send them all, and classify what the broker does with each."""
    open_conns: list[BadConnection] = []
    for category, allowed, payload, say_hello, *rest in conns:
        half_close = bool(rest and rest[0])  # send, then shut our side: EOF mid-frame
        sock = socket.create_connection((host, port), timeout=OUTCOME_DEADLINE)
        if say_hello:  # a healthy request first: a live session that then goes bad
            sock.sendall(hello)
            (size,) = struct.unpack(">i", recv_exact(sock, 4))
            recv_exact(sock, size)
        conn = BadConnection(category, allowed, payload, sock)
        try:
            sock.sendall(payload)
            if half_close:
                sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            conn.outcome = "closed"
        open_conns.append(conn)
    sel = selectors.DefaultSelector()
    for conn in open_conns:
        if conn.outcome is None:
            conn.sock.setblocking(False)
            sel.register(conn.sock, selectors.EVENT_READ, conn)
    deadline = time.monotonic() + OUTCOME_DEADLINE
    settled_at: float | None = None
    while sel.get_map():
        pending = [k.data for k in sel.get_map().values()]
        if all(c.allowed == ANY for c in pending):
            settled_at = settled_at or time.monotonic()
            if time.monotonic() > settled_at + SILENT_GRACE:
                for c in pending:
                    c.outcome = "silent"
                    sel.unregister(c.sock)
                break
        if time.monotonic() > deadline:
            stuck = [(c.category, c.payload[:24].hex()) for c in pending if c.allowed != ANY]
            raise AssertionError(
                f"connections neither closed nor answered in {OUTCOME_DEADLINE}s: {stuck[:5]}"
            )
        for key, _ in sel.select(timeout=0.1):
            conn: BadConnection = key.data
            try:
                data = conn.sock.recv(1 << 20)
            except BlockingIOError:
                continue
            except ConnectionResetError:
                data = b""
            if data:
                conn.received += data
                if conn.check_responses():
                    conn.outcome = "answered"
                    sel.unregister(conn.sock)
            else:
                # A partial response followed by a close would be a torn response: a failure.
                conn.outcome = "torn" if conn.received else "closed"
                sel.unregister(conn.sock)
    sel.close()
    for conn in open_conns:
        conn.sock.close()
    return open_conns


def advertised_versions(host: str, port: int) -> dict[int, tuple[int, int]]:
    frame = codec.encode_request(ApiKey.API_VERSIONS, 0, 1, CLIENT_ID, {})
    with socket.create_connection((host, port), timeout=30) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        (size,) = struct.unpack(">i", recv_exact(sock, 4))
        _, response = codec.decode_response(ApiKey.API_VERSIONS, 0, recv_exact(sock, size))
    return {e["api_key"]: (e["min_version"], e["max_version"]) for e in response["api_keys"]}


# --- the test -----------------------------------------------------------------------------------


def test_fuzzed_frames_close_connections_and_lose_nothing(
    broker, bootstrap: str, new_topic
) -> None:
    seed = int(os.environ.get("ODRADEK_FUZZ_SEED") or random.SystemRandom().randrange(1 << 32))
    print(f"fuzz seed {seed} (rerun with ODRADEK_FUZZ_SEED={seed})")
    rng = random.Random(seed)
    good_topic = new_topic(suffix="-good")
    fuzz_topic = new_topic(suffix="-fuzz")  # the templates' target; the good topic is never named
    tmpl = templates(fuzz_topic, advertised_versions(broker.host, broker.port))
    hello = api_versions_frame()

    good = GoodClient(bootstrap, good_topic)
    good.start()
    good.wait_until(lambda: good.acked and good.consumed, "a first produced and consumed record")

    names = [c[0] for c in CATEGORIES]
    weights = [c[1] for c in CATEGORIES]
    allowed_for = {c[0]: c[2] for c in CATEGORIES}
    tally: dict[tuple[str, str], int] = {}
    failures: list[str] = []
    sent = 0
    while sent < FRAMES:
        plan = []
        for _ in range(min(BATCH, FRAMES - sent)):
            category = rng.choices(names, weights)[0]
            payload = make_bad_frame(rng, category, tmpl)
            plan.append((category, allowed_for[category], payload, rng.random() < 0.1))
        for conn in run_batch(broker.host, broker.port, plan, hello):
            tally[(conn.category, conn.outcome)] = tally.get((conn.category, conn.outcome), 0) + 1
            if not allowed(conn):
                failures.append(f"{conn.category} -> {conn.outcome}: {conn.payload[:48].hex()}")
        previous, sent = sent, sent + len(plan)
        if sent // CHECKPOINT_EVERY != previous // CHECKPOINT_EVERY:
            good.checkpoint()
        if hasattr(broker, "proc"):
            assert broker.running, f"broker died after {sent} bad frames (seed {seed})"

    report_outcomes(tally, failures, seed, 26)

    good.finish()
    assert not good.consume_errors, f"good consumer errors: {good.consume_errors[:5]}"
    with good.lock:
        lost = {o: v for o, v in good.acked.items() if good.consumed.get(o) != v}
    assert not lost, f"seed {seed}: acknowledged records not read back: {sorted(lost.items())[:10]}"

    if hasattr(broker, "proc"):
        assert broker.running, "broker died"
        log = broker.log_text()
        assert "Traceback" not in log, "the broker logged an unexpected exception (see its log)"


# --- every advertised API and version, bodies from hypothesis -------------------------------------


def header_tags_at(frame: bytes) -> int:
    """Offset of the tagged-field count that ends a v2 request header (after the client id)."""
    (length,) = struct.unpack_from(">h", frame, 8)
    return 10 + max(length, 0)


# APIs whose well-formed requests change what other clients see, and that a broker without an
# authorizer executes for anyone, Kafka's too: the controller's orders (a made-up UpdateMetadata
# from a future controller epoch empties the broker list), ACLs, configs, quotas, credentials,
# topic deletion and creation (any partition count), reassignments. They only get mutations
# that no decoder may accept.
STATEFUL = {
    ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA,
    ApiKey.CONTROLLED_SHUTDOWN, ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS,
    ApiKey.DELETE_RECORDS, ApiKey.CREATE_PARTITIONS, ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS,
    ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS, ApiKey.ALTER_CLIENT_QUOTAS,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS, ApiKey.ALTER_PARTITION_REASSIGNMENTS,
    ApiKey.ELECT_LEADERS, ApiKey.ALTER_REPLICA_LOG_DIRS, ApiKey.DELETE_GROUPS,
    ApiKey.OFFSET_DELETE, ApiKey.EXPIRE_DELEGATION_TOKEN, ApiKey.RENEW_DELEGATION_TOKEN,
    ApiKey.UPDATE_FEATURES, ApiKey.ALTER_PARTITION, ApiKey.ALLOCATE_PRODUCER_IDS,
    ApiKey.WRITE_TXN_MARKERS,
}  # fmt: skip


def mutate(
    data: st.DataObject, key: int, version: int, frame: bytes, advertised
) -> tuple[str, str, bytes]:
    """(mutation, allowed outcome, bytes to send) for one valid request frame."""
    flexible = codec.request_header_version(key, version) == 2
    kinds = ["truncated", "overlong", "wrong-version"]
    if key not in STATEFUL:
        kinds.append("flipped")
    if flexible:
        kinds.append("malformed-header-tags")
        if key not in STATEFUL:
            kinds.append("unknown-header-tags")
    kind = data.draw(st.sampled_from(kinds), label="mutation")
    size = struct.pack(">i", len(frame))
    if kind == "truncated":
        cut = data.draw(st.integers(0, len(frame) - 1), label="cut")
        return kind, STRICT, struct.pack(">i", cut) + frame[:cut]
    if kind == "overlong":  # announces more than it sends, then half-closes (see run_batch)
        extra = data.draw(st.integers(1, 1 << 16), label="extra")
        return kind, STRICT, struct.pack(">i", len(frame) + extra) + frame
    if kind == "wrong-version":
        lo, hi = advertised[key]
        bad = data.draw(
            st.integers(hi + 1, 0x7FFF) | st.integers(-0x8000, lo - 1) if lo > -0x8000 else
            st.integers(hi + 1, 0x7FFF),
            label="version",
        )  # fmt: skip
        out = frame[:2] + struct.pack(">h", bad) + frame[4:]
        want = STRICT
        if key == ApiKey.API_VERSIONS and bad > hi:
            # Kafka answers a too-new ApiVersions (v0, UNSUPPORTED_VERSION) if it can read the
            # header, whose layout follows the version: v3+ have tagged fields, older ones not.
            same_header = codec.request_header_version(key, bad) == codec.request_header_version(
                key, version
            )
            want = ANSWERED if same_header else CLOSED_OR_ANSWERED
        return kind, want, struct.pack(">i", len(out)) + out
    if kind in ("unknown-header-tags", "malformed-header-tags"):
        at = header_tags_at(frame)
        assert frame[at] == 0, f"{key} v{version}: no empty tagged fields at {at}"
        tags = data.draw(st.lists(st.tuples(st.integers(0, 1 << 20), st.binary(max_size=40)),
                                  min_size=1, max_size=4, unique_by=lambda t: t[0]), label="tags")  # fmt: skip
        tags.sort()
        fields = write_uvarint(len(tags)) + b"".join(
            write_uvarint(tag) + write_uvarint(len(v)) + v for tag, v in tags
        )
        if kind == "malformed-header-tags":
            # The last tag claims more bytes than the whole frame holds.
            tag, v = tags[-1]
            fields = write_uvarint(len(tags)) + b"".join(
                write_uvarint(t) + write_uvarint(len(x)) + x for t, x in tags[:-1]
            ) + write_uvarint(tag) + write_uvarint(len(frame) + 100) + v  # fmt: skip
            out = frame[:at] + fields
            return kind, STRICT, struct.pack(">i", len(out)) + out
        out = frame[:at] + fields + frame[at + 1 :]
        return kind, ANY, struct.pack(">i", len(out)) + out
    flipped = bytearray(frame)
    for _ in range(data.draw(st.integers(1, 4), label="flips")):
        i = data.draw(st.integers(12, len(flipped) - 1) if len(flipped) > 12 else st.just(0))
        flipped[i] = data.draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF, flipped[i] ^ 1]))
    return kind, ANY, size + bytes(flipped)


def fuzzable(advertised: dict[int, tuple[int, int]]) -> list[tuple[int, int]]:
    """Every (api, version) the broker advertises and the schemas know."""
    return [
        (key, v)
        for key, (lo, hi) in sorted(advertised.items())
        if key in REGISTRY
        for v in range(lo, hi + 1)
    ]


def frames_for(
    key: int, version: int, advertised: dict[int, tuple[int, int]], n: int, seed: int
) -> list[tuple[str, str, bytes, bool, bool]]:
    """`n` mutated frames of one API version (hypothesis only draws here; no I/O)."""
    out = []

    @settings(max_examples=n, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @hypothesis_seed(seed)
    @given(st.data())
    def draw(data: st.DataObject) -> None:
        body = data.draw(body_strategy(REGISTRY[key], version, False), label="body")
        corr = data.draw(st.integers(1, (1 << 31) - 1), label="correlation id")
        frame = codec.encode_request(key, version, corr, CLIENT_ID, body)
        kind, want, payload = mutate(data, key, version, frame, advertised)
        out.append(
            (f"{ApiKey(key).name} v{version} {kind}", want, payload, False, kind == "overlong")
        )

    draw()
    return out


def test_every_advertised_api_and_version_answers_or_closes_on_mutated_frames(
    broker, bootstrap: str, new_topic
) -> None:
    seed = int(os.environ.get("ODRADEK_FUZZ_SEED") or random.SystemRandom().randrange(1 << 32))
    print(f"fuzz seed {seed} (rerun with ODRADEK_FUZZ_SEED={seed})")
    advertised = advertised_versions(broker.host, broker.port)
    pairs = fuzzable(advertised)
    assert len(pairs) > 100, f"only {len(pairs)} API versions advertised"
    plan = [
        frame
        for key, version in pairs
        for frame in frames_for(
            key, version, advertised, FRAMES_PER_VERSION, seed + 1000 * key + version
        )
    ]
    random.Random(seed).shuffle(plan)
    good = GoodClient(bootstrap, new_topic(suffix="-good"))
    good.start()
    good.wait_until(lambda: good.acked and good.consumed, "a first produced and consumed record")
    hello = api_versions_frame()
    tally: dict[tuple[str, str], int] = {}
    wrong = []
    for i in range(0, len(plan), BATCH):
        for conn in run_batch(broker.host, broker.port, plan[i : i + BATCH], hello):
            kind = conn.category.rsplit(" ", 1)[1]
            tally[(kind, conn.outcome)] = tally.get((kind, conn.outcome), 0) + 1
            if not allowed(conn):
                wrong.append(f"{conn.category} -> {conn.outcome}: {conn.payload[:40].hex()}")
        if (i // BATCH) % 8 == 7:
            good.checkpoint()
        if hasattr(broker, "proc"):
            assert broker.running, f"the broker died (seed {seed})"
    report_outcomes(tally, wrong, seed, 24)
    good.finish()
    if hasattr(broker, "proc"):
        log = broker.log_text()
        assert "Traceback" not in log, "the broker logged an unexpected exception (see its log)"


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_announced_frame_sizes_cost_no_memory_until_the_bytes_arrive(broker_factory) -> None:
    limit = 64 << 20
    b = broker_factory(overrides={"socket.request.max.bytes": str(limit)})
    before = rss_mib(b.proc.pid)
    # Twenty peers announce frames right at the limit and send one kilobyte each.
    stalled = [socket.create_connection((b.host, b.port), timeout=30) for _ in range(20)]
    for sock in stalled:
        sock.sendall(struct.pack(">i", limit) + b"\0" * 1024)
    # A 2 GB prefix is over the limit: that connection is closed unread.
    with socket.create_connection((b.host, b.port), timeout=30) as sock:
        sock.sendall(struct.pack(">i", 0x7FFFFFFF) + b"x" * 64)
        try:
            assert sock.recv(16) == b"", "the broker answered a 2 GB frame"
        except ConnectionResetError:
            pass
    # Everyone else is still served, and the stalled peers hold (almost) nothing.
    assert advertised_versions(b.host, b.port)
    grown = rss_mib(b.proc.pid) - before
    for sock in stalled:
        sock.close()
    assert grown < limit / (1 << 20) / 2, f"{grown:.0f} MiB held for 20 kB of announced frames"
