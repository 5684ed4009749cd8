"""A confluent-kafka producer writing on a thread while a test breaks the cluster under it.

The fault tests (leader kill -9, SIGTERM, reassignment) all need the same witness: records
`record-0`, `record-1`, ... sent to partition 0 without pause, and the broker's acknowledgements
kept, so that the test can check afterwards that nothing acknowledged was lost.
"""

from __future__ import annotations

import threading
from types import TracebackType
from typing import Any

from confluent_kafka import KafkaError, Message, Producer


class BackgroundProducer:
    """Produce to partition 0 of `topic` from `with` entry until exit (which flushes and joins).

    `acked` maps offset to value; a report that carries no offset goes to `no_offset`, a failed
    one to `errors`; errors the client reports outside deliveries go to `client_errors`.
    """

    def __init__(self, bootstrap: str, topic: str, flush_seconds: float = 150, **config: Any):
        self.topic = topic
        self.flush_seconds = flush_seconds
        self.acked: dict[int, bytes] = {}
        self.no_offset: list[bytes] = []
        self.errors: list[KafkaError] = []
        self.client_errors: list[KafkaError] = []
        self._stop = threading.Event()
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "message.timeout.ms": 120000,
                "retry.backoff.ms": 200,
                "linger.ms": 5,
                "error_cb": self.client_errors.append,
                **config,
            }
        )
        self.thread = threading.Thread(target=self._produce_forever, daemon=True)

    def _on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.errors.append(err)
        elif msg.offset() is None:
            self.no_offset.append(msg.value())
        else:
            self.acked[msg.offset()] = msg.value()

    def _produce_forever(self) -> None:
        n = 0
        while not self._stop.is_set():
            self._producer.produce(
                self.topic, f"record-{n}".encode(), partition=0, on_delivery=self._on_delivery
            )
            n += 1
            self._producer.poll(0.01)
        self._producer.flush(self.flush_seconds)

    def __enter__(self) -> BackgroundProducer:
        self.thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self.thread.join(self.flush_seconds + 30)
