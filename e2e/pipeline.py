"""A producer pod writing with acks=all while the cluster changes under it, and the check that a
consumer then reads back every acknowledged record: at its offset, in order per key, with no gap.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field

from harness import Kube, wait_until

log = logging.getLogger("e2e")


@dataclass
class Acks:
    """What the producer pod's log says so far."""

    acked: list[tuple[int, int, int]] = field(default_factory=list)  # partition, offset, seq
    failed: list[str] = field(default_factory=list)
    done: bool = False

    @classmethod
    def parse(cls, text: str) -> Acks:
        acks = cls()
        for line in text.splitlines():
            word, _, rest = line.partition(" ")
            if word == "ack":
                p, o, s = rest.split()
                acks.acked.append((int(p), int(o), int(s)))
            elif word == "fail":
                acks.failed.append(rest)
            elif word == "done":
                acks.done = True
        return acks


class ProducerPod:
    """`e2e_client.py produce` in a pod: one record every 20 ms, keys k0..k23, acks=all."""

    def __init__(self, kube: Kube, name: str, topic: str) -> None:
        self.kube, self.name, self.topic = kube, name, topic

    def start(self) -> ProducerPod:
        self.kube.client_pod(
            self.name,
            [
                "/clients/e2e_client.py", "produce", "--topic", self.topic,
                "--stop-file", "/tmp/stop",
            ],
        )  # fmt: skip
        self.kube.wait_pod_phase(self.name, ("Running",), 180)
        self.wait_more_acks(0)
        return self

    def acks(self) -> Acks:
        return Acks.parse(self.kube.logs(self.name))

    def wait_more_acks(self, than: int, extra: int = 50) -> int:
        """Wait until the producer has `extra` more acknowledgements than `than`: it is still
        writing. The new count."""

        def check() -> int | None:
            n = len(self.acks().acked)
            return n if n >= than + extra else None

        return wait_until(check, 300, what=f"{self.name}: {extra} more acks than {than}")

    def stop(self) -> Acks:
        self.kube.kubectl("exec", self.name, "--", "touch", "/tmp/stop")
        phase = self.kube.wait_pod_phase(self.name, ("Succeeded", "Failed"), 300)
        acks = self.acks()
        assert phase == "Succeeded" and acks.done, f"producer ended {phase}"
        log.info("%s: %d acknowledged, %d failed", self.name, len(acks.acked), len(acks.failed))
        return acks


def consume_all(kube: Kube, pod: str, topic: str) -> dict[int, dict[int, str]]:
    """Every record of `topic`, read by a consumer pod: partition -> offset -> value."""
    out = kube.run_client(pod, ["/clients/e2e_client.py", "consume", "--topic", topic], 600)
    records: dict[int, dict[int, str]] = defaultdict(dict)
    for line in out.splitlines():
        word, _, rest = line.partition(" ")
        if word == "rec":
            p, o, value = rest.split(" ", 2)
            records[int(p)][int(o)] = value
    return records


def check_nothing_lost(acks: Acks, records: dict[int, dict[int, str]], keys: int = 24) -> None:
    """Each acknowledged record is where its acknowledgement said, each partition has no gap,
    and records of one key come in the order they were sent."""
    missing = [(p, o, s) for p, o, s in acks.acked if records.get(p, {}).get(o) != str(s)]
    assert not missing, f"{len(missing)} acknowledged records not read back, e.g. {missing[:5]}"
    for p, by_offset in records.items():
        offsets = sorted(by_offset)
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets))), f"gap in {p}"
    last_seq: dict[int, int] = {}
    for _, _, seq in sorted(acks.acked):  # partition, then offset order
        key = seq % keys
        assert seq > last_seq.get(key, 0), f"key k{key}: {seq} after {last_seq[key]}"
        last_seq[key] = seq
