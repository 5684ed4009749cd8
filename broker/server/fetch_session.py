"""Incremental fetch sessions (KIP-227, Fetch v7+).

A session remembers a consumer's partitions and what it was last told about each, so a
follow-up fetch names only changes and the response holds only partitions with news.
"""

from __future__ import annotations

import itertools
import random
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from ..protocol.errors import ErrorCode, KafkaError

INITIAL_EPOCH = 0
FINAL_EPOCH = -1


@dataclass
class SessionPartition:
    fetch_offset: int
    max_bytes: int
    # What the last response said; a partition is resent when any of these changes.
    high_watermark: int = -1
    log_start_offset: int = -1
    last_stable_offset: int = -1


@dataclass
class FetchSession:
    id: int
    epoch: int
    partitions: OrderedDict[tuple[str, int], SessionPartition] = field(default_factory=OrderedDict)
    last_used: float = field(default_factory=time.monotonic)


class FetchSessionCache:
    def __init__(self, max_slots: int = 1000) -> None:
        self.max_slots = max_slots
        self.sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self._ids = itertools.count(random.randint(1, 1 << 20))

    def new_session(self) -> FetchSession | None:
        if self.max_slots <= 0:
            return None
        if len(self.sessions) >= self.max_slots:
            self.sessions.popitem(last=False)
        session_id = next(self._ids) & 0x7FFFFFFF or next(self._ids)
        session = FetchSession(session_id, INITIAL_EPOCH)
        self.sessions[session_id] = session
        return session

    def lookup(self, session_id: int, epoch: int) -> FetchSession:
        session = self.sessions.get(session_id)
        if session is None:
            raise KafkaError(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            raise KafkaError(ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        self.sessions.move_to_end(session_id)
        session.last_used = time.monotonic()
        return session

    def remove(self, session_id: int) -> None:
        self.sessions.pop(session_id, None)
