"""Reading, creating and updating Secrets through the Kubernetes API (the kubernetes client kopf
logged in with), off the event loop. Only Users need them: a generated password, or one the user
gives."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import kubernetes


@dataclass(frozen=True, slots=True)
class Secret:
    name: str
    data: dict[str, str]  # decoded
    resource_version: str
    owner_uids: frozenset[str]
    owners: tuple[tuple[str, str], ...]  # (kind, name) of each ownerReference


def _decode(raw: Mapping[str, str] | None) -> dict[str, str]:
    out = {}
    for k, v in (raw or {}).items():
        try:
            out[k] = base64.b64decode(v).decode()
        except (ValueError, UnicodeDecodeError):
            continue
    return out


def _from_api(obj: Any) -> Secret:
    refs = obj.metadata.owner_references or []
    return Secret(
        name=obj.metadata.name,
        data=_decode(obj.data),
        resource_version=obj.metadata.resource_version,
        owner_uids=frozenset(r.uid for r in refs),
        owners=tuple((r.kind, r.name) for r in refs),
    )


def _read(namespace: str, name: str) -> Secret | None:
    api = kubernetes.client.CoreV1Api()
    try:
        return _from_api(api.read_namespaced_secret(name, namespace))
    except kubernetes.client.ApiException as e:
        if e.status == 404:
            return None
        raise


def _create(namespace: str, body: dict) -> Secret | None:
    api = kubernetes.client.CoreV1Api()
    try:
        return _from_api(api.create_namespaced_secret(namespace, body))
    except kubernetes.client.ApiException as e:
        if e.status == 409:  # made meanwhile (an earlier attempt): read what is there
            return _read(namespace, body["metadata"]["name"])
        raise


def _patch(namespace: str, name: str, body: dict) -> Secret | None:
    api = kubernetes.client.CoreV1Api()
    try:
        return _from_api(api.patch_namespaced_secret(name, namespace, body))
    except kubernetes.client.ApiException as e:
        if e.status in (404, 409):  # gone, or changed since it was read
            return None
        raise


def _encode(data: Mapping[str, str]) -> dict[str, str]:
    return {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}


async def read_secret(namespace: str, name: str) -> Secret | None:
    return await asyncio.to_thread(_read, namespace, name)


async def create_owned_secret(
    namespace: str,
    name: str,
    data: Mapping[str, str],
    owner: Mapping[str, Any],
    labels: Mapping[str, str],
) -> Secret | None:
    """A Secret owned by `owner` (a resource body), so the garbage collector removes it with
    the owner."""
    meta = owner["metadata"]
    body = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(labels),
            "ownerReferences": [
                {
                    "apiVersion": owner["apiVersion"],
                    "kind": owner["kind"],
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                }
            ],
        },
        "data": _encode(data),
    }
    return await asyncio.to_thread(_create, namespace, body)


async def update_secret(
    namespace: str, name: str, data: Mapping[str, str], resource_version: str
) -> Secret | None:
    """Set these keys of the Secret, only if it is still at `resource_version` (so an edit made
    meanwhile is never overwritten); None when it changed or went away."""
    body = {"metadata": {"resourceVersion": resource_version}, "data": _encode(data)}
    return await asyncio.to_thread(_patch, namespace, name, body)
