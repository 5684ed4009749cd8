"""The history of a chaos run: every send, acknowledgement, failure, receipt and commit.

Clients append events from their threads; the checker (checker.py) reads them afterwards. Times
are the harness's monotonic clock, in seconds since the history began. `dump`/`load` keep a
run's history as JSON lines beside its logs, so a failing history can be checked again (and
turned into a regression test) without the cluster.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Event kinds and their fields (besides "t" and "kind"):
SEND = "send"  # producer, partition, value
ACK = "ack"  # producer, partition, value, offset (None: acknowledged without an offset)
FAIL = "fail"  # producer, partition, value, error (outcome unknown: it may be in the log)
READ = "read"  # consumer, partition, offset, value
ASSIGN = "assign"  # consumer, partitions (a new consumption run starts on each)
COMMIT = "commit"  # consumer, group, partition, offset (acknowledged by the coordinator)
COMMITTED = "committed"  # group, partition, offset, started (an OffsetFetch observation)
FAULT = "fault"  # name, phase ("start" / "stop"), detail


@dataclass
class History:
    events: list[dict[str, Any]] = field(default_factory=list)
    # partition -> [(offset, value)] read back after the run, from offset 0 to the end
    final: dict[int, list[tuple[int, str]]] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def now(self) -> float:
        return time.monotonic() - self.started

    def add(self, kind: str, **fields: Any) -> float:
        t = self.now()
        with self._lock:
            self.events.append({"t": t, "kind": kind, **fields})
        return t

    def of(self, kind: str) -> list[dict[str, Any]]:
        with self._lock:
            return [e for e in self.events if e["kind"] == kind]

    def dump(self, path: Path) -> None:
        with open(path, "w") as f:
            with self._lock:
                for e in self.events:
                    f.write(json.dumps(e, separators=(",", ":")) + "\n")
            for p, records in sorted(self.final.items()):
                f.write(json.dumps({"kind": "final", "partition": p, "records": records}) + "\n")

    @classmethod
    def load(cls, path: Path) -> History:
        h = cls()
        for line in Path(path).read_text().splitlines():
            e = json.loads(line)
            if e["kind"] == "final":
                h.final[e["partition"]] = [(o, v) for o, v in e["records"]]
            else:
                h.events.append(e)
        return h
