"""Apache Kafka's own command-line tools against Odradek: `odradek kafka-tool NAME ARGS`.

Kafka's tools are Java programs. Their jars (the pinned list in kafka_jars.py) are fetched from
Maven Central on first use into a cache shared with scripts/install-kafka.sh, each checked
against its SHA-256; a tool then runs the way Kafka's bin/*.sh scripts run it: `java -cp
'<libs>/*' <main class> ARGS`, with Kafka's heap default and a log4j setup that logs warnings to
stderr.

    ODRADEK_KAFKA_HOME        the cache (default ~/.cache/odradek/kafka-<version>)
    ODRADEK_MAVEN_REPOSITORY  a Maven Central mirror (default https://repo1.maven.org/maven2)
    JAVA_HOME, KAFKA_HEAP_OPTS, KAFKA_OPTS   as for Kafka's scripts
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import os
import shlex
import shutil
import sys
import tempfile
import threading
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple, TextIO

from .kafka_jars import JARS, KAFKA_VERSION

MAVEN_CENTRAL = "https://repo1.maven.org/maven2"
DOWNLOAD_THREADS = 4
DOWNLOAD_TIMEOUT_S = 60.0
DEFAULT_HEAP_OPTS = "-Xmx256M"  # Kafka's kafka-run-class.sh default

# Kafka's bin/ scripts (3.9) that make sense against an Odradek broker, and their main classes.
TOOLS: dict[str, str] = {
    "kafka-acls": "kafka.admin.AclCommand",
    "kafka-broker-api-versions": "kafka.admin.BrokerApiVersionsCommand",
    "kafka-cluster": "org.apache.kafka.tools.ClusterTool",
    "kafka-configs": "kafka.admin.ConfigCommand",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-console-producer": "kafka.tools.ConsoleProducer",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-delegation-tokens": "org.apache.kafka.tools.DelegationTokenCommand",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-dump-log": "kafka.tools.DumpLogSegments",
    "kafka-e2e-latency": "org.apache.kafka.tools.EndToEndLatency",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-replica-verification": "org.apache.kafka.tools.ReplicaVerificationTool",
    "kafka-streams-application-reset": "org.apache.kafka.tools.StreamsResetter",
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-verifiable-consumer": "org.apache.kafka.tools.VerifiableConsumer",
    "kafka-verifiable-producer": "org.apache.kafka.tools.VerifiableProducer",
    "zookeeper-shell": "org.apache.zookeeper.ZooKeeperMainWithTlsSupportForKafka",
}
RUN_CLASS = "kafka-run-class"  # any main class, given as the first argument

# Kafka's config/tools-log4j.properties: warnings and errors on stderr, stdout left to the tool.
TOOLS_LOG4J = """\
log4j.rootLogger=WARN, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.appender.stderr.Target=System.err
"""

JAVA_MISSING = (
    "java not found: Kafka's tools need a Java runtime (11 or newer) on PATH or in JAVA_HOME "
    "(Debian and Ubuntu: apt-get install default-jre-headless)"
)


class KafkaToolsError(Exception):
    """Why a tool cannot run (no Java, unknown tool, a failed download): one line for the user."""


class Jar(NamedTuple):
    path: str  # in a Maven repository: group/as/dirs/artifact/version/file.jar
    size: int
    sha256: str

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[1]


PINNED: tuple[Jar, ...] = tuple(Jar(*j) for j in JARS)


def kafka_home() -> Path:
    default = Path.home() / ".cache" / "odradek" / f"kafka-{KAFKA_VERSION}"
    return Path(os.environ.get("ODRADEK_KAFKA_HOME") or default)


def missing_jars(libs: Path, jars: Sequence[Jar] = PINNED) -> list[Jar]:
    """Jars absent from `libs` or of the wrong size (a cheap check for every run)."""
    missing = []
    for jar in jars:
        try:
            if (libs / jar.name).stat().st_size == jar.size:
                continue
        except OSError:
            pass
        missing.append(jar)
    return missing


class _Progress:
    """One line on stderr: rewritten in place on a terminal, printed at start and end otherwise."""

    def __init__(
        self, out: TextIO | None, jars: list[Jar], source: str, libs: Path, *, first: bool
    ) -> None:
        self.out = out
        self.tty = out is not None and out.isatty()
        self.total_jars, self.total_bytes = len(jars), sum(j.size for j in jars)
        self.jars = self.bytes = 0
        self.lock = threading.Lock()
        why = "first use" if first else "some are missing"
        self.prefix = (
            f"Fetching Apache Kafka {KAFKA_VERSION}'s tools from {source} into {libs} ({why})"
        )
        self.count = f"{self.total_jars} jar{'s' if self.total_jars != 1 else ''}"
        self._write(f"{self.prefix}: {self.count}, {self._mb(self.total_bytes)} MB")

    @staticmethod
    def _mb(n: int) -> str:
        return f"{n / 1e6:.1f}"

    def _write(self, text: str, *, final: bool = False) -> None:
        if self.out is None:
            return
        if self.tty:
            self.out.write("\r\x1b[K" + text + ("\n" if final else ""))
        elif final or not self.jars:
            self.out.write(text + "\n")
        self.out.flush()

    def advance(self, nbytes: int, *, jar_done: bool = False) -> None:
        with self.lock:
            self.bytes += nbytes
            self.jars += jar_done
            if self.tty:
                self._write(
                    f"{self.prefix}: {self.jars} of {self.count}, "
                    f"{self._mb(self.bytes)} of {self._mb(self.total_bytes)} MB"
                )

    def done(self) -> None:
        self._write(f"{self.prefix}: done, {self.count}", final=True)


def _download(jar: Jar, repository: str, libs: Path, progress: _Progress) -> None:
    url = f"{repository.rstrip('/')}/{jar.path}"
    digest = hashlib.sha256()
    fd, part = tempfile.mkstemp(prefix=f".{jar.name}.", suffix=".part", dir=libs)
    try:
        with os.fdopen(fd, "wb") as f, urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as r:
            while chunk := r.read(1 << 16):
                f.write(chunk)
                digest.update(chunk)
                progress.advance(len(chunk))
        if digest.hexdigest() != jar.sha256:
            raise KafkaToolsError(f"{url} does not have the pinned SHA-256 {jar.sha256}")
        os.replace(part, libs / jar.name)  # atomic: a concurrent run sees the whole jar or none
        progress.advance(0, jar_done=True)
    except (urllib.error.URLError, OSError) as e:
        if isinstance(e, urllib.error.HTTPError):
            reason: object = f"HTTP {e.code} {e.reason}"
        else:
            reason = getattr(e, "reason", None) or e
        raise KafkaToolsError(
            f"cannot download {url}: {reason} (set ODRADEK_MAVEN_REPOSITORY to a Maven Central "
            "mirror when this machine cannot reach it)"
        ) from e
    finally:
        if os.path.exists(part):
            os.unlink(part)


def fetch(
    home: Path | None = None,
    *,
    repository: str | None = None,
    progress: TextIO | None = None,
    jars: Sequence[Jar] = PINNED,
) -> Path:
    """Make sure every jar is in `<home>/libs` (downloading what is missing) and return that
    directory. Progress goes to `progress` (stderr for the command line)."""
    home = home or kafka_home()
    libs = home / "libs"
    repository = repository or os.environ.get("ODRADEK_MAVEN_REPOSITORY") or MAVEN_CENTRAL
    missing = missing_jars(libs, jars)
    if missing:
        libs.mkdir(parents=True, exist_ok=True)
        source = "Maven Central" if repository == MAVEN_CENTRAL else repository
        meter = _Progress(progress, missing, source, libs, first=len(missing) == len(jars))
        with concurrent.futures.ThreadPoolExecutor(DOWNLOAD_THREADS) as pool:
            futures = [pool.submit(_download, jar, repository, libs, meter) for jar in missing]
            for future in concurrent.futures.as_completed(futures):
                error = future.exception()
                if error is not None:
                    for other in futures:
                        other.cancel()
                    raise error
        meter.done()
    log4j = home / "tools-log4j.properties"
    if not log4j.exists():
        log4j.write_text(TOOLS_LOG4J)
    return libs


def find_java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and os.access(Path(java_home) / "bin" / "java", os.X_OK):
        return str(Path(java_home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise KafkaToolsError(JAVA_MISSING)
    return java


def main_class(name: str, args: Sequence[str]) -> tuple[str, list[str]]:
    """The main class of tool `name` (with or without .sh) and the arguments it gets."""
    tool = name.removesuffix(".sh")
    if tool == RUN_CLASS:
        if not args:
            raise KafkaToolsError(f"{RUN_CLASS} needs a class name")
        return args[0], list(args[1:])
    if tool not in TOOLS:
        raise KafkaToolsError(f"unknown tool {name!r}; `odradek kafka-tool --list` names them")
    return TOOLS[tool], list(args)


def command(
    name: str, args: Sequence[str], *, home: Path | None = None, java: str | None = None
) -> list[str]:
    """The java command line that runs tool `name` (fetching the jars first if needed)."""
    main, rest = main_class(name, args)
    java = java or find_java()
    home = home or kafka_home()
    libs = fetch(home, progress=sys.stderr)
    return [
        java,
        *shlex.split(os.environ.get("KAFKA_HEAP_OPTS") or DEFAULT_HEAP_OPTS),
        *shlex.split(os.environ.get("KAFKA_OPTS", "")),
        f"-Dlog4j.configuration=file:{home / 'tools-log4j.properties'}",
        "-cp",
        f"{libs}/*",
        main,
        *rest,
    ]


USAGE = """\
usage: odradek kafka-tool NAME [ARGS ...]     run one of Apache Kafka {version}'s tools
       odradek kafka-tool --list              the tools NAME can be (.sh optional)
       odradek kafka-tool --fetch             fetch the jars now; print their directory

Example: odradek kafka-tool kafka-topics.sh --bootstrap-server 127.0.0.1:9092 --list
The first use fetches Kafka's jars ({megabytes:.0f} MB) from Maven Central into {home}.
"""


def main(argv: Sequence[str]) -> int:
    """`odradek kafka-tool ...`: replaces this process with the tool's JVM (its exit status and
    signals are the tool's own)."""
    try:
        if not argv or argv[0] in ("-h", "--help"):
            megabytes = sum(j.size for j in PINNED) / 1e6
            sys.stdout.write(
                USAGE.format(version=KAFKA_VERSION, home=kafka_home(), megabytes=megabytes)
            )
            return 0 if argv else 2
        if argv[0] == "--list":
            sys.stdout.write("".join(f"{n}.sh\n" for n in [*sorted(TOOLS), RUN_CLASS]))
            return 0
        if argv[0] == "--fetch":
            sys.stdout.write(f"{fetch(progress=sys.stderr)}\n")
            return 0
        cmd = command(argv[0], argv[1:])
    except KafkaToolsError as e:
        sys.stderr.write(f"error: {e}\n")
        return 1
    sys.stdout.flush()
    os.execv(cmd[0], cmd)
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
