"""Topic, Quota and User resources on kind: applied with kubectl, carried out by the operator the
chart installed, checked from client pods in the cluster."""

from __future__ import annotations

import base64
import json

from conftest import RELEASE
from harness import Kube, wait_until

API = "kafka.odradek.io/v1alpha1"


def resource(kind: str, name: str, **spec: object) -> dict:
    return {
        "apiVersion": API,
        "kind": kind,
        "metadata": {"name": name},
        "spec": {"cluster": RELEASE, **spec},
    }


def ready(kube: Kube, kind: str, name: str, generation: bool = True) -> dict:
    """Wait until the resource's Ready condition is True for its current generation."""

    def check() -> dict | None:
        obj = kube.get(kind, name)
        for c in (obj or {}).get("status", {}).get("conditions", []):
            if c["type"] == "Ready" and c["status"] == "True":
                current = obj["metadata"]["generation"]
                if not generation or c.get("observedGeneration") == current:
                    return obj
        return None

    return wait_until(check, 180, what=f"{kind} {name} Ready")


def durable_topic(kube: Kube, name: str, partitions: int) -> dict:
    """A Topic whose acknowledged writes survive one broker going away (three replicas, two in
    sync), deleted with its resource; returns it once Ready."""
    kube.apply(
        resource(
            "Topic",
            name,
            partitions=partitions,
            replicas=3,
            config={"min.insync.replicas": "2"},
            deletionPolicy="Delete",
        )
    )
    return ready(kube, "topic", name)


def admin(kube: Kube, toolbox: str, *args: str) -> object:
    out = kube.kubectl("exec", toolbox, "--", "python", "/clients/e2e_client.py", "admin", *args)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_topic_created_changed_and_deleted_by_policy(
    kube: Kube, release: str, toolbox: str
) -> None:
    kube.apply(
        resource(
            "Topic",
            "e2e-orders",
            partitions=3,
            replicas=3,
            config={"retention.ms": "3600000", "min.insync.replicas": "2"},
            deletionPolicy="Delete",
        ),
        resource("Topic", "e2e-kept", partitions=1, replicas=2, deletionPolicy="Retain"),
    )
    obj = ready(kube, "topic", "e2e-orders")
    topic = admin(kube, toolbox, "topic", "e2e-orders")
    assert sorted(topic["partitions"]) == ["0", "1", "2"]
    assert all(sorted(p["replicas"]) == [0, 1, 2] for p in topic["partitions"].values())
    assert topic["configs"] == {"retention.ms": "3600000", "min.insync.replicas": "2"}
    assert [c["reason"] for c in obj["status"]["conditions"] if c["type"] == "Ready"] == [
        "Reconciled"
    ]
    table = kube.kubectl("get", "topics").stdout
    assert "e2e-orders" in table and "True" in table

    # Editing the resource changes the topic: more partitions, a changed and a removed config.
    kube.kubectl(
        "patch", "topic", "e2e-orders", "--type=merge", "-p",
        json.dumps({"spec": {"partitions": 5, "config": {"retention.ms": "7200000",
                                                         "min.insync.replicas": None}}}),
    )  # fmt: skip
    ready(kube, "topic", "e2e-orders")
    topic = admin(kube, toolbox, "topic", "e2e-orders")
    assert sorted(topic["partitions"], key=int) == ["0", "1", "2", "3", "4"]
    assert topic["configs"] == {"retention.ms": "7200000"}

    # Lowering partitions is refused at apply time (the CRD's CEL rule), before any broker call.
    refused = kube.kubectl(
        "patch", "topic", "e2e-orders", "--type=merge", "-p", '{"spec": {"partitions": 2}}',
        check=False,
    )  # fmt: skip
    assert refused.returncode != 0 and "partitions" in refused.stderr

    # Deletion follows the policy: Delete removes the topic, Retain keeps it.
    ready(kube, "topic", "e2e-kept")
    assert admin(kube, toolbox, "topic", "e2e-kept") is not None
    kube.delete("topic", "e2e-orders", "e2e-kept")
    wait_until(
        lambda: admin(kube, toolbox, "topic", "e2e-orders") is None, 60, what="topic deleted"
    )
    assert admin(kube, toolbox, "topic", "e2e-kept") is not None


def test_quota_throttles_a_producer_pod(kube: Kube, release: str, toolbox: str) -> None:
    kube.apply(resource("Topic", "e2e-quota", partitions=1, replicas=1))
    ready(kube, "topic", "e2e-quota")
    kube.apply(
        resource("Quota", "e2e-slow-client", clientId={"name": "e2e-slow"}, producerByteRate=65536)
    )
    ready(kube, "quota", "e2e-slow-client")

    def throttled(client_id: str) -> int:
        out = kube.run_client(
            f"e2e-throttle-{client_id}",
            [
                "/clients/e2e_client.py", "throttle", "--topic", "e2e-quota",
                "--client-id", client_id, "--requests", "12", "--batch-bytes", "65536",
            ],
        )  # fmt: skip
        return json.loads(out.strip().splitlines()[-1])["throttle_time_ms"]

    # 768 KiB at a quota of 64 KiB/s: the broker tells the client to back off.
    assert throttled("e2e-slow") > 0
    # The same load from a client id without a quota is not throttled.
    assert throttled("e2e-fast") == 0
    kube.delete("quota", "e2e-slow-client")
    kube.delete("topic", "e2e-quota")


def secret_env(secret: str) -> list[dict]:
    return [
        {"name": env, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}
        for env, key in (
            ("SASL_USERNAME", "username"),
            ("SASL_PASSWORD", "password"),
            ("SASL_MECHANISM", "mechanism"),
        )
    ]


def test_user_logs_in_with_scram_and_its_acls_hold(kube: Kube, release: str) -> None:
    kube.apply(
        resource("Topic", "e2e-allowed", partitions=1, replicas=3),
        resource("Topic", "e2e-denied", partitions=1, replicas=3),
        resource(
            "User",
            "e2e-app",
            authentication={"type": "scram-sha-512"},
            authorization={
                "acls": [
                    {
                        "resource": {"type": "topic", "name": "e2e-allowed"},
                        "operations": ["Write", "Read", "Describe"],
                    },
                    {
                        "resource": {"type": "group", "name": "*"},
                        "operations": ["Read"],
                    },
                ]
            },
        ),
    )
    for name in ("e2e-allowed", "e2e-denied"):
        ready(kube, "topic", name)
    ready(kube, "user", "e2e-app")
    secret = kube.get("secret", "e2e-app")
    assert secret is not None
    data = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    assert data["username"] == "e2e-app" and data["mechanism"] == "SCRAM-SHA-512"

    sasl = {
        "BOOTSTRAP": f"{RELEASE}-bootstrap.kafka.svc.cluster.local:9093",
        "SECURITY_PROTOCOL": "SASL_PLAINTEXT",
    }

    def attempt(pod: str, topic: str, env_from_secret: bool = True, **env: str) -> dict:
        kube.client_pod(
            pod,
            ["/clients/e2e_client.py", "try", "--topic", topic],
            env={**sasl, **env},
            env_from=secret_env("e2e-app") if env_from_secret else [],
        )
        phase = kube.wait_pod_phase(pod, ("Succeeded", "Failed"), 180)
        out = kube.logs(pod)
        assert phase == "Succeeded", out
        return json.loads(out.strip().splitlines()[-1])

    assert attempt("e2e-user-allowed", "e2e-allowed") == {"produce": "ok", "fetch": "ok"}
    denied = attempt("e2e-user-denied", "e2e-denied")
    assert denied == {
        "produce": "TOPIC_AUTHORIZATION_FAILED",
        "fetch": "TOPIC_AUTHORIZATION_FAILED",
    }
    # The right user name with a wrong password gets nowhere.
    wrong = attempt(
        "e2e-user-wrong",
        "e2e-allowed",
        env_from_secret=False,
        SASL_USERNAME="e2e-app",
        SASL_PASSWORD="not-the-password",
        SASL_MECHANISM="SCRAM-SHA-512",
    )
    assert wrong == {
        "produce": "SASL_AUTHENTICATION_FAILED",
        "fetch": "SASL_AUTHENTICATION_FAILED",
    }
    kube.delete("user", "e2e-app")
    wait_until(lambda: kube.get("secret", "e2e-app") is None, 60, what="User's Secret deleted")
    kube.delete("topic", "e2e-allowed", "e2e-denied")
