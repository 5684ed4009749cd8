"""The chaos checker on histories written by hand: each anomaly it must report, and a clean
history it must pass."""

from __future__ import annotations

from checker import check
from history import ACK, ASSIGN, COMMIT, COMMITTED, FAIL, READ, SEND, History


def history(*events: tuple, final: dict[int, list[tuple[int, str]]]) -> History:
    h = History()
    for t, (kind, fields) in enumerate(events):
        h.events.append({"t": float(t), "kind": kind, **fields})
    h.final = final
    return h


def sent(value: str, partition: int = 0, producer: str = "p1.1", seq: int = 0) -> tuple:
    return SEND, {"producer": producer, "partition": partition, "value": value, "seq": seq}


def acked(value: str, offset: int, partition: int = 0, producer: str = "p1.1", seq: int = 0):
    fields = {"producer": producer, "partition": partition, "value": value, "seq": seq}
    return ACK, {**fields, "offset": offset}


def read(value: str, offset: int, partition: int = 0, consumer: str = "g1") -> tuple:
    return READ, {"consumer": consumer, "partition": partition, "offset": offset, "value": value}


def clean() -> list[tuple]:
    return [
        sent("a", seq=0), sent("b", seq=1), acked("a", 0, seq=0), acked("b", 1, seq=1),
        (ASSIGN, {"consumer": "g1", "group": "g", "partitions": [0]}),
        read("a", 0), read("b", 1),
        (COMMIT, {"consumer": "g1", "group": "g", "partition": 0, "offset": 2}),
        (COMMITTED, {"group": "g", "partition": 0, "offset": 2, "started": 8.5}),
    ]  # fmt: skip


def test_a_clean_history_passes() -> None:
    report = check(history(*clean(), final={0: [(0, "a"), (1, "b")]}))
    assert report.ok, report.summary()
    assert (report.sent, report.acked, report.read, report.logged) == (2, 2, 2, 2)


def test_an_acknowledged_record_missing_from_the_log_is_lost() -> None:
    report = check(history(*clean(), final={0: [(0, "a")]}))
    assert report.count("lost") == 1
    assert "'b' acknowledged at 0@1" in report.anomalies["lost"][0]
    # ...and the consumer read it, so it also vanished.
    assert report.count("vanished") == 1


def test_an_unacknowledged_record_may_be_missing_or_present() -> None:
    events = [sent("a"), (FAIL, {"producer": "p1.1", "partition": 0, "value": "a", "seq": 0,
                                 "error": "_MSG_TIMED_OUT"}), sent("b", seq=1)]  # fmt: skip
    assert check(history(*events, final={0: []})).ok
    report = check(history(*events, final={0: [(0, "a"), (1, "b")]}))
    assert report.ok and report.unacked_logged == 2 and report.failed == 1


def test_a_record_logged_twice_is_duplicated() -> None:
    report = check(history(*clean(), final={0: [(0, "a"), (1, "b"), (2, "b")]}))
    assert report.count("duplicated") == 1


def test_a_record_at_another_offset_than_acknowledged_moved() -> None:
    report = check(history(sent("a"), acked("a", 5), final={0: [(0, "a")]}))
    assert report.count("moved") == 1 and report.count("lost") == 0


def test_log_order_against_send_order_of_one_session() -> None:
    events = [sent("a", seq=0), sent("b", seq=1), acked("b", 0, seq=1), acked("a", 1, seq=0)]
    report = check(history(*events, final={0: [(0, "b"), (1, "a")]}))
    assert report.count("reordered") == 1
    # Two sessions (producer instances) promise nothing about each other.
    other = [sent("a", seq=0), sent("b", producer="p1.2"), acked("b", 0, producer="p1.2"),
             acked("a", 1, seq=0)]  # fmt: skip
    assert check(history(*other, final={0: [(0, "b"), (1, "a")]})).ok


def test_a_consumer_going_back_or_jumping_within_one_assignment() -> None:
    base = [sent(v, seq=i) for i, v in enumerate("abc")]
    base += [acked(v, i, seq=i) for i, v in enumerate("abc")]
    final = {0: [(0, "a"), (1, "b"), (2, "c")]}
    back = check(history(*base, read("b", 1), read("a", 0), final=final))
    assert back.count("reordered") == 1
    jump = check(history(*base, read("a", 0), read("c", 2), final=final))
    assert jump.count("skipped") == 1
    # A new assignment starts a new run: going back to the committed offset is fine.
    again = [read("b", 1), (ASSIGN, {"consumer": "g1", "group": "g", "partitions": [0]}),
             read("a", 0)]  # fmt: skip
    assert check(history(*base, *again, final=final)).ok


def test_a_read_that_is_not_in_the_final_log_vanished() -> None:
    events = [sent("a"), sent("x", seq=1), acked("a", 0), read("x", 1)]
    report = check(history(*events, final={0: [(0, "a")]}))
    assert report.count("vanished") == 1 and report.count("lost") == 0


def test_a_record_nobody_sent_is_a_phantom() -> None:
    report = check(history(read("ghost", 0), final={0: [(0, "ghost")]}))
    assert report.count("phantom") == 2  # received, and in the log


def test_committed_offsets_going_backwards() -> None:
    base = clean()
    lower = (COMMITTED, {"group": "g", "partition": 0, "offset": 1, "started": 100.0})
    assert (
        check(history(*base, lower, final={0: [(0, "a"), (1, "b")]})).count("offsets backwards")
        == 1
    )
    # An observation that started before the commit was acknowledged may see the older value.
    early = (COMMITTED, {"group": "g", "partition": 0, "offset": 1, "started": 3.0})
    assert check(history(*base, early, final={0: [(0, "a"), (1, "b")]})).ok
    # A member assigned after the commit must not start below it.
    restart = [(ASSIGN, {"consumer": "g2", "group": "g", "partitions": [0]}),
               read("b", 1, consumer="g2")]  # fmt: skip
    report = check(history(*base, *restart, final={0: [(0, "a"), (1, "b")]}))
    assert report.count("offsets backwards") == 1


def test_an_acknowledgement_without_offset_counts_where_it_is_logged() -> None:
    # librdkafka's implicit acknowledgements carry no offset.
    report = check(history(sent("a"), acked("a", None), final={0: [(0, "a")]}))
    assert report.ok and report.acked == 1
    assert check(history(sent("a"), acked("a", None), final={0: []})).count("lost") == 1
