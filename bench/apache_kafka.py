"""Run a single-node Apache Kafka 3.9 (KRaft, broker and controller in one JVM) by hand, the same
one bench/run.py measures: ``.venv/bin/python bench/apache_kafka.py`` prints its bootstrap
address and serves until Ctrl-C or SIGTERM. Point the integration tests at it with
``ODRADEK_TEST_BOOTSTRAP=<address>`` to check the tests themselves against the reference broker.
"""

from __future__ import annotations

import os
import signal
import sys
import time

from systems import deploy


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def main() -> int:
    # Also when started in the background, where SIGINT is ignored: both signals stop Kafka.
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    kafka = deploy("Kafka", kafka_heap=os.environ.get("KAFKA_HEAP", "1g"))
    try:
        print(kafka.bootstrap, flush=True)
        print(f"workdir {kafka.workdir}; Ctrl-C stops it", file=sys.stderr, flush=True)
        while all(b.running for b in kafka.brokers):
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        kafka.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
