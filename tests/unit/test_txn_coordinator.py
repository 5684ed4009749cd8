"""The transaction coordinator's state machine, its `__transaction_state` records and their
loading, on real logs (replica manager + log manager in a temporary directory). Markers go to
real data partitions of the same replica manager, as WriteTxnMarkers would write them."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from odradek.broker.coordinator.transaction import TransactionConfig, TransactionCoordinator
from odradek.broker.coordinator.transaction import coordinator as coordinator_module
from odradek.broker.coordinator.transaction import formats as fmt
from odradek.broker.coordinator.transaction.markers import MarkerEntry
from odradek.broker.coordinator.transaction.metadata import (
    IllegalTransition,
    TransactionMetadata,
    TxnState,
)
from odradek.broker.protocol import codec
from odradek.broker.protocol.errors import ErrorCode as E
from odradek.broker.protocol.errors import KafkaError
from odradek.broker.records.record import (
    ControlType,
    Record,
    build_batch,
    build_control_batch,
    decode_all,
)
from odradek.broker.replication.partition import PartitionState
from odradek.broker.replication.producer_ids import ProducerIdManager
from odradek.broker.replication.producer_state import AppendOrigin, now_ms
from odradek.broker.replication.replica_manager import ReplicaManager
from odradek.broker.storage import LogConfig, LogManager

TOPIC = fmt.TRANSACTION_STATE_TOPIC
DATA = [("data", 0), ("data", 1)]
WAIT_S = 20.0


async def until(check: Callable[[], Any], timeout: float = WAIT_S) -> Any:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = check()
        if value:
            return value
        assert asyncio.get_running_loop().time() < deadline, "condition never became true"
        await asyncio.sleep(0.01)


class Block:
    def __init__(self, start: int) -> None:
        self.block_start, self.block_end = start, start + 999


class Harness:
    """A coordinator leading both partitions of a 2-partition __transaction_state, with two
    data partitions on the same broker."""

    def __init__(self, tmp: Path, **config: Any) -> None:
        self.logs = LogManager([tmp / "logs"], LogConfig.from_props({}))
        self.logs.startup()
        self.replicas = ReplicaManager(1, self.logs, lambda topic: LogConfig.from_props({}))
        self.config = TransactionConfig(num_partitions=2, **config)
        self.sent: list[MarkerEntry] = []
        self.fail_markers = False
        self.next_block = 0
        self.coordinator = self.new_coordinator()

    async def allocate(self) -> Block:
        block = Block(self.next_block)
        self.next_block += 1000
        return block

    def new_coordinator(self) -> TransactionCoordinator:
        return TransactionCoordinator(
            self.replicas,
            self.config,
            ProducerIdManager(self.allocate),
            send_markers=self.send,
            leader_of=lambda topic, partition: 1,
            partition_count=lambda: 2,
        )

    async def send(self, broker_id: int, markers: list[MarkerEntry]) -> dict:
        if self.fail_markers:
            raise ConnectionError("leader unreachable")
        out: dict[int, dict] = {}
        for m in markers:
            self.sent.append(m)
            for tp in m.partitions:
                batch = build_control_batch(
                    ControlType.COMMIT if m.committed else ControlType.ABORT,
                    producer_id=m.producer_id,
                    producer_epoch=m.producer_epoch,
                    coordinator_epoch=m.coordinator_epoch,
                    timestamp=now_ms(),
                )
                try:
                    self.replicas.get(*tp).append_as_leader(
                        bytearray(batch), AppendOrigin.COORDINATOR
                    )
                    code = E.NONE
                except KafkaError as e:
                    code = E(e.code)
                out.setdefault(m.producer_id, {})[tp] = code
        return out

    async def start(self, epoch: int = 0) -> None:
        await self.coordinator.start()
        state = PartitionState(leader=1, leader_epoch=epoch, isr=[1], replicas=[1])
        for topic, p in [*DATA, (TOPIC, 0), (TOPIC, 1)]:
            self.replicas.become_leader_or_follower(topic, p, None, state)
        for p in (0, 1):
            self.coordinator.on_elected(p, epoch)
        await until(lambda: all(self.coordinator.is_loaded(p) for p in (0, 1)))

    async def restart(self, epoch: int = 1) -> None:
        await self.coordinator.shutdown()
        self.fail_markers = False
        self.coordinator = self.new_coordinator()
        await self.start(epoch)

    def produce(self, tp: tuple[str, int], pid: int, epoch: int, seq: int) -> int:
        batch = build_batch(
            [Record(timestamp=now_ms(), value=b"v")],
            producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True,
        )  # fmt: skip
        return self.replicas.get(*tp).append_as_leader(bytearray(batch)).first_offset

    async def open_transaction(self, txn_id: str, timeout_ms: int, tp: tuple[str, int]) -> int:
        """The id of a new producer of `txn_id` whose transaction wrote one batch to `tp`."""
        pid = (await self.coordinator.init_producer_id(txn_id, timeout_ms)).producer_id
        await self.coordinator.add_partitions(txn_id, pid, 0, {tp})
        self.produce(tp, pid, 0, 0)
        return pid

    def state_of(self, txn_id: str) -> TransactionMetadata:
        got = self.coordinator.state.get(txn_id)
        assert not isinstance(got, E) and got[1] is not None
        return got[1]

    def records(self, txn_id: str) -> list[fmt.TxnLogValue | None]:
        log = self.replicas.get(TOPIC, self.coordinator.partition_for(txn_id)).log
        out = []
        data = b"".join(seg.read_bytes(0, seg.size) for seg in log.segments)
        for _, rs in decode_all(data):
            for r in rs:
                if fmt.parse_key(r.key) == txn_id:
                    out.append(None if r.value is None else fmt.parse_value(r.value))
        return out

    def close(self) -> None:
        self.logs.shutdown()


@pytest.fixture
def run(tmp_path: Path):
    harnesses: list[Harness] = []

    def runner(test: Callable[[Harness], Awaitable[None]], **config: Any) -> None:
        h = Harness(tmp_path, **config)
        harnesses.append(h)

        async def main() -> None:
            await h.start()
            try:
                await test(h)
            finally:
                await h.coordinator.shutdown()

        asyncio.run(main())

    yield runner
    for h in harnesses:
        h.close()


# --- formats and the state machine ------------------------------------------------------------


def test_log_formats_are_kafkas():
    assert fmt.key_bytes("tx") == b"\x00\x00\x00\x02tx"
    empty = fmt.TxnLogValue(5, 1, 60000, TxnState.EMPTY.id, frozenset(), 100, -1)
    raw = fmt.value_bytes(empty)
    # version 0 | pid | epoch | timeout | state | null partitions | last update | start
    assert len(raw) == 2 + 8 + 2 + 4 + 1 + 4 + 8 + 8
    assert raw[17:21] == b"\xff\xff\xff\xff"
    assert fmt.parse_value(raw) == empty
    ongoing = fmt.TxnLogValue(5, 1, 60000, 1, frozenset({("a", 0), ("a", 1), ("b", 0)}), 100, 90)
    assert fmt.parse_value(fmt.value_bytes(ongoing)) == ongoing
    assert fmt.parse_key(b"\x00\x07junk") is None  # unknown key versions are skipped
    with pytest.raises(fmt.FormatError):
        fmt.parse_value(b"\x00\x09")
    bad_state = bytearray(raw)
    bad_state[16] = 42
    with pytest.raises(fmt.FormatError):
        fmt.parse_value(bytes(bad_state))


def test_flexible_value_v1_is_read():
    body = {
        "producer_id": 9, "previous_producer_id": 8, "next_producer_id": -1, "producer_epoch": 2,
        "transaction_timeout_ms": 1000, "transaction_status": 4,
        "transaction_partitions": [], "transaction_last_update_timestamp_ms": 5,
        "transaction_start_timestamp_ms": 4, "client_transaction_version": 2,
    }  # fmt: skip
    raw = b"\x00\x01" + codec.encode_body(fmt._VALUE, 1, "request", body)
    assert fmt.parse_value(raw) == fmt.TxnLogValue(9, 2, 1000, 4, frozenset(), 5, 4)


@settings(max_examples=200, deadline=None)
@given(
    pid=st.integers(0, 2**63 - 1),
    epoch=st.integers(0, 32767),
    state=st.sampled_from([s.id for s in TxnState if s is not TxnState.PREPARE_EPOCH_FENCE]),
    parts=st.frozensets(st.tuples(st.text(min_size=1, max_size=5), st.integers(0, 99))),
)
def test_value_round_trip(pid: int, epoch: int, state: int, parts: frozenset) -> None:
    v = fmt.TxnLogValue(pid, epoch, 60000, state, parts if state else frozenset(), 7, -1)
    assert fmt.parse_value(fmt.value_bytes(v)) == v


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=80))
def test_garbage_is_a_format_error(data: bytes) -> None:
    try:
        fmt.parse_key(data)
    except fmt.FormatError:
        pass
    try:
        fmt.parse_value(data)
    except fmt.FormatError:
        pass


def test_state_machine_refuses_illegal_transitions():
    md = TransactionMetadata("t", 1, 0, 1000, TxnState.EMPTY, 0)
    with pytest.raises(IllegalTransition):
        md.prepare_abort_or_commit(TxnState.PREPARE_COMMIT, 1)
    transit = md.prepare_add_partitions({("a", 0)}, 5)
    with pytest.raises(IllegalTransition):  # a transition is already pending
        md.prepare_add_partitions({("a", 1)}, 6)
    md.complete_transition(transit)
    assert md.state is TxnState.ONGOING and md.start_ms == 5 and md.partitions == {("a", 0)}
    fence = md.prepare_fence_producer_epoch()
    assert fence.producer_epoch == 1 and fence.state is TxnState.PREPARE_EPOCH_FENCE
    with pytest.raises(IllegalTransition):  # never written to the log
        md.complete_transition(fence)


def test_kip360_retry_of_an_epoch_bump_gets_the_same_epoch():
    md = TransactionMetadata("t", 1, 3, 1000, TxnState.COMPLETE_COMMIT, 0)
    bump = md.prepare_increment_producer_epoch(1000, 3, 1)
    assert (bump.producer_epoch, bump.last_producer_epoch) == (4, 3)
    md.complete_transition(bump)
    again = md.prepare_increment_producer_epoch(1000, 3, 2)  # the response was lost
    assert again.producer_epoch == 4
    md.pending_state = None
    assert md.prepare_increment_producer_epoch(1000, 1, 3) == E.PRODUCER_FENCED


# --- the coordinator --------------------------------------------------------------------------


def test_commit_writes_states_and_markers(run):
    async def test(h: Harness) -> None:
        c = h.coordinator
        init = await c.init_producer_id("tx", 60000)
        assert (init.error, init.producer_epoch) == (E.NONE, 0)
        pid = init.producer_id
        assert await c.add_partitions("tx", pid, 0, set(DATA)) == E.NONE
        assert await c.add_partitions("tx", pid, 0, {DATA[0]}) == E.NONE  # already in
        for tp in DATA:
            h.produce(tp, pid, 0, 0)
        assert h.replicas.get(*DATA[0]).last_stable_offset == 0
        assert await c.end_transaction("tx", pid, 0, True) == E.NONE
        await until(lambda: h.state_of("tx").state is TxnState.COMPLETE_COMMIT)
        assert {tp for m in h.sent for tp in m.partitions} == set(DATA)
        assert all(h.replicas.get(*tp).last_stable_offset == 2 for tp in DATA)
        states = [v.state_id for v in h.records("tx")]
        assert states == [0, 1, 2, 4]  # Empty, Ongoing, PrepareCommit, CompleteCommit
        # A retried EndTxn of the finished transaction succeeds; the opposite is invalid.
        assert await c.end_transaction("tx", pid, 0, True) == E.NONE
        assert await c.end_transaction("tx", pid, 0, False) == E.INVALID_TXN_STATE
        assert await c.end_transaction("tx", pid + 1, 0, True) == E.INVALID_PRODUCER_ID_MAPPING
        assert await c.add_partitions("nobody", pid, 0, set(DATA)) == E.INVALID_PRODUCER_ID_MAPPING

    run(test)


def test_next_transaction_waits_for_the_markers_of_the_last(run, monkeypatch):
    """EndTxn answers before the markers are written; the producer's next AddPartitionsToTxn
    is held until they are, and answers CONCURRENT_TRANSACTIONS only past the hold."""

    async def test(h: Harness) -> None:
        c = h.coordinator
        pid = await h.open_transaction("tx", 60000, DATA[0])
        h.fail_markers = True  # the markers are retried until the leader answers
        assert await c.end_transaction("tx", pid, 0, True) == E.NONE
        held = asyncio.create_task(c.add_partitions("tx", pid, 0, {DATA[1]}))
        await asyncio.sleep(0.2)
        assert not held.done()
        h.fail_markers = False
        assert await asyncio.wait_for(held, WAIT_S) == E.NONE
        md = h.state_of("tx")
        assert (md.state, md.partitions) == (TxnState.ONGOING, {DATA[1]})
        assert [v.state_id for v in h.records("tx")][-2:] == [4, 1]  # CompleteCommit, Ongoing

        # Markers that take longer than the hold: the client is told to retry.
        monkeypatch.setattr(coordinator_module, "SETTLE_HOLD_S", 0.1)
        h.produce(DATA[1], pid, 0, 1)
        h.fail_markers = True
        assert await c.end_transaction("tx", pid, 0, False) == E.NONE
        assert await c.add_partitions("tx", pid, 0, {DATA[0]}) == E.CONCURRENT_TRANSACTIONS
        h.fail_markers = False
        await until(lambda: h.state_of("tx").state is TxnState.COMPLETE_ABORT)
        assert await c.add_partitions("tx", pid, 0, {DATA[0]}) == E.NONE

    run(test)


def test_new_incarnation_aborts_the_open_transaction_and_fences_the_old_one(run):
    async def test(h: Harness) -> None:
        c = h.coordinator
        pid = await h.open_transaction("tx", 60000, DATA[0])
        # A second producer with the same id: the open transaction is aborted first.
        first = await c.init_producer_id("tx", 60000)
        assert first.error == E.CONCURRENT_TRANSACTIONS
        await until(lambda: h.state_of("tx").state is TxnState.COMPLETE_ABORT)
        new = await c.init_producer_id("tx", 60000)
        assert (new.error, new.producer_id, new.producer_epoch) == (E.NONE, pid, 2)
        assert h.sent[-1].producer_epoch == 1 and not h.sent[-1].committed
        # The zombie can neither add, end, nor write.
        assert await c.add_partitions("tx", pid, 0, {DATA[1]}) == E.PRODUCER_FENCED
        assert await c.end_transaction("tx", pid, 0, True) == E.PRODUCER_FENCED
        with pytest.raises(KafkaError) as info:
            h.produce(DATA[0], pid, 0, 1)
        assert info.value.code == E.INVALID_PRODUCER_EPOCH
        assert h.replicas.get(*DATA[0]).last_stable_offset == 2

    run(test)


def test_timed_out_transaction_is_aborted_and_its_producer_fenced(run):
    async def test(h: Harness) -> None:
        c = h.coordinator
        pid = await h.open_transaction("slow", 100, DATA[1])
        await until(lambda: h.state_of("slow").state is TxnState.COMPLETE_ABORT)
        md = h.state_of("slow")
        assert md.producer_epoch == 1
        assert await c.end_transaction("slow", pid, 0, True) == E.PRODUCER_FENCED
        assert h.replicas.get(*DATA[1]).last_stable_offset == 2

    run(test, abort_interval_ms=50)


def test_invalid_requests(run):
    async def test(h: Harness) -> None:
        c = h.coordinator
        assert (await c.init_producer_id("", 1000)).error == E.INVALID_REQUEST
        too_long = await c.init_producer_id("tx", 900_001)
        assert too_long.error == E.INVALID_TRANSACTION_TIMEOUT
        pid = (await c.init_producer_id("tx", 1000)).producer_id
        assert await c.end_transaction("tx", pid, 0, True) == E.INVALID_TXN_STATE  # Empty
        assert c.describe("missing").error == E.TRANSACTIONAL_ID_NOT_FOUND

    run(test)


def test_loading_resumes_markers_of_prepared_transactions(run):
    async def test(h: Harness) -> None:
        c = h.coordinator
        pid = (await c.init_producer_id("tx", 60000)).producer_id
        await c.add_partitions("tx", pid, 0, set(DATA))
        h.produce(DATA[0], pid, 0, 0)
        h.fail_markers = True  # the leaders cannot be reached: stuck in PrepareCommit
        assert await c.end_transaction("tx", pid, 0, True) == E.NONE
        await asyncio.sleep(0.2)
        assert h.state_of("tx").state is TxnState.PREPARE_COMMIT
        await h.restart(epoch=1)  # the new coordinator (epoch 1) finishes the transaction
        await until(lambda: h.state_of("tx").state is TxnState.COMPLETE_COMMIT)
        assert h.sent[-1].coordinator_epoch == 1
        assert h.replicas.get(*DATA[0]).last_stable_offset == 2
        d = h.coordinator.describe("tx")
        assert (d.error, d.state, d.producer_id, d.partitions) == (
            E.NONE, "CompleteCommit", pid, [],
        )  # fmt: skip

    run(test)


def test_admin_views_and_expiry(run):
    async def test(h: Harness) -> None:
        c = h.coordinator
        a = (await c.init_producer_id("a", 60000)).producer_id
        await c.init_producer_id("b", 60000)
        await c.add_partitions("a", a, 0, {DATA[0]})
        d = c.describe("a")
        assert (d.state, d.partitions, d.timeout_ms) == ("Ongoing", [DATA[0]], 60000)
        err, unknown, found = c.list_transactions(["Ongoing", "Bogus"], [])
        assert (err, unknown, [t for t, _, _ in found]) == (E.NONE, ["Bogus"], ["a"])
        assert sorted(t for t, _, _ in c.list_transactions([], [])[2]) == ["a", "b"]
        assert [t for t, _, _ in c.list_transactions([], [a])[2]] == ["a"]
        # Idle ids expire (tombstones); open transactions do not.
        await asyncio.sleep(0.01)
        removed = await c.state.remove_expired_ids()
        assert removed == 1
        assert c.describe("b").error == E.TRANSACTIONAL_ID_NOT_FOUND
        assert h.records("b")[-1] is None
        await h.restart()
        assert h.coordinator.describe("b").error == E.TRANSACTIONAL_ID_NOT_FOUND
        assert h.coordinator.describe("a").state == "Ongoing"

    run(test, id_expiration_ms=1)
