"""Operator settings: environment, flags, and the Kafka client config it logs in with."""

from __future__ import annotations

from pathlib import Path

import pytest
from odradek.operator.config import load_config


def test_flags_override_the_environment() -> None:
    cfg, _ = load_config(
        ["--resync-seconds", "5", "--cluster", "a"],
        {"ODRADEK_OPERATOR_RESYNC_SECONDS": "9", "ODRADEK_OPERATOR_NAMESPACES": "x, y"},
    )
    assert cfg.resync_seconds == 5.0
    assert cfg.namespaces == ["x", "y"]
    assert cfg.clusters == ["a"]
    assert cfg.client_security() is None  # PLAINTEXT without a client config


def test_client_config_is_read_at_each_connection(tmp_path: Path) -> None:
    config = tmp_path / "client.properties"
    config.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="odradek-operator" password="p\\\\"w";\n'
        "ssl.ca.location=/etc/odradek/ca.crt\n"
    )
    cfg, _ = load_config([], {"ODRADEK_OPERATOR_CLIENT_CONFIG": str(config)})
    security = cfg.client_security()
    assert security is not None
    assert (security.protocol, security.sasl_mechanism) == ("SASL_SSL", "SCRAM-SHA-512")
    assert (security.username, security.password) == ("odradek-operator", 'p"w')
    assert security.ssl_cafile == "/etc/odradek/ca.crt" and security.check_hostname
    # A rotated Secret (the mounted file changes) is used by the next connection.
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.username=u\nsasl.password=new\n")
    rotated = cfg.client_security()
    assert rotated is not None and rotated.password == "new"
    assert rotated.sasl_mechanism == "PLAIN"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("security.protocol=SASL_SSL\n", "needs sasl.username and sasl.password"),
        ("security.protocol=TLS\n", "security.protocol must be one of"),
        ("security.protocol=SSL\nssl.truststore.type=JKS\n", "only PEM files"),
    ],
)
def test_a_broken_client_config_stops_the_operator_at_start(
    tmp_path: Path, text: str, message: str
) -> None:
    config = tmp_path / "client.properties"
    config.write_text(text)
    with pytest.raises(SystemExit, match=message):
        load_config(["--client-config", str(config)], {})
    with pytest.raises(SystemExit, match="cannot read client config"):
        load_config(["--client-config", str(tmp_path / "missing")], {})


def test_namespaced_mode_asks_nothing_cluster_wide() -> None:
    cfg, _ = load_config(["--namespace", "team-a", "--namespace", "team-b"], {})
    assert cfg.namespaces == ["team-a", "team-b"] and not cfg.scans_cluster
    everywhere, _ = load_config([], {})
    assert everywhere.namespaces == [] and everywhere.scans_cluster
    no_crds, _ = load_config(["--no-watch-crds"], {"ODRADEK_OPERATOR_WATCH_CRDS": "true"})
    assert not no_crds.scans_cluster
    env_only, _ = load_config([], {"ODRADEK_OPERATOR_WATCH_CRDS": "false"})
    assert not env_only.watch_crds


@pytest.mark.parametrize("namespace", ["team-*", "!kube-system", "Team", "a-", "a" * 64])
def test_namespace_patterns_are_refused(namespace: str) -> None:
    with pytest.raises(SystemExit, match="not a namespace name"):
        load_config(["--namespace", namespace], {})
