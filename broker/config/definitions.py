"""Every broker and topic property Kafka defines, as `ConfigDef` data, and lookups over them."""

from __future__ import annotations

import re

from ..protocol.config_types import ConfigType
from .values import (
    DOUBLE_MAX,
    INT_MAX,
    LONG_MAX,
    METADATA_STORE_DIRNAME,
    REPLICATION_THROTTLING_UNSUPPORTED,
    ConfigDef,
    GzipLevel,
    Importance,
    ListOf,
    Matches,
    MustBe,
    OneOf,
    Synonym,
    ThrottledReplicas,
    UpdateMode,
    at_least,
    between,
)

T = ConfigType
H, M, L = Importance.HIGH, Importance.MEDIUM, Importance.LOW
RO, PB, CW = UpdateMode.READ_ONLY, UpdateMode.PER_BROKER, UpdateMode.CLUSTER_WIDE

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_COMPRESSION = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
_CLEANUP = ("compact", "delete")
_VERSION_RE = Matches(r"\d+\.\d+(\.\d+)?(-IV\d+)?", "Not a valid metadata version", nullable=False)


def _defs(*items: ConfigDef) -> dict[str, ConfigDef]:
    out: dict[str, ConfigDef] = {}
    for item in items:
        if item.name in out:
            raise AssertionError(f"duplicate config definition {item.name}")
        out[item.name] = item
    return out


def _d(name, type_, default, doc, imp=M, validator=None, mode=RO, **kw) -> ConfigDef:  # noqa: ANN001
    return ConfigDef(name, type_, default, doc, imp, validator, mode, **kw)


# fmt: off
BROKER_CONFIGS: dict[str, ConfigDef] = _defs(
    # --- identity, listeners, metadata store
    _d("broker.id", T.INT, -1, "This broker's id; -1 asks the cluster for a generated one.", H),
    _d("broker.id.generation.enable", T.BOOLEAN, True, "Allow generated broker ids when broker.id is -1."),
    _d("reserved.broker.max.id", T.INT, 1000, "Generated broker ids start above this value.", M, at_least(0)),
    _d("broker.rack", T.STRING, None, "Rack (failure domain) of this broker, used for replica placement."),
    _d("listeners", T.STRING, "PLAINTEXT://:9092", "Comma-separated listener URIs to bind (NAME://host:port); an empty host binds every interface.", H, mode=PB),
    _d("advertised.listeners", T.STRING, None, "Listener URIs published to clients; defaults to listeners.", H, mode=PB),
    _d("listener.security.protocol.map", T.STRING, "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL", "Security protocol of each listener name (NAME:PROTOCOL,...).", L, mode=PB),
    _d("inter.broker.listener.name", T.STRING, None, "Listener brokers use to talk to each other."),
    _d("security.inter.broker.protocol", T.STRING, "PLAINTEXT", "Security protocol between brokers when no inter-broker listener name is set.", M, OneOf(SECURITY_PROTOCOLS, case_insensitive=True)),
    _d("control.plane.listener.name", T.STRING, None, "Optional dedicated listener for controller requests."),
    _d("inter.broker.protocol.version", T.STRING, "3.9-IV0", "Inter-broker protocol version (selects request versions between brokers).", M, _VERSION_RE),
    _d("zookeeper.connect", T.STRING, None, "ZooKeeper connection string host:port[,host:port][/chroot]. Empty: Odradek uses its embedded metadata store (single broker).", H),
    _d("zookeeper.session.timeout.ms", T.INT, 18000, "ZooKeeper session timeout.", H),
    _d("zookeeper.connection.timeout.ms", T.INT, None, "How long to wait for a ZooKeeper connection; defaults to the session timeout.", H),
    _d("zookeeper.max.in.flight.requests", T.INT, 10, "Unacknowledged ZooKeeper requests allowed before blocking.", H, at_least(1)),
    _d("zookeeper.set.acl", T.BOOLEAN, False, "Create znodes with secure ACLs."),
    _d("zookeeper.ssl.client.enable", T.BOOLEAN, False, "Use TLS to connect to ZooKeeper."),
    _d("metadata.store.dir", T.STRING, None, f"Odradek: directory of the embedded metadata store used when zookeeper.connect is empty; default <first log dir>/{METADATA_STORE_DIRNAME}.", H, odradek=True),
    # --- threads, sockets, requests
    _d("num.network.threads", T.INT, 3, "Threads receiving requests and sending responses.", H, at_least(1), CW),
    _d("num.io.threads", T.INT, 8, "Threads processing requests.", H, at_least(1), CW),
    _d("num.replica.fetchers", T.INT, 1, "Fetcher threads per source broker for replication.", H, mode=CW),
    _d("num.recovery.threads.per.data.dir", T.INT, 1, "Threads per log dir for recovery at startup and flush at shutdown.", H, at_least(1), CW),
    _d("background.threads", T.INT, 10, "Threads for background work (retention, deletion).", H, at_least(1), CW),
    _d("queued.max.requests", T.INT, 500, "Requests queued before network threads stop reading.", H, at_least(1)),
    _d("queued.max.request.bytes", T.LONG, -1, "Bytes of queued requests before reading stops; -1 means no limit."),
    _d("socket.send.buffer.bytes", T.INT, 102400, "SO_SNDBUF of server sockets; -1 uses the OS default.", H),
    # Kafka's default is 102400; here -1: a fixed 100 KiB window cut 10 KiB produce by a fifth.
    _d("socket.receive.buffer.bytes", T.INT, -1, "SO_RCVBUF of server sockets; -1 uses the OS default (autotuned).", H),
    _d("socket.request.max.bytes", T.INT, 104857600, "Largest request size accepted.", H, at_least(1)),
    _d("socket.listen.backlog.size", T.INT, 50, "Pending connection backlog per listener.", M, at_least(1)),
    _d("socket.connection.setup.timeout.ms", T.LONG, 10000, "Initial timeout for establishing inter-broker connections."),
    _d("connections.max.idle.ms", T.LONG, 600000, "Idle connections are closed after this long."),
    _d("connections.max.reauth.ms", T.LONG, 0, "Maximum SASL session lifetime before re-authentication; 0 disables."),
    _d("max.connections", T.INT, INT_MAX, "Connections allowed per broker.", M, at_least(0), CW),
    _d("max.connections.per.ip", T.INT, INT_MAX, "Connections allowed from one address.", M, at_least(0), CW),
    _d("max.connections.per.ip.overrides", T.STRING, "", "Per-address connection limits (ip:count,...).", M, mode=CW),
    _d("max.connection.creation.rate", T.INT, INT_MAX, "New connections per second allowed on the broker.", M, at_least(0), CW),
    _d("fetch.max.bytes", T.INT, 57671680, "Largest fetch response the broker returns.", M, at_least(1024)),
    _d("request.timeout.ms", T.INT, 30000, "Timeout of requests the broker sends to other brokers." ),
    # --- logs
    _d("log.dirs", T.STRING, None, "Comma-separated log directories; defaults to log.dir.", H),
    _d("log.dir", T.STRING, "/tmp/kafka-logs", "Log directory used when log.dirs is unset.", H),
    _d("num.partitions", T.INT, 1, "Partitions of auto-created topics and of CreateTopics requests without a count.", M, at_least(1)),
    _d("default.replication.factor", T.INT, 1, "Replication factor of auto-created topics and of requests without one."),
    _d("auto.create.topics.enable", T.BOOLEAN, True, "Create unknown topics when clients ask for their metadata.", H),
    _d("delete.topic.enable", T.BOOLEAN, True, "Allow DeleteTopics; when false deletion requests fail.", H),
    _d("log.segment.bytes", T.INT, 1073741824, "Size at which a new log segment is rolled.", H, at_least(14), CW),
    _d("log.roll.ms", T.LONG, None, "Age at which a new segment is rolled; overrides log.roll.hours.", H, mode=CW),
    _d("log.roll.hours", T.INT, 168, "Age in hours at which a new segment is rolled.", H, at_least(1), CW),
    _d("log.roll.jitter.ms", T.LONG, None, "Random jitter subtracted from the roll time; overrides log.roll.jitter.hours.", H, mode=CW),
    _d("log.roll.jitter.hours", T.INT, 0, "Random jitter in hours subtracted from the roll time.", H, at_least(0), CW),
    _d("log.retention.ms", T.LONG, None, "Time a segment is kept before deletion (-1: forever); overrides minutes and hours.", H, mode=CW),
    _d("log.retention.minutes", T.INT, None, "Retention time in minutes; overrides log.retention.hours.", H, mode=CW),
    _d("log.retention.hours", T.INT, 168, "Retention time in hours.", H, mode=CW),
    _d("log.retention.bytes", T.LONG, -1, "Largest size a partition may reach before old segments are deleted; -1 means no limit.", H, mode=CW),
    _d("log.retention.check.interval.ms", T.LONG, 300000, "How often retention is checked.", M, at_least(1)),
    _d("log.segment.delete.delay.ms", T.LONG, 60000, "Delay before a deleted segment's files are removed.", H, at_least(0), CW),
    _d("log.index.size.max.bytes", T.INT, 10485760, "Maximum size of an offset or time index file.", M, at_least(4), CW),
    _d("log.index.interval.bytes", T.INT, 4096, "Bytes of log between two index entries.", M, at_least(0), CW),
    _d("log.flush.interval.messages", T.LONG, LONG_MAX, "Messages accumulated before the log is fsynced.", H, at_least(1), CW),
    _d("log.flush.interval.ms", T.LONG, None, "Time data may stay unflushed; defaults to log.flush.scheduler.interval.ms.", H, mode=CW),
    _d("log.flush.scheduler.interval.ms", T.LONG, LONG_MAX, "How often the flusher checks whether a log needs an fsync.", H),
    _d("log.flush.offset.checkpoint.interval.ms", T.INT, 60000, "How often the recovery point is checkpointed.", H, at_least(0)),
    _d("log.flush.start.offset.checkpoint.interval.ms", T.INT, 60000, "How often log start offsets are checkpointed.", H, at_least(0)),
    _d("log.cleanup.policy", T.LIST, ["delete"], "Default cleanup policy of segments past retention: delete and/or compact.", M, ListOf(_CLEANUP), CW),
    _d("log.cleaner.enable", T.BOOLEAN, True, "Run the log cleaner (needed for compacted topics)."),
    _d("log.cleaner.threads", T.INT, 1, "Threads of the log cleaner.", M, at_least(0), CW),
    _d("log.cleaner.dedupe.buffer.size", T.LONG, 134217728, "Memory for key deduplication across cleaner threads.", M, mode=CW),
    _d("log.cleaner.io.buffer.size", T.INT, 524288, "I/O buffer memory of the cleaner.", M, at_least(0), CW),
    _d("log.cleaner.io.buffer.load.factor", T.DOUBLE, 0.9, "Load factor of the cleaner's dedupe buffer.", M, mode=CW),
    _d("log.cleaner.io.max.bytes.per.second", T.DOUBLE, DOUBLE_MAX, "I/O throttle of the cleaner.", M, mode=CW),
    _d("log.cleaner.backoff.ms", T.LONG, 15000, "Sleep when there is nothing to clean.", M, at_least(0), CW),
    _d("log.cleaner.min.cleanable.ratio", T.DOUBLE, 0.5, "Dirty ratio above which a log is cleaned.", M, between(0, 1), CW),
    _d("log.cleaner.delete.retention.ms", T.LONG, 86400000, "How long delete markers are kept in compacted logs.", M, at_least(0), CW),
    _d("log.cleaner.min.compaction.lag.ms", T.LONG, 0, "Minimum age of a message before it may be compacted.", M, at_least(0), CW),
    _d("log.cleaner.max.compaction.lag.ms", T.LONG, LONG_MAX, "Maximum time a message stays ineligible for compaction.", M, at_least(1), CW),
    _d("log.preallocate", T.BOOLEAN, False, "Preallocate segment files.", M, mode=CW),
    _d("log.message.format.version", T.STRING, "3.0-IV1", "Deprecated; ignored since inter.broker.protocol.version 3.0.", M, _VERSION_RE),
    _d("log.message.timestamp.type", T.STRING, "CreateTime", "Timestamp stored in records: the producer's (CreateTime) or the broker's append time (LogAppendTime).", M, OneOf(_TIMESTAMP_TYPES), CW),
    _d("log.message.timestamp.difference.max.ms", T.LONG, LONG_MAX, "Deprecated; largest allowed distance between a CreateTime timestamp and the broker's clock.", M, at_least(0), CW),
    _d("log.message.timestamp.before.max.ms", T.LONG, LONG_MAX, "How far in the past a CreateTime timestamp may be.", M, at_least(0), CW),
    _d("log.message.timestamp.after.max.ms", T.LONG, LONG_MAX, "How far in the future a CreateTime timestamp may be.", M, at_least(0), CW),
    _d("log.message.downconversion.enable", T.BOOLEAN, True, "Convert records to old formats for old consumers.", L, mode=CW),
    _d("log.local.retention.ms", T.LONG, -2, "Local retention with tiered storage; -2 follows log.retention.ms.", M, at_least(-2), CW),
    _d("log.local.retention.bytes", T.LONG, -2, "Local size limit with tiered storage; -2 follows log.retention.bytes.", M, at_least(-2), CW),
    _d("message.max.bytes", T.INT, 1048588, "Largest record batch the broker accepts (after compression).", H, at_least(0), CW),
    _d("compression.type", T.STRING, "producer", "Codec of stored batches: a codec name, or producer to keep the producer's.", H, OneOf(_COMPRESSION), CW),
    _d("compression.gzip.level", T.INT, -1, "gzip level used when the broker compresses.", M, GzipLevel(), CW),
    _d("compression.lz4.level", T.INT, 9, "lz4 level used when the broker compresses.", M, between(1, 17), CW),
    _d("compression.zstd.level", T.INT, 3, "zstd level used when the broker compresses.", M, between(-131072, 22), CW),
    # --- replication, controller
    _d("min.insync.replicas", T.INT, 1, "In-sync replicas required for acks=all writes.", H, at_least(1), CW),
    _d("unclean.leader.election.enable", T.BOOLEAN, False, "Allow an out-of-sync replica to become leader (may lose data).", H, mode=CW),
    _d("auto.leader.rebalance.enable", T.BOOLEAN, True, "Periodically move leadership back to preferred replicas.", H),
    _d("leader.imbalance.per.broker.percentage", T.INT, 10, "Allowed share of non-preferred leaders per broker, in percent.", H),
    _d("leader.imbalance.check.interval.seconds", T.LONG, 300, "How often the controller checks leader balance.", H, at_least(1)),
    _d("controller.socket.timeout.ms", T.INT, 30000, "Socket timeout of controller-to-broker channels."),
    _d("controlled.shutdown.enable", T.BOOLEAN, True, "Move leadership away before shutting down.", M),
    _d("controlled.shutdown.max.retries", T.INT, 3, "Controlled shutdown attempts before an unclean stop.", M),
    _d("controlled.shutdown.retry.backoff.ms", T.LONG, 5000, "Pause between controlled shutdown attempts.", M),
    _d("replica.lag.time.max.ms", T.LONG, 30000, "A follower that has not caught up for this long leaves the ISR.", H),
    _d("replica.socket.timeout.ms", T.INT, 30000, "Socket timeout of follower fetches.", H),
    _d("replica.socket.receive.buffer.bytes", T.INT, 65536, "SO_RCVBUF of follower connections.", H ),
    _d("replica.fetch.max.bytes", T.INT, 1048576, "Bytes fetched per partition by followers.", M, at_least(0)),
    _d("replica.fetch.wait.max.ms", T.INT, 500, "Maximum wait of a follower fetch.", M),
    _d("replica.fetch.min.bytes", T.INT, 1, "Minimum bytes of a follower fetch response.", M),
    _d("replica.fetch.response.max.bytes", T.INT, 10485760, "Bytes per follower fetch response.", M, at_least(0)),
    _d("replica.fetch.backoff.ms", T.INT, 1000, "Sleep after a failed follower fetch.", M, at_least(0)),
    _d("replica.high.watermark.checkpoint.interval.ms", T.LONG, 5000, "How often high watermarks are checkpointed.", H),
    _d("replica.selector.class", T.STRING, None, "Chooses the replica consumers fetch from (KIP-392)."),
    _d("fetch.purgatory.purge.interval.requests", T.INT, 1000, "Purge interval of the fetch purgatory."),
    _d("producer.purgatory.purge.interval.requests", T.INT, 1000, "Purge interval of the produce purgatory."),
    _d("delete.records.purgatory.purge.interval.requests", T.INT, 1, "Purge interval of the delete-records purgatory."),
    # --- group coordinator
    _d("group.min.session.timeout.ms", T.INT, 6000, "Smallest session timeout a consumer may ask for."),
    _d("group.max.session.timeout.ms", T.INT, 1800000, "Largest session timeout a consumer may ask for."),
    _d("group.initial.rebalance.delay.ms", T.INT, 3000, "Wait for more members before the first rebalance of an empty group."),
    _d("group.max.size", T.INT, INT_MAX, "Most members a consumer group may have.", M, at_least(1)),
    _d("offsets.topic.num.partitions", T.INT, 50, "Partitions of __consumer_offsets (do not change after creation).", H, at_least(1)),
    _d("offsets.topic.replication.factor", T.SHORT, 3, "Replication factor of __consumer_offsets; creation fails while fewer brokers are alive.", H, at_least(1)),
    _d("offsets.topic.segment.bytes", T.INT, 104857600, "Segment size of __consumer_offsets.", H, at_least(1)),
    _d("offsets.topic.compression.codec", T.INT, 0, "Codec of offset commit batches.", H),
    _d("offsets.load.buffer.size", T.INT, 5242880, "Read size when loading offsets into the cache.", H, at_least(1)),
    _d("offsets.retention.minutes", T.INT, 10080, "Committed offsets of empty groups are kept this long.", H, at_least(1)),
    _d("offsets.retention.check.interval.ms", T.LONG, 600000, "How often stale offsets are looked for.", H, at_least(1)),
    _d("offsets.commit.timeout.ms", T.INT, 5000, "Timeout of an offset commit's replication.", H, at_least(1)),
    _d("offsets.commit.required.acks", T.SHORT, -1, "Deprecated; acks required for offset commits.", H),
    _d("offset.metadata.max.bytes", T.INT, 4096, "Largest metadata string of a committed offset.", H),
    # --- transactions, idempotence
    _d("transaction.state.log.num.partitions", T.INT, 50, "Partitions of __transaction_state.", H, at_least(1)),
    _d("transaction.state.log.replication.factor", T.SHORT, 3, "Replication factor of __transaction_state.", H, at_least(1)),
    _d("transaction.state.log.min.isr", T.INT, 2, "min.insync.replicas of __transaction_state.", H, at_least(1)),
    _d("transaction.state.log.segment.bytes", T.INT, 104857600, "Segment size of __transaction_state.", H, at_least(1)),
    _d("transaction.state.log.load.buffer.size", T.INT, 5242880, "Read size when loading transaction state.", L, at_least(1)),
    _d("transaction.max.timeout.ms", T.INT, 900000, "Largest transaction timeout a producer may ask for.", H, at_least(1)),
    _d("transactional.id.expiration.ms", T.INT, 604800000, "Idle transactional ids expire after this long.", H, at_least(1)),
    _d("transaction.abort.timed.out.transaction.cleanup.interval.ms", T.INT, 10000, "How often timed-out transactions are aborted.", L, at_least(1)),
    _d("transaction.remove.expired.transaction.cleanup.interval.ms", T.INT, 3600000, "How often expired transactional ids are removed.", L, at_least(1)),
    _d("transaction.partition.verification.enable", T.BOOLEAN, True, "Check that a partition was added to a transaction before accepting its writes.", L, mode=CW),
    _d("producer.id.expiration.ms", T.INT, 86400000, "Idle producer ids' state is dropped after this long.", L, at_least(1), CW),
    _d("producer.id.expiration.check.interval.ms", T.INT, 600000, "How often idle producer ids are looked for.", L, at_least(1)),
    # --- security
    _d("authorizer.class.name", T.STRING, "", "Authorizer implementation; empty disables authorization.", L),
    _d("super.users", T.STRING, None, "Principals allowed everything (User:a;User:b).", L),
    _d("allow.everyone.if.no.acl.found", T.BOOLEAN, False, "Allow access to resources that have no ACLs.", L),
    _d("sasl.enabled.mechanisms", T.LIST, ["GSSAPI"], "SASL mechanisms enabled on the broker.", M, mode=PB),
    _d("sasl.mechanism.inter.broker.protocol", T.STRING, "GSSAPI", "SASL mechanism between brokers.", M, mode=PB),
    _d("sasl.jaas.config", T.PASSWORD, None, "JAAS login configuration for SASL.", M, mode=PB),
    _d("ssl.protocol", T.STRING, "TLSv1.3", "TLS protocol used to create the SSL context.", M, mode=PB),
    _d("ssl.enabled.protocols", T.LIST, ["TLSv1.2", "TLSv1.3"], "TLS protocol versions enabled.", M, mode=PB),
    _d("ssl.cipher.suites", T.LIST, [], "Cipher suites enabled; empty uses the defaults.", L, mode=PB),
    _d("ssl.keystore.type", T.STRING, "JKS", "Key store format (JKS, PKCS12, PEM).", M, mode=PB),
    _d("ssl.keystore.location", T.STRING, None, "Key store file.", H, mode=PB),
    _d("ssl.keystore.password", T.PASSWORD, None, "Key store password.", H, mode=PB),
    _d("ssl.key.password", T.PASSWORD, None, "Password of the private key in the key store.", H, mode=PB),
    _d("ssl.keystore.key", T.PASSWORD, None, "Private key in PEM form.", H, mode=PB),
    _d("ssl.keystore.certificate.chain", T.PASSWORD, None, "Certificate chain in PEM form.", H, mode=PB),
    _d("ssl.truststore.type", T.STRING, "JKS", "Trust store format (JKS, PKCS12, PEM).", M, mode=PB ),
    _d("ssl.truststore.location", T.STRING, None, "Trust store file.", H, mode=PB),
    _d("ssl.truststore.password", T.PASSWORD, None, "Trust store password.", H, mode=PB),
    _d("ssl.truststore.certificates", T.PASSWORD, None, "Trusted certificates in PEM form.", H, mode=PB),
    _d("ssl.client.auth", T.STRING, "none", "Client certificate authentication: required, requested or none.", M, OneOf(("required", "requested", "none")), PB),
    _d("ssl.endpoint.identification.algorithm", T.STRING, "https", "Server host name verification; empty disables it.", L, mode=PB),
    _d("ssl.principal.mapping.rules", T.STRING, "DEFAULT", "Rules mapping certificate names to principals.", L),
    _d("password.encoder.secret", T.PASSWORD, None, "Secret used to encrypt dynamically configured passwords in the metadata store.", M),
    _d("delegation.token.secret.key", T.PASSWORD, None, "Secret that signs delegation tokens; unset disables them.", M),
    _d("delegation.token.master.key", T.PASSWORD, None, "Older name of delegation.token.secret.key.", L),
    _d("delegation.token.max.lifetime.ms", T.LONG, 604800000, "Longest a delegation token can be renewed to live.", M, at_least(1)),
    _d("delegation.token.expiry.time.ms", T.LONG, 86400000, "How long a delegation token lives before it must be renewed.", M, at_least(1)),
    _d("delegation.token.expiry.check.interval.ms", T.LONG, 3600000, "How often expired delegation tokens are removed.", L, at_least(1)),
    # --- quotas, metrics
    _d("quota.window.num", T.INT, 11, "Samples kept for client quotas.", L, at_least(1)),
    _d("quota.window.size.seconds", T.INT, 1, "Length of one client quota sample.", L, at_least(1)),
    _d("replication.quota.window.num", T.INT, 11, "Samples kept for replication quotas.", L, at_least(1)),
    _d("replication.quota.window.size.seconds", T.INT, 1, "Length of one replication quota sample.", L, at_least(1)),
    _d("metric.reporters", T.LIST, [], "Metric reporter classes.", L, mode=CW),
    _d("metrics.num.samples", T.INT, 2, "Samples kept per metric.", L, at_least(1)),
    _d("metrics.sample.window.ms", T.LONG, 30000, "Window of one metric sample.", L, at_least(1)),
    _d("metrics.recording.level", T.STRING, "INFO", "Highest recording level of metrics.", L),
    _d("prometheus.metrics.port", T.INT, -1, "Port of the Prometheus /metrics endpoint; -1 turns it off, 0 picks a free port.", M, at_least(-1)),
    _d("prometheus.metrics.host", T.STRING, "0.0.0.0", "Address the Prometheus /metrics endpoint binds to.", L),
)
# fmt: on

# Broker properties whose names form one synonym group (most specific first), as in Kafka.
_BROKER_SYNONYM_GROUPS: tuple[tuple[str, ...], ...] = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)

_HOUR = 3_600_000
_MINUTE = 60_000


def _t(name, type_, default, doc, validator=None, synonyms=(), imp=M) -> ConfigDef:  # noqa: ANN001
    syn = tuple(s if isinstance(s, Synonym) else Synonym(s) for s in synonyms)
    return ConfigDef(name, type_, default, doc, imp, validator, CW, syn)


# fmt: off
TOPIC_CONFIGS: dict[str, ConfigDef] = _defs(
    _t("cleanup.policy", T.LIST, ["delete"], "delete: drop old segments; compact: keep the latest value of each key.", ListOf(_CLEANUP), ["log.cleanup.policy"]),
    _t("compression.type", T.STRING, "producer", "Codec of stored batches, or producer to keep the producer's codec.", OneOf(_COMPRESSION), ["compression.type"]),
    _t("compression.gzip.level", T.INT, -1, "gzip level when the broker compresses.", GzipLevel(), ["compression.gzip.level"]),
    _t("compression.lz4.level", T.INT, 9, "lz4 level when the broker compresses.", between(1, 17), ["compression.lz4.level"]),
    _t("compression.zstd.level", T.INT, 3, "zstd level when the broker compresses.", between(-131072, 22), ["compression.zstd.level"]),
    _t("delete.retention.ms", T.LONG, 86400000, "How long delete markers stay in a compacted log.", at_least(0), ["log.cleaner.delete.retention.ms"]),
    _t("file.delete.delay.ms", T.LONG, 60000, "Delay before a deleted segment's files are removed.", at_least(0), ["log.segment.delete.delay.ms"]),
    _t("flush.messages", T.LONG, LONG_MAX, "Messages between forced fsyncs.", at_least(1), ["log.flush.interval.messages"]),
    _t("flush.ms", T.LONG, LONG_MAX, "Time between forced fsyncs.", at_least(0), ["log.flush.interval.ms", "log.flush.scheduler.interval.ms"]),
    _t("follower.replication.throttled.replicas", T.LIST, [], "Replicas whose follower-side replication is throttled (not supported).", ThrottledReplicas()),
    _t("index.interval.bytes", T.INT, 4096, "Bytes of log between offset index entries.", at_least(0), ["log.index.interval.bytes"]),
    _t("leader.replication.throttled.replicas", T.LIST, [], "Replicas whose leader-side replication is throttled (not supported).", ThrottledReplicas()),
    _t("local.retention.bytes", T.LONG, -2, "Local size limit with tiered storage (-2: as retention.bytes).", at_least(-2), ["log.local.retention.bytes"]),
    _t("local.retention.ms", T.LONG, -2, "Local retention with tiered storage (-2: as retention.ms).", at_least(-2), ["log.local.retention.ms"]),
    _t("max.compaction.lag.ms", T.LONG, LONG_MAX, "Longest time a message may stay uncompacted.", at_least(1), ["log.cleaner.max.compaction.lag.ms"]),
    _t("max.message.bytes", T.INT, 1048588, "Largest record batch accepted (after compression).", at_least(0), ["message.max.bytes"]),
    _t("message.downconversion.enable", T.BOOLEAN, True, "Convert records for consumers of old fetch versions.", None, ["log.message.downconversion.enable"]),
    _t("message.format.version", T.STRING, "3.0-IV1", "Deprecated; ignored.", _VERSION_RE, ["log.message.format.version"]),
    _t("message.timestamp.after.max.ms", T.LONG, LONG_MAX, "How far in the future a CreateTime timestamp may be.", at_least(0), ["log.message.timestamp.after.max.ms"]),
    _t("message.timestamp.before.max.ms", T.LONG, LONG_MAX, "How far in the past a CreateTime timestamp may be.", at_least(0), ["log.message.timestamp.before.max.ms"]),
    _t("message.timestamp.difference.max.ms", T.LONG, LONG_MAX, "Deprecated; largest distance between a CreateTime timestamp and the broker's clock.", at_least(0), ["log.message.timestamp.difference.max.ms"]),
    _t("message.timestamp.type", T.STRING, "CreateTime", "CreateTime (the producer's timestamp) or LogAppendTime (the broker's).", OneOf(_TIMESTAMP_TYPES), ["log.message.timestamp.type"]),
    _t("min.cleanable.dirty.ratio", T.DOUBLE, 0.5, "Dirty ratio above which the log is compacted.", between(0, 1), ["log.cleaner.min.cleanable.ratio"]),
    _t("min.compaction.lag.ms", T.LONG, 0, "Youngest a message may be and still be compacted.", at_least(0), ["log.cleaner.min.compaction.lag.ms"]),
    _t("min.insync.replicas", T.INT, 1, "In-sync replicas needed for acks=all writes.", at_least(1), ["min.insync.replicas"]),
    _t("preallocate", T.BOOLEAN, False, "Preallocate segment files.", None, ["log.preallocate"]),
    _t("remote.log.copy.disable", T.BOOLEAN, False, "Stop copying segments to tiered storage (not supported).", MustBe(False, "Tiered storage is not supported")),
    _t("remote.log.delete.on.disable", T.BOOLEAN, False, "Delete tiered data when tiering is disabled (not supported).", MustBe(False, "Tiered storage is not supported")),
    _t("remote.storage.enable", T.BOOLEAN, False, "Tiered storage for the topic (not supported by Odradek).", MustBe(False, "Tiered storage is not supported")),
    _t("retention.bytes", T.LONG, -1, "Largest size of a partition before old segments go (-1: no limit).", None, ["log.retention.bytes"]),
    _t("retention.ms", T.LONG, 604800000, "How long segments are kept (-1: forever).", at_least(-1), ["log.retention.ms", Synonym("log.retention.minutes", _MINUTE), Synonym("log.retention.hours", _HOUR)]),
    _t("segment.bytes", T.INT, 1073741824, "Size at which a new segment is rolled.", at_least(14), ["log.segment.bytes"]),
    _t("segment.index.bytes", T.INT, 10485760, "Maximum size of a segment's offset and time indexes.", at_least(4), ["log.index.size.max.bytes"]),
    _t("segment.jitter.ms", T.LONG, 0, "Random jitter subtracted from segment.ms.", at_least(0), ["log.roll.jitter.ms", Synonym("log.roll.jitter.hours", _HOUR)]),
    _t("segment.ms", T.LONG, 604800000, "Age at which a new segment is rolled.", at_least(1), ["log.roll.ms", Synonym("log.roll.hours", _HOUR)]),
    _t("unclean.leader.election.enable", T.BOOLEAN, False, "Allow an out-of-sync replica to become leader.", None, ["unclean.leader.election.enable"]),
)
# fmt: on

#: Broker properties that configure topics (the synonyms), reconfigurable cluster-wide.
TOPIC_SYNONYM_NAMES: frozenset[str] = frozenset(
    s.name for d in TOPIC_CONFIGS.values() for s in d.synonyms
)

# Extra names AlterConfigs accepts for a broker although no static property exists (quotas).
# fmt: off
DYNAMIC_ONLY_BROKER_CONFIGS: dict[str, ConfigDef] = _defs(
    _d("leader.replication.throttled.rate", T.LONG, LONG_MAX, "Leader-side replication throttle in bytes/s (not supported).", M, MustBe(LONG_MAX, REPLICATION_THROTTLING_UNSUPPORTED), PB),
    _d("follower.replication.throttled.rate", T.LONG, LONG_MAX, "Follower-side replication throttle in bytes/s (not supported).", M, MustBe(LONG_MAX, REPLICATION_THROTTLING_UNSUPPORTED), PB),
    _d("replica.alter.log.dirs.io.max.bytes.per.second", T.LONG, LONG_MAX, "Throttle of moves between log dirs in bytes/s.", M, at_least(0), PB),
)
# fmt: on

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def register_broker_config(defn: ConfigDef) -> None:
    """Add a property defined by a higher layer (e.g. the server's metrics port)."""
    global _STATIC_DEFAULTS
    if defn.name in BROKER_CONFIGS:
        raise ValueError(f"config {defn.name} is already defined")
    BROKER_CONFIGS[defn.name] = defn
    _STATIC_DEFAULTS = None


def listener_prefixed(name: str) -> tuple[str, str] | None:
    """`listener.name.<listener>.<rest>` -> (LISTENER, rest)."""
    m = re.fullmatch(r"listener\.name\.([^.]+)\.(.+)", name)
    return (m.group(1).upper(), m.group(2)) if m else None


def broker_def(name: str) -> ConfigDef | None:
    return BROKER_CONFIGS.get(name) or DYNAMIC_ONLY_BROKER_CONFIGS.get(name)


_SASL_MECHS = {"plain", "scram-sha-256", "scram-sha-512", "gssapi", "oauthbearer"}


def is_sensitive_name(name: str) -> bool:
    """Passwords, and listener-prefixed properties whose base property is unknown or secret."""
    defn = broker_def(name)
    if defn is not None:
        return defn.sensitive
    pref = listener_prefixed(name)
    if pref is not None:
        base = pref[1].split(".", 1)[1] if pref[1].split(".", 1)[0] in _SASL_MECHS else pref[1]
        base_def = BROKER_CONFIGS.get(base)
        return base_def is None or base_def.sensitive
    return False


# --------------------------------------------------------------------------------------------
# Listeners


def broker_synonym_group(name: str) -> tuple[str, ...]:
    if name == "log.flush.interval.ms":
        return ("log.flush.interval.ms", "log.flush.scheduler.interval.ms")
    for group in _BROKER_SYNONYM_GROUPS:
        if name in group:
            return group
    return (name,)


_STATIC_DEFAULTS: dict[str, str] | None = None


def static_defaults() -> dict[str, str]:
    """String form of every broker default that is not null (cached; definitions are static)."""
    global _STATIC_DEFAULTS
    if _STATIC_DEFAULTS is None:
        _STATIC_DEFAULTS = {
            name: s
            for name, d in BROKER_CONFIGS.items()
            if (s := d.to_string(d.default)) is not None and not d.sensitive
        }
    return _STATIC_DEFAULTS


# --------------------------------------------------------------------------------------------
# Loading


def list_config_type(name: str, *, topic: bool) -> bool:
    """Whether `name` is LIST-typed (APPEND/SUBTRACT are only valid for lists)."""
    defn = TOPIC_CONFIGS.get(name) if topic else broker_def(name)
    return defn is not None and defn.type is ConfigType.LIST


def default_string(name: str, *, topic: bool) -> str | None:
    defn = TOPIC_CONFIGS.get(name) if topic else broker_def(name)
    return defn.to_string(defn.default) if defn is not None else None
