"""The pure parts of pipelines/offline_load.py: the share of --max-records each partition gets,
plans as written to disk, the command line and client properties, and the Kubernetes Job of
manifests/spark, whose arguments must stay ones the job accepts. (Runs against a broker are in
tests/integration/test_spark_offline_load.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from odradek.pipelines.offline_load import (
    LoadError,
    Plan,
    Range,
    allocate,
    parse_args,
    read_properties,
)

ROOT = Path(__file__).resolve().parents[2]


def test_allocate_shares_the_budget_fairly_and_never_past_the_lag() -> None:
    lags = {("t", 0): 100, ("t", 1): 5, ("t", 2): 0, ("u", 0): 40}
    assert allocate(lags, None) == lags
    # 10 each; t-1 needs only 5, so the 5 left go to the two partitions still waiting.
    assert allocate(lags, 30) == {("t", 0): 13, ("t", 1): 5, ("t", 2): 0, ("u", 0): 12}
    assert allocate(lags, 1000) == lags
    share = allocate(lags, 7)
    assert sum(share.values()) == 7 and all(share[tp] <= lags[tp] for tp in lags)


def test_plan_round_trips_through_json() -> None:
    plan = Plan("abc", "g", [Range("t", 0, 5, 9), Range("t", 1, 0, 0)], 123)
    again = Plan.from_json(plan.to_json())
    assert again == plan
    assert again.ends == {("t", 0): 9, ("t", 1): 0}


def test_command_line_and_client_properties(tmp_path: Path) -> None:
    props = tmp_path / "client.properties"
    props.write_text(
        "# a Kafka client properties file\nsecurity.protocol=SASL_SSL\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="u" password="p=q";\n\n! also a comment\n'
    )
    options, summary = parse_args(
        ["--bootstrap-servers", "b:9092", "--topics", "a, b", "--output", "/out",
         "--command-config", str(props), "--kafka-option", "ssl.truststore.type=PEM",
         "--max-records", "10", "--no-fail-on-data-loss", "--summary-json", "/s.json"]
    )  # fmt: skip
    assert options.topics == ["a", "b"] and options.max_records == 10
    assert not options.fail_on_data_loss and summary == "/s.json"
    assert options.kafka_options == {
        "security.protocol": "SASL_SSL",
        "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="u" password="p=q";',
        "ssl.truststore.type": "PEM",
    }
    bad = tmp_path / "bad.properties"
    bad.write_text("no separator here\n")
    with pytest.raises(LoadError, match="not a key=value line"):
        read_properties(str(bad))
    with pytest.raises(LoadError, match="cannot read"):
        read_properties(str(tmp_path / "missing.properties"))
    with pytest.raises(SystemExit):
        parse_args(["--bootstrap-servers", "b:9092", "--output", "/out"])  # no topics


def test_kubernetes_job_runs_the_job_with_arguments_it_accepts() -> None:
    docs = list(yaml.safe_load_all((ROOT / "manifests/spark/offline-load-job.yaml").read_text()))
    job = next(d for d in docs if d["kind"] == "Job")
    container = job["spec"]["template"]["spec"]["containers"][0]
    script = container["command"][-1]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert script == f"{mounts['job']}/offline_load.py"
    claim = next(d for d in docs if d["kind"] == "PersistentVolumeClaim")["metadata"]["name"]
    volumes = {v["name"]: v for v in job["spec"]["template"]["spec"]["volumes"]}
    assert volumes["parquet"]["persistentVolumeClaim"]["claimName"] == claim
    options, _ = parse_args(container["args"])
    assert options.output.startswith(mounts["parquet"])
    assert options.bootstrap_servers == "odradek-bootstrap.kafka.svc.cluster.local:9092"
