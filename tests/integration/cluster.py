"""N Odradek broker processes on loopback forming one cluster in a real ZooKeeper ensemble.

Each cluster works under its own chroot of the shared ensemble (`zk_ensemble`, from
zookeeper.py), so clusters of different tests never see each other. Brokers are
``python -m odradek.broker.cli broker`` processes with fixed ids, ports and directories; each one
can be stopped with SIGTERM (controlled shutdown), killed with SIGKILL, paused (SIGSTOP, e.g. to
let its ZooKeeper session expire), resumed and started again.

Test modules import the fixtures `cluster_factory_fixture` and `shared_cluster_fixture`; tests
ask for them as `cluster_factory` and `shared_cluster`.

Queries go through the project's own client (BrokerConnection), one short connection per call;
`wait_until` polls with a bounded deadline and fails with every broker's log tail.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from confluent_kafka import Consumer, TopicPartition
from odradek.broker.client.connection import BrokerConnection
from odradek.broker.protocol.api_keys import ApiKey
from odradek.broker.records.record import Record, build_batch
from odradek.broker.testing.processes import OdradekProcess
from odradek.broker.testing.zookeeper import ZkEnsemble

CONVERGE_TIMEOUT = float(os.environ.get("ODRADEK_CLUSTER_TIMEOUT", "60"))
# Short enough that a dead broker's session ends quickly, long enough for a loaded CI machine.
SESSION_TIMEOUT_MS = 6000

CLUSTER_OVERRIDES = {
    "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "group.initial.rebalance.delay.ms": "0",
    "controlled.shutdown.retry.backoff.ms": "500",
}

_T = TypeVar("_T")


def run(coro: Any, timeout: float = 30.0) -> Any:
    return asyncio.run(asyncio.wait_for(coro, timeout))


class ClusterBroker(OdradekProcess):
    """One broker process of a cluster, restartable on the same id, port and directories."""

    def __init__(
        self,
        broker_id: int,
        base: Path,
        zk_connect: str,
        overrides: dict[str, str],
        **process: Any,
    ) -> None:
        """`process`: OdradekProcess options (host, port, wrapper, env, pdeathsig) and
        data_dir."""
        data_dir = process.pop("data_dir", base / f"broker{broker_id}" / "data")
        super().__init__(
            data_dir,
            base / f"broker{broker_id}" / "logs",
            {"broker.id": str(broker_id), "zookeeper.connect": zk_connect, **overrides},
            name=f"broker {broker_id}",
            **process,
        )
        self.broker_id = broker_id
        self.zk_connect = zk_connect

    # -- requests (one short connection each)

    async def _request(self, api_key: int, body: dict, **kw: Any) -> dict:
        conn = await BrokerConnection.open(self.host, self.port, request_timeout=15.0)
        try:
            return await conn.request(api_key, body, **kw)
        finally:
            await conn.close()

    def request(self, api_key: int, body: dict, **kw: Any) -> dict:
        return run(self._request(api_key, body, **kw))

    def metadata(self, topics: list[str] | None = None) -> dict:
        body = {
            "topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": False,
        }
        return self.request(ApiKey.METADATA, body)

    def produce_one(self, topic: str, value: bytes, acks: int = -1) -> dict:
        """Write one record to partition 0 of `topic` with a raw Produce request; the
        partition's response (error_code, base_offset, ...)."""
        batch = build_batch([Record(offset=0, timestamp=int(time.time() * 1000), value=value)])
        body = {
            "transactional_id": None,
            "acks": acks,
            "timeout_ms": 10000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
        }
        return self.request(ApiKey.PRODUCE, body)["responses"][0]["partition_responses"][0]

    def alter_client_quota(self, client_id: str, key: str, value: float) -> int:
        """Set one quota of a client id with a raw AlterClientQuotas request; its error code."""
        body = {
            "entries": [
                {
                    "entity": [{"entity_type": "client-id", "entity_name": client_id}],
                    "ops": [{"key": key, "value": value, "remove": False}],
                }
            ],
            "validate_only": False,
        }
        return self.request(ApiKey.ALTER_CLIENT_QUOTAS, body)["entries"][0]["error_code"]


class Cluster:
    """`size` brokers (ids 1..size) under a fresh chroot of the ensemble."""

    def __init__(
        self,
        ensemble: ZkEnsemble,
        base: Path,
        size: int = 3,
        overrides: dict[str, str] | None = None,
        broker_options: Callable[[int], dict[str, Any]] | None = None,
    ) -> None:
        """`broker_options(broker_id)`: OdradekProcess options of each broker (host, port,
        wrapper, env, pdeathsig, data_dir), e.g. to run it in a network namespace."""
        self.ensemble = ensemble
        self.chroot = f"/odradek-{uuid.uuid4().hex[:10]}"
        self.zk_connect = ensemble.connect_string(self.chroot)
        settings = {**CLUSTER_OVERRIDES, **(overrides or {})}
        options = broker_options or (lambda _: {})
        self.brokers = {
            i: ClusterBroker(i, base, self.zk_connect, settings, **options(i))
            for i in range(1, size + 1)
        }
        self._zk: Any = None

    def start(self) -> Cluster:
        for b in self.brokers.values():
            b.launch()
        for b in self.brokers.values():
            b.wait_serving()
        return self

    def stop(self) -> None:
        for b in self.brokers.values():
            if b.proc is not None and b.proc.poll() is None:
                b.resume()
        for b in self.brokers.values():
            b.kill()
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()

    def __getitem__(self, broker_id: int) -> ClusterBroker:
        return self.brokers[broker_id]

    def running(self) -> list[ClusterBroker]:
        return [b for b in self.brokers.values() if b.running]

    def log_tails(self) -> str:
        return "\n".join(f"===== broker {i} =====\n{b.log_tail()}" for i, b in self.brokers.items())

    def wait_until(
        self, check: Callable[[], _T | None], what: str, timeout: float = CONVERGE_TIMEOUT
    ) -> _T:
        """Poll `check` until it returns a truthy value (errors count as "not yet")."""
        deadline = time.monotonic() + timeout
        last: object = None
        while True:
            try:
                value = check()
                if value:
                    return value
                last = value
            except Exception as e:  # noqa: BLE001 - a broker in transition
                last = e
            if time.monotonic() > deadline:
                pytest.fail(
                    f"timed out after {timeout}s waiting for {what} (last: {last!r})\n"
                    f"{self.log_tails()}",
                    pytrace=False,
                )
            time.sleep(0.2)

    # -- ZooKeeper inspection (kazoo on the cluster's chroot)

    @property
    def zk(self) -> Any:
        if self._zk is None:
            from kazoo.client import KazooClient

            self._zk = KazooClient(hosts=self.zk_connect)
            self._zk.start(timeout=30)
        return self._zk

    def zk_controller(self) -> int | None:
        import json

        if not self.zk.exists("/controller"):
            return None
        data, _ = self.zk.get("/controller")
        return int(json.loads(data)["brokerid"])

    def registered(self) -> set[int]:
        return {int(c) for c in self.zk.get_children("/brokers/ids")}

    # -- cluster views

    def views(self, topics: list[str] | None = None) -> dict[int, dict]:
        """Metadata from every running broker."""
        return {b.broker_id: b.metadata(topics) for b in self.running()}

    def converged(self, topics: list[str] | None = None) -> dict | None:
        """The common view when every running broker lists exactly the running brokers, the
        same live controller and identical partition states; else None."""
        alive = {b.broker_id for b in self.running()}
        views = self.views(topics)
        first = None
        for view in views.values():
            summary = summarize(view)
            if set(summary["brokers"]) != alive or summary["controller"] not in alive:
                return None
            if first is None:
                first = summary
            elif summary != first:
                return None
        return first

    def controller(self) -> ClusterBroker:
        cid = self.wait_until(self.zk_controller, "a controller")
        return self.brokers[cid]

    def create_topic(self, name: str, partitions: int, replication_factor: int) -> None:
        def attempt() -> bool:
            body = {
                "topics": [
                    {
                        "name": name,
                        "num_partitions": partitions,
                        "replication_factor": replication_factor,
                        "assignments": [],
                        "configs": [],
                    }
                ],
                "timeout_ms": 30000,
                "validate_only": False,
            }
            resp = self.controller().request(ApiKey.CREATE_TOPICS, body)
            code = resp["topics"][0]["error_code"]
            assert code in (0, 36), resp  # NONE, TOPIC_ALREADY_EXISTS (a retried attempt)
            return True

        self.wait_until(attempt, f"creation of {name}")


def summarize(view: dict) -> dict:
    """The cluster-level facts of a Metadata response, comparable across brokers."""
    return {
        "brokers": sorted(b["node_id"] for b in view["brokers"]),
        "controller": view["controller_id"],
        "cluster_id": view["cluster_id"],
        "topics": {
            t["name"]: {
                p["partition_index"]: (
                    p["leader_id"],
                    p["leader_epoch"],
                    tuple(p["replica_nodes"]),
                    tuple(sorted(p["isr_nodes"])),
                )
                for p in t["partitions"]
            }
            for t in view["topics"]
            if t["error_code"] == 0
        },
    }


@pytest.fixture(name="cluster_factory")
def cluster_factory_fixture(
    zk_ensemble: ZkEnsemble, tmp_path: Path
) -> Iterator[Callable[..., Cluster]]:
    """``cluster_factory(size=3, overrides={...})``: a started cluster, stopped after the test."""
    made: list[Cluster] = []

    def factory(size: int = 3, overrides: dict[str, str] | None = None) -> Cluster:
        c = Cluster(zk_ensemble, tmp_path / f"cluster{len(made)}", size, overrides)
        made.append(c)
        return c.start()

    yield factory
    for c in made:
        c.stop()


@pytest.fixture(name="shared_cluster", scope="module")
def shared_cluster_fixture(
    zk_ensemble: ZkEnsemble, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """Three brokers shared by a module's tests that do not stop brokers."""
    c = Cluster(zk_ensemble, tmp_path_factory.mktemp("cluster"), 3)
    try:
        yield c.start()
    finally:
        c.stop()


def consume_all(bootstrap: str, topic: str) -> list[tuple[int, bytes]]:
    """(offset, value) of every record of partition 0, read from offset 0 to the end."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{time.time()}",
            "enable.auto.commit": False,
        }
    )
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        consumer.assign([TopicPartition(topic, 0, 0)])
        out: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 120
        while (not out or out[-1][0] < high - 1) and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None or msg.error():
                continue
            out.append((msg.offset(), msg.value()))
        return out
    finally:
        consumer.close()
