"""Judge a chaos run's history against Kafka's promise for acks=all, min.insync.replicas=2,
RF=3, no unclean election and idempotent producers: no acknowledged record is lost, and every
consumer sees each partition as one sequence.

Per partition it reports:
- lost: acknowledged, not in the log read back after the run;
- moved: acknowledged at one offset, found at another (librdkafka acknowledges some records
  without an offset: those a later acknowledged batch of the same idempotent producer implies);
- duplicated: the same record (every value is unique) more than once in the log;
- reordered: two records of one producer session acknowledged in one order, logged in the other;
  or a consumer receiving offsets out of order within one assignment;
- skipped: a consumer jumping over records of the log within one assignment;
- vanished: a record a consumer received that is not at that offset in the final log (it read
  something that was never committed);
- phantom: a record received or logged that no producer sent;
- offsets backwards: a committed offset the group coordinator returned, or the offset a member
  started consuming from after an assignment, below an offset whose commit was acknowledged
  earlier.

Pure: it reads a History and never the cluster, so tests can feed it histories by hand.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from history import ACK, ASSIGN, COMMIT, COMMITTED, FAIL, READ, SEND, History

EXAMPLES = 5  # anomalies kept per kind, for the report


@dataclass
class Report:
    sent: int = 0
    acked: int = 0
    failed: int = 0  # sends whose outcome the client could not tell
    read: int = 0
    logged: int = 0
    unacked_logged: int = 0  # failed or unanswered sends that made it into the log (allowed)
    anomalies: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def flag(self, kind: str, message: str) -> None:
        self.counts[kind] += 1
        if len(self.anomalies[kind]) < EXAMPLES:
            self.anomalies[kind].append(message)

    def count(self, kind: str) -> int:
        return self.counts.get(kind, 0)

    @property
    def ok(self) -> bool:
        return not any(self.counts.values())

    def summary(self) -> str:
        lines = [
            f"sent {self.sent}, acknowledged {self.acked}, unknown outcome {self.failed}, "
            f"in the log {self.logged} ({self.unacked_logged} not acknowledged), "
            f"received {self.read}"
        ]
        for kind in sorted(self.counts):
            lines.append(f"  {kind}: {self.counts[kind]}")
            lines.extend(f"    {m}" for m in self.anomalies[kind])
        return "\n".join(lines)


def check(history: History) -> Report:
    r = Report()
    sends = {e["value"]: e for e in history.of(SEND)}
    acks = {e["value"]: e for e in history.of(ACK)}
    r.sent = len(sends)
    r.acked = len(acks)
    r.failed = len({e["value"] for e in history.of(FAIL)} - acks.keys())
    final = history.final
    # value -> [(partition, offset)] and (partition, offset) -> value, from the final log
    where: dict[str, list[tuple[int, int]]] = defaultdict(list)
    at: dict[tuple[int, int], str] = {}
    for p, records in final.items():
        for offset, value in records:
            where[value].append((p, offset))
            at[(p, offset)] = value
    r.logged = sum(len(rs) for rs in final.values())
    _check_log(r, sends, acks, where)
    _check_order(r, acks, where)
    _check_reads(r, history, sends, at, final)
    _check_commits(r, history)
    return r


def _check_log(
    r: Report,
    sends: dict[str, dict[str, Any]],
    acks: dict[str, dict[str, Any]],
    where: dict[str, list[tuple[int, int]]],
) -> None:
    for value, places in where.items():
        if value not in sends:
            r.flag("phantom", f"{value!r} in the log at {places} was never sent")
            continue
        if len(places) > 1:
            r.flag("duplicated", f"{value!r} logged {len(places)} times: {places}")
        if value not in acks:
            r.unacked_logged += 1
    for value, ack in acks.items():
        places = where.get(value)
        p, offset = ack["partition"], ack["offset"]
        if not places:
            r.flag("lost", f"{value!r} acknowledged at {p}@{offset} (t={ack['t']:.1f}s) is gone")
        elif offset is not None and (p, offset) not in places:
            r.flag("moved", f"{value!r} acknowledged at {p}@{offset}, logged at {places}")


def _check_order(
    r: Report, acks: dict[str, dict[str, Any]], where: dict[str, list[tuple[int, int]]]
) -> None:
    """Within one producer session and partition, log order follows send order."""
    runs: dict[tuple[str, int], list[tuple[int, int, str]]] = defaultdict(list)
    for value, ack in acks.items():
        places = where.get(value)
        if not places:
            continue
        runs[(ack["producer"], ack["partition"])].append((ack["seq"], places[0][1], value))
    for (producer, p), records in runs.items():
        records.sort()
        for (_, o1, v1), (_, o2, v2) in zip(records, records[1:], strict=False):
            if o2 <= o1:
                r.flag("reordered", f"{producer} on {p}: {v1!r}@{o1} sent before {v2!r}@{o2}")


def _check_reads(
    r: Report,
    history: History,
    sends: dict[str, dict[str, Any]],
    at: dict[tuple[int, int], str],
    final: dict[int, list[tuple[int, str]]],
) -> None:
    offsets = {p: [o for o, _ in records] for p, records in final.items()}
    index = {p: {o: i for i, o in enumerate(os_)} for p, os_ in offsets.items()}
    last: dict[tuple[str, int], int] = {}  # (consumer, partition) -> offset last received
    for e in history.events:
        if e["kind"] == ASSIGN:
            for p in e["partitions"]:
                last.pop((e["consumer"], p), None)
            continue
        if e["kind"] != READ:
            continue
        r.read += 1
        p, offset, value, consumer = e["partition"], e["offset"], e["value"], e["consumer"]
        if value not in sends:
            r.flag("phantom", f"{consumer} received {value!r} at {p}@{offset}, never sent")
        logged = at.get((p, offset))
        if logged != value:
            r.flag(
                "vanished",
                f"{consumer} received {value!r} at {p}@{offset} (t={e['t']:.1f}s); "
                f"the log has {logged!r} there",
            )
        prev = last.get((consumer, p))
        if prev is not None:
            if offset <= prev:
                r.flag("reordered", f"{consumer} on {p}: offset {offset} after {prev}")
            elif (
                prev in index.get(p, {})
                and offset in index[p]
                and index[p][offset] != index[p][prev] + 1
            ):
                r.flag("skipped", f"{consumer} on {p}: jumped from {prev} to {offset}")
        last[(consumer, p)] = offset


def _check_commits(r: Report, history: History) -> None:
    """No committed offset below one whose commit was acknowledged before it was looked up."""
    acked: dict[tuple[str, int], list[tuple[float, int]]] = defaultdict(list)
    for e in history.of(COMMIT):
        acked[(e["group"], e["partition"])].append((e["t"], e["offset"]))

    def floor(group: str, p: int, before: float) -> int:
        return max((o for t, o in acked.get((group, p), []) if t < before), default=-1)

    for e in history.of(COMMITTED):
        need = floor(e["group"], e["partition"], e["started"])
        if e["offset"] < need:
            r.flag(
                "offsets backwards",
                f"group {e['group']} partition {e['partition']}: committed offset "
                f"{e['offset']} at t={e['started']:.1f}s, after a commit of {need} was acknowledged",
            )
    # The first receipt of each consumption run: where the member started.
    assigned: dict[tuple[str, int], tuple[float, str]] = {}
    for e in history.events:
        if e["kind"] == ASSIGN:
            for p in e["partitions"]:
                assigned[(e["consumer"], p)] = (e["t"], e["group"])
        elif e["kind"] == READ and (e["consumer"], e["partition"]) in assigned:
            t, group = assigned.pop((e["consumer"], e["partition"]))
            need = floor(group, e["partition"], t)
            if e["offset"] < need:
                r.flag(
                    "offsets backwards",
                    f"{e['consumer']} started partition {e['partition']} at offset "
                    f"{e['offset']} (assigned t={t:.1f}s) after a commit of {need} "
                    "was acknowledged",
                )
