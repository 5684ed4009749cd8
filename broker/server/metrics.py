"""The broker's Prometheus metrics, named as the Prometheus JMX exporter names Kafka's MBeans
(the rules Strimzi ships), so dashboards and alerts written for Apache Kafka read them unchanged:
`kafka_server_brokertopicmetrics_messagesin_total{topic}`,
`kafka_server_replicamanager_underreplicatedpartitions`, and so on.

Counters are bumped on the request path once per partition or request (never per record);
gauges of the broker's state are computed when Prometheus scrapes, on the HTTP server's thread,
from snapshots of the broker's tables.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from ..protocol.api_keys import ApiKey

if TYPE_CHECKING:
    from .services import BrokerServices

log = logging.getLogger(__name__)

# Request latencies in milliseconds, Kafka's unit (its TotalTimeMs histograms).
_LATENCY_BUCKETS_MS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)


class _StateCollector(Collector):
    def __init__(self, broker: BrokerServices) -> None:
        self.broker = broker

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        broker = self.broker
        partitions = list(broker.replica_manager.partitions.values())
        leaders = [p for p in partitions if p.is_leader]
        under = [p for p in leaders if len(p.state.isr) < len(p.state.replicas)]
        under_min = [p for p in leaders if len(p.state.isr) < p.effective_min_isr]
        controller = broker.controller
        for name, doc, value in (
            ("kafka_server_replicamanager_partitioncount", "Partitions on this broker",
             len(partitions)),
            ("kafka_server_replicamanager_leadercount", "Partitions this broker leads",
             len(leaders)),
            ("kafka_server_replicamanager_underreplicatedpartitions",
             "Led partitions whose ISR is smaller than their replica set", len(under)),
            ("kafka_server_replicamanager_underminisrpartitioncount",
             "Led partitions whose ISR is below min.insync.replicas", len(under_min)),
            ("kafka_controller_kafkacontroller_activecontrollercount",
             "1 on the active controller", int(controller is not None and controller.active)),
            ("kafka_server_socketservermetrics_connection_count", "Open client connections",
             len(broker.server.connections)),
        ):  # fmt: skip
            yield GaugeMetricFamily(name, doc, value=value)
        sizes = GaugeMetricFamily(
            "kafka_log_log_size", "Bytes of a partition's log", labels=["topic", "partition"]
        )
        for p in partitions:
            sizes.add_metric([p.topic, str(p.index)], p.log.size)
        yield sizes
        yield from _storage_metrics(broker)
        rm = broker.replica_manager
        yield CounterMetricFamily(
            "kafka_server_replicamanager_isrshrinks", "ISR shrinks proposed", value=rm.isr_shrinks
        )
        yield CounterMetricFamily(
            "kafka_server_replicamanager_isrexpands", "ISR expansions proposed",
            value=rm.isr_expands,
        )  # fmt: skip


def _storage_metrics(broker: BrokerServices) -> Iterator[GaugeMetricFamily]:
    """Kafka's kafka.log:type=LogCleaner, LogCleanerManager and LogManager gauges."""
    lm = broker.log_manager
    manager = lm.cleaner_manager
    cleaner = lm.cleaner
    now = lm.clock()
    for name, doc, value in (
        ("kafka_log_logcleanermanager_max_dirty_percent",
         "Dirty share of the dirtiest compacted log, in percent",
         int(100 * manager.dirtiest_ratio)),
        ("kafka_log_logcleanermanager_time_since_last_run_ms",
         "Milliseconds since the cleaner last looked for a log to clean",
         max(now - manager.time_of_last_run, 0)),
        ("kafka_log_logcleaner_cleaner_recopy_percent",
         "Bytes written over bytes read by the last cleaning of each thread, in percent",
         cleaner.cleaner_recopy_percent if cleaner else 0),
        ("kafka_log_logcleaner_max_clean_time_secs",
         "Longest last cleaning among the cleaner threads, in seconds",
         cleaner.max_clean_time_secs if cleaner else 0),
        ("kafka_log_logcleaner_max_buffer_utilization_percent",
         "Fullest offset map among the cleaner threads' last cleanings, in percent",
         cleaner.max_buffer_utilization_percent if cleaner else 0),
        ("kafka_log_logcleaner_max_compaction_delay_secs",
         "How far past max.compaction.lag.ms the most overdue log is, in seconds",
         cleaner.max_compaction_delay_secs if cleaner else 0),
        ("kafka_log_logcleaner_deadthreadcount", "Cleaner threads that died",
         cleaner.dead_thread_count if cleaner else 0),
        ("kafka_log_logmanager_offlinelogdirectorycount", "Log dirs offline after a failure",
         len(lm.offline_dirs)),
    ):  # fmt: skip
        yield GaugeMetricFamily(name, doc, value=value)
    offline = GaugeMetricFamily(
        "kafka_log_logmanager_logdirectoryoffline", "1 when the log dir is offline",
        labels=["logdirectory"],
    )  # fmt: skip
    uncleanable = GaugeMetricFamily(
        "kafka_log_logcleanermanager_uncleanable_partitions_count",
        "Partitions the cleaner gave up on after an error", labels=["logdirectory"],
    )  # fmt: skip
    for d in lm.log_dirs:
        offline.add_metric([str(d)], int(d in lm.offline_dirs))
        uncleanable.add_metric([str(d)], manager.uncleanable_count(d))
    yield offline
    yield uncleanable


class BrokerMetrics:
    """One registry per broker, so several brokers can live in one process (tests)."""

    def __init__(self, broker: BrokerServices) -> None:
        self.registry = CollectorRegistry()
        reg = self.registry
        self.messages_in = Counter(
            "kafka_server_brokertopicmetrics_messagesin", "Records appended by producers",
            ["topic"], registry=reg,
        )  # fmt: skip
        self.bytes_in = Counter(
            "kafka_server_brokertopicmetrics_bytesin", "Bytes appended by producers",
            ["topic"], registry=reg,
        )  # fmt: skip
        self.bytes_out = Counter(
            "kafka_server_brokertopicmetrics_bytesout", "Bytes fetched by consumers",
            ["topic"], registry=reg,
        )  # fmt: skip
        self.requests = Counter(
            "kafka_network_requestmetrics_requests", "Requests handled",
            ["request", "version"], registry=reg,
        )  # fmt: skip
        self.total_time = Histogram(
            "kafka_network_requestmetrics_totaltimems", "Request time from decode to response",
            ["request"], buckets=_LATENCY_BUCKETS_MS, registry=reg,
        )  # fmt: skip
        reg.register(_StateCollector(broker))
        # Kafka's request tag: the API's name, ApiVersions, DescribeCluster, ...
        self._names = {int(k): k.name.title().replace("_", "") for k in ApiKey}
        self._server: Any = None

    @property
    def enabled(self) -> bool:
        """Served, so worth recording: callers skip their own work (sizes) when not."""
        return self._server is not None

    def record_request(self, api_key: int, version: int, elapsed_ms: float) -> None:
        if self._server is None:
            return  # nobody can scrape them: no work on the request path
        name = self._names.get(api_key, str(api_key))
        self.requests.labels(name, str(version)).inc()
        self.total_time.labels(name).observe(elapsed_ms)

    def record_produce(self, topic: str, records: int, size: int) -> None:
        self.messages_in.labels(topic).inc(records)
        self.bytes_in.labels(topic).inc(size)

    def record_fetch(self, sizes: dict[str, int]) -> None:
        """Bytes a consumer fetch returned, per topic."""
        for topic, size in sizes.items():
            if size:
                self.bytes_out.labels(topic).inc(size)

    def serve(self, host: str, port: int) -> int:
        """Serve /metrics over HTTP; returns the bound port (0 asks for a free one)."""
        self._server, _ = start_http_server(port, host, registry=self.registry)
        bound = self._server.server_address[1]
        log.info("Prometheus metrics on http://%s:%d/metrics", host, bound)
        return bound

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
