"""A driver for pipelines/offline_load.py that kills itself with SIGKILL at a chosen point, as a
crash of the Spark driver would: the test runs it in its own process group, and the kill takes
the Python process and Spark's JVM with it at once.

    python offline_load_driver.py CRASH_AT SPARK_CONF_JSON -- <offline_load.py arguments>

CRASH_AT is `writing` (while Spark writes the staging Parquet: as soon as a task's file
appears, or right after the write if it finished first) or `published` (the output is in
place, the offsets are not committed yet).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

from odradek.pipelines import offline_load
from pyspark.sql import SparkSession


def crash() -> None:
    print("driver: killing the driver's process group", file=sys.stderr, flush=True)
    os.killpg(os.getpgrp(), signal.SIGKILL)


def watch_for_task_output(staging: Path) -> None:
    while not any(p.suffix == ".parquet" for p in (staging / "_temporary").rglob("*")):
        time.sleep(0.02)
    crash()


def main() -> None:
    crash_at, conf = sys.argv[1], json.loads(sys.argv[2])
    options, _ = offline_load.parse_args(sys.argv[sys.argv.index("--") + 1 :])
    builder = SparkSession.builder.appName("offline-load-crash")
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()

    def on_phase(name: str, plan: offline_load.Plan) -> None:
        print(f"driver: phase {name} of plan {plan.id}", file=sys.stderr, flush=True)
        if crash_at == "writing" and name == "writing":
            staging = Path(options.output) / offline_load.STATE_DIR / plan.group / "staging"
            threading.Thread(
                target=watch_for_task_output, args=(staging / plan.id,), daemon=True
            ).start()
        elif crash_at == "writing" and name == "written" or crash_at == name:
            crash()

    offline_load.load(spark, options, on_phase)
    print("driver: the run ended without reaching its crash point", file=sys.stderr, flush=True)
    sys.exit(3)


if __name__ == "__main__":
    main()
