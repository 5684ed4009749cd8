#!/usr/bin/env bash
# `make e2e`: the whole user path on a one-node kind cluster. Gets the tools, creates the cluster,
# builds and loads the Odradek and ZooKeeper images (`kind load docker-image`), runs the pytest
# suite in e2e/ (which installs the chart, applies Topic/Quota/User resources, scales, kills pods,
# upgrades and uninstalls), and deletes the cluster.
#
# Two ways to get kind, helm, kubectl and a node image:
#   stock  docker, kind, helm and kubectl are on PATH (a laptop that can pull images): they are
#          used as they are, with kind's own node image for its version; nothing is built but the
#          two project images (`docker build`, public base images).
#   build  (these machines: no image registry) every tool is built from the Go module proxy into
#          $ODRADEK_CACHE and the node image is made here (scripts/build-kind-node-image.sh); the
#          project images come from the local Debian bases (scripts/build-image.sh).
# E2E_MODE=stock|build chooses; by default stock when kind, helm and kubectl are all on PATH.
#
#   E2E_NODE_IMAGE     node image to run (default: kind's own in stock mode, the one built here
#                      in build mode)
#   E2E_CLUSTER        kind cluster name (default odradek-e2e)
#   E2E_IMAGE          tag of the Odradek image built and loaded (default odradek:e2e)
#   E2E_KEEP_CLUSTER   1: leave the cluster (and the release) running afterwards, for a look
#   E2E_PYTEST_ARGS    extra pytest arguments (e.g. -k scaling, -x)
#   ODRADEK_CACHE      cache directory (default: $HOME/.cache/odradek)
#
# The kubeconfig is $ODRADEK_CACHE/e2e/<cluster>.kubeconfig (~/.kube/config is left alone).
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cluster="${E2E_CLUSTER:-odradek-e2e}"
work="$cache/e2e"
kubeconfig="$work/$cluster.kubeconfig"
image="${E2E_IMAGE:-odradek:e2e}"
zookeeper_image=odradek-zookeeper:3.8.4
mkdir -p "$work"

started=$SECONDS
phase_start=$SECONDS
timings=()
phase() {
    local now=$SECONDS
    if [[ -n "${current_phase:-}" ]]; then
        timings+=("$(printf '%-28s %5ss' "$current_phase" $((now - phase_start)))")
    fi
    current_phase="${1:-}"
    phase_start=$now
    [[ -z "$current_phase" ]] || log "-- $current_phase"
}
report() {
    phase
    log "wall times:"
    printf '  %s\n' "${timings[@]}" >&2
    log "total $((SECONDS - started))s"
}

mode="${E2E_MODE:-}"
if [[ -z "$mode" ]]; then
    if command -v kind >/dev/null && command -v helm >/dev/null && command -v kubectl >/dev/null; then
        mode=stock
    else
        mode=build
    fi
fi
log "mode: $mode"

phase "tools"
case "$mode" in
stock)
    kind=kind helm=helm kubectl=kubectl
    docker info >/dev/null || { log "docker does not answer"; exit 1; }
    node_image="${E2E_NODE_IMAGE:-}"
    ;;
build)
    bash "$root/scripts/install-docker.sh"
    tools="$(bash "$root/scripts/install-kind.sh")"
    bash "$root/scripts/install-helm.sh" >/dev/null
    kind="$tools/kind" helm="$tools/helm"
    # The node image's Kubernetes binaries too, in the same go build (one link of the shared
    # packages instead of two).
    node_tools=""
    [[ -n "${E2E_NODE_IMAGE:-}" ]] || node_tools="kubelet kubeadm kube-scheduler kube-proxy"
    k8s_bin="$(K8S_TOOLS="$node_tools" nice -n 10 bash "$root/scripts/install-k8s-tools.sh")"
    kubectl="$k8s_bin/kubectl"
    if [[ -n "${E2E_NODE_IMAGE:-}" ]]; then
        node_image="$E2E_NODE_IMAGE"
    else
        phase "node image"
        node_image="$(bash "$root/scripts/build-kind-node-image.sh")"
    fi
    ;;
*)
    log "E2E_MODE must be stock or build, not $mode"
    exit 2
    ;;
esac

phase "project images"
if [[ $mode == build ]]; then
    ODRADEK_IMAGE="$image" bash "$root/scripts/build-image.sh" >/dev/null
else
    # Public bases: python:3.11-slim-bookworm (Dockerfile) and a Temurin JRE (the ZooKeeper
    # image's default); ZooKeeper's jars come from Maven Central through scripts/install-zookeeper.sh.
    docker build -q -t "$image" "$root" >/dev/null
    zk_ctx="$work/context-zookeeper"
    rm -rf "$zk_ctx" && mkdir -p "$zk_ctx"
    cp -p "$root"/scripts/zookeeper-image/* "$zk_ctx/"
    cp -rp "$(bash "$root/scripts/install-zookeeper.sh")" "$zk_ctx/libs"
    docker build -q -t "$zookeeper_image" "$zk_ctx" >/dev/null
fi

phase "cluster"
"$kind" delete cluster --name "$cluster" --kubeconfig "$kubeconfig" >/dev/null 2>&1 || true
cleanup() {
    local rc=$?
    if [[ "${E2E_KEEP_CLUSTER:-0}" == 1 ]]; then
        log "cluster $cluster kept: export KUBECONFIG=$kubeconfig"
    else
        phase "delete cluster"
        "$kind" delete cluster --name "$cluster" --kubeconfig "$kubeconfig" >/dev/null 2>&1 || true
    fi
    report
    exit "$rc"
}
trap cleanup EXIT
create=("$kind" create cluster --name "$cluster" --kubeconfig "$kubeconfig"
    --config "$root/e2e/kind/cluster.yaml" --wait 5m)
[[ -z "$node_image" ]] || create+=(--image "$node_image")
"${create[@]}"

phase "load images"
"$kind" load docker-image --name "$cluster" "$image" "$zookeeper_image"

phase "e2e tests"
# shellcheck disable=SC2086
E2E_KUBECONFIG="$kubeconfig" E2E_KUBECTL="$kubectl" E2E_HELM="$helm" E2E_IMAGE="$image" \
    E2E_ZOOKEEPER_IMAGE="$zookeeper_image" E2E_CLUSTER="$cluster" \
    "$root/.venv/bin/pytest" -c "$root/e2e/pytest.ini" --rootdir "$root/e2e" "$root/e2e" \
    ${E2E_PYTEST_ARGS:-}
