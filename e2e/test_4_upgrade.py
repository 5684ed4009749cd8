"""`helm upgrade` changing a broker config: the brokers restart one at a time, highest ordinal
first, each ready before the next goes; a producer writing meanwhile loses nothing."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

import yaml
from conftest import BROKERS, RELEASE, chart_args
from harness import Kube
from pipeline import ProducerPod, check_nothing_lost, consume_all
from test_2_resources import admin, durable_topic

TOPIC = "e2e-upgrade"


def test_config_change_rolls_brokers_one_at_a_time(
    kube: Kube, release: str, toolbox: str, tmp_path: Path
) -> None:
    durable_topic(kube, TOPIC, 3)
    before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in kube.pods(BROKERS)}
    assert len(before) == 3
    assert admin(kube, toolbox, "broker-config", "0", "log.retention.hours") == {
        "log.retention.hours": "168"
    }
    producer = ProducerPod(kube, "e2e-upgrade-producer", TOPIC).start()
    acked = producer.wait_more_acks(0)

    # The upgrade runs while this thread watches the brokers: never more than one down.
    values = Path(tmp_path / "upgrade.yaml")
    values.write_text(yaml.safe_dump({"broker": {"config": {"log.retention.hours": 48}}}))
    upgrade: list[subprocess.CompletedProcess[str]] = []
    worker = threading.Thread(
        target=lambda: upgrade.append(
            kube.helm(
                "upgrade",
                *chart_args("--values", str(values), "--wait", "--timeout", "15m"),
                check=False,
                timeout=1200,
            )  # fmt: skip
        )
    )
    worker.start()
    most_down = 0
    while worker.is_alive():
        pods = kube.pods(BROKERS)
        down = 3 - sum(1 for p in pods if kube.ready(p))
        most_down = max(most_down, down)
        time.sleep(1)
    worker.join()
    assert upgrade[0].returncode == 0, upgrade[0].stderr
    assert most_down <= 1, f"{most_down} brokers were down at once"
    # wait for the StatefulSet to have rolled every pod (helm --wait covers it; be explicit)
    kube.kubectl("rollout", "status", f"statefulset/{RELEASE}-broker", "--timeout=10m", timeout=700)

    pods = kube.wait_pods_ready(BROKERS, 3)
    assert all(before[p["metadata"]["name"]] != p["metadata"]["uid"] for p in pods), "not rolled"
    started = sorted(pods, key=lambda p: p["metadata"]["creationTimestamp"])
    assert [p["metadata"]["name"] for p in started] == [f"{RELEASE}-broker-{i}" for i in (2, 1, 0)]
    for broker in ("0", "1", "2"):
        assert admin(kube, toolbox, "broker-config", broker, "log.retention.hours") == {
            "log.retention.hours": "48"
        }

    producer.wait_more_acks(acked)
    acks = producer.stop()
    check_nothing_lost(acks, consume_all(kube, "e2e-upgrade-consumer", TOPIC))
