"""PySpark for the Spark tests: one local SparkSession per test module, with Spark's Kafka
connector on its classpath.

The connector's jars come from Maven Central through scripts/install-spark-connector.sh (cached
under ~/.cache/odradek; `make test` runs it) and reach Spark through `spark.jars`. A missing JDK,
PySpark or connector skips these tests on a developer machine and fails them under CI=true.

Spark is heavy on a two-core machine, so a module shares one session (local mode, two cores, two
shuffle partitions, no UI) and the session's JVM is shut down with the module, freeing its memory
for the rest of the suite.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
INSTALL_SCRIPT = ROOT / "scripts" / "install-spark-connector.sh"


def _unavailable(problem: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(problem, pytrace=False)
    pytest.skip(problem)


def connector_jars() -> list[str]:
    """The connector's jars (resolved once, then from the cache)."""
    if shutil.which("java") is None:
        _unavailable("java is not installed (Spark needs a JDK 17)")
    proc = subprocess.run(
        ["bash", str(INSTALL_SCRIPT), "--list"],
        capture_output=True, text=True, timeout=1800, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        _unavailable(f"Spark's Kafka connector could not be resolved: {proc.stderr[-2000:]}")
    return proc.stdout.strip().splitlines()[-1].split(",")


def spark_conf(workdir: Path, master: str = "local[2]") -> dict[str, str]:
    """What the tests' sessions and spark-submit runs share: small, quiet, loopback only."""
    return {
        "spark.master": master,
        "spark.jars": ",".join(connector_jars()),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.memory": "1g",
        "spark.sql.session.timeZone": "UTC",
        "spark.local.dir": str(workdir / "local"),
        "spark.sql.warehouse.dir": str(workdir / "warehouse"),
        # Fewer reruns of small stages when Spark finds its local shuffle files gone.
        "spark.sql.adaptive.enabled": "false",
    }


def spark_session(workdir: Path, master: str = "local[2]") -> Iterator[Any]:
    """A SparkSession for one module; stopped, and its JVM ended, when the generator closes."""
    try:
        from pyspark import SparkContext
        from pyspark.sql import SparkSession
    except ImportError:
        _unavailable("pyspark is not installed (pip install -e '.[spark]')")
    # Python workers run this interpreter, which has the project and its test dependencies.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    builder = SparkSession.builder.appName("odradek-tests")
    for key, value in spark_conf(workdir, master).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        yield spark
    finally:
        spark.stop()
        gateway = SparkContext._gateway
        if gateway is not None:
            # The gateway JVM exits when its stdin closes; the next module starts a fresh one.
            gateway.shutdown()
            proc = getattr(gateway, "proc", None)
            if proc is not None:
                proc.stdin.close()
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            SparkContext._gateway = None
            SparkContext._jvm = None


def kafka_options(bootstrap: str, **options: Any) -> dict[str, str]:
    """Options of Spark's Kafka source or sink: the bootstrap plus `options`, as strings."""
    return {"kafka.bootstrap.servers": bootstrap, **{k: str(v) for k, v in options.items()}}


def spark_submit(
    workdir: Path, script: Path, args: list[str], timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """Run `script` with PySpark's spark-submit, in local mode with the tests' settings."""
    submit = Path(sys.executable).parent / "spark-submit"
    cmd = [str(submit)]
    for key, value in spark_conf(workdir).items():
        cmd += ["--conf", f"{key}={value}"]
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    return subprocess.run(
        [*cmd, str(script), *args], capture_output=True, text=True, timeout=timeout, env=env,
        check=False,
    )  # fmt: skip
