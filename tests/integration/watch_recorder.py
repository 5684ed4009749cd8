"""A watch callback for the metadata-store tests."""

from __future__ import annotations

import threading

from odradek.broker.cluster.metadata_store import EventType, WatchedEvent


class Recorder:
    """A watch callback that records events and the thread it ran on."""

    def __init__(self) -> None:
        self.events: list[WatchedEvent] = []
        self.threads: set[str] = set()
        self.arrived = threading.Event()

    def __call__(self, event: WatchedEvent) -> None:
        self.events.append(event)
        self.threads.add(threading.current_thread().name)
        self.arrived.set()

    def pairs(self) -> list[tuple[EventType, str]]:
        return [(e.type, e.path) for e in self.events]
