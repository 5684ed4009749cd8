"""The offline-load scenario of bench/run.py: pipelines/offline_load.py bulk-loading a topic into
Parquet with spark-submit in local mode, as a user would, then its summary. The rate is the
job's own clock (planning, the Spark job, publishing, committing), so the JVM's start-up is left
out; the wall time of the whole spark-submit is reported next to it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

JOB = REPO / "pipelines" / "offline_load.py"
CONNECTOR = REPO / "scripts" / "install-spark-connector.sh"


def connector_jars() -> str:
    out = subprocess.run(
        ["bash", str(CONNECTOR), "--list"], check=True, stdout=subprocess.PIPE, text=True
    ).stdout
    return out.strip().splitlines()[-1]


def run_job(bootstrap: str, topic: str, group: str, workdir: Path, jars: str) -> dict:
    """spark-submit the job once over the whole topic (all of it: a group that has committed
    nothing yet); its summary plus the wall time."""
    summary = workdir / "summary.json"
    cmd = [
        str(Path(sys.executable).parent / "spark-submit"),
        "--master", "local[*]",
        "--driver-memory", "2g",
        "--jars", jars,
        "--conf", "spark.ui.enabled=false",
        "--conf", "spark.ui.showConsoleProgress=false",
        "--conf", f"spark.local.dir={workdir / 'spark-local'}",
        "--conf", "spark.driver.host=127.0.0.1",
        "--conf", "spark.driver.bindAddress=127.0.0.1",
        str(JOB),
        "--bootstrap-servers", bootstrap,
        "--topics", topic,
        "--group", group,
        "--output", str(workdir / "parquet"),
        "--summary-json", str(summary),
    ]  # fmt: skip
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    began = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    wall = time.monotonic() - began
    if proc.returncode != 0:
        raise RuntimeError(f"offline load failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    result = json.loads(summary.read_text())
    return {
        "records": result["records"],
        "bytes": result["bytes"],
        "seconds": result["seconds"],
        "wall_seconds": wall,
        "records_per_s": result["records"] / result["seconds"],
        "mb_per_s": result["bytes"] / result["seconds"] / 1e6,
    }
