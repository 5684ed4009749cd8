#!/usr/bin/env bash
# Build the kind node image odradek-kind-node:<kubernetes version> on a machine where no image can
# be pulled: every binary from the Go module proxy, Debian or the project's own sources, every
# image made here. It does what `kind build node-image` does, from the project's own recipe:
#
#   1. binaries: kubeadm, kubelet, kubectl, kube-apiserver, kube-controller-manager,
#      kube-scheduler, kube-proxy and etcd (scripts/install-k8s-tools.sh), CoreDNS and
#      local-path-provisioner (`go install`, versions pinned below), pause (e2e/kind/images/pause.c,
#      gcc -static);
#   2. the images the node preloads (e2e/kind/images/*.Dockerfile), tagged here as
#      odradek-kind-<name>:<version>; inside the node they carry the names kubeadm asks for
#      (`kubeadm config images list`: registry.k8s.io/kube-apiserver:v1.33.13, ...), which is
#      what keeps kubelet and containerd from pulling anything;
#   3. the node base image odradek-kind-base:bookworm: e2e/kind/node/Dockerfile on the Debian root
#      filesystem `scripts/build-base-image.sh kindnode` makes (systemd, containerd, runc, CNI
#      plugins);
#   4. the node: a container of the base image gets the three node binaries in /usr/bin and
#      /kind/version, a containerd started inside it imports the preloaded images (the Kubernetes
#      names given by `ctr images tag`), and `docker commit` makes the result the node image.
#
# Every step is cached: binaries under $ODRADEK_CACHE/kind/bin with stamps, images by a label
# holding the hash of their inputs; an unchanged second run only checks and prints the tag.
#
#   ODRADEK_CACHE          cache directory (default: $HOME/.cache/odradek)
#   ODRADEK_KIND_NODE_TAG  the image to build (default odradek-kind-node:<kubernetes version>)
#
# Prints the node image's tag on stdout; progress on stderr, logs under $ODRADEK_CACHE/kind/.
# Needs root, docker (scripts/install-docker.sh registers the runc wrapper kind's privileged
# containers need here), go, gcc and libc6-dev.
set -euo pipefail

COREDNS_MODULE=github.com/coredns/coredns@v1.12.0
LOCAL_PATH_MODULE=github.com/rancher/local-path-provisioner@v0.0.30
LOCAL_PATH_IMAGE=odradek-kind-local-path-provisioner:v0.0.30 # named in default-storage.yaml
PAUSE_VERSION=3.10

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
work="$cache/kind"
bin="$work/bin"
label=io.odradek.kind.recipe
images_dir="$root/e2e/kind/images"

die() { log "$*"; exit 1; }

mkdir -p "$bin"
exec 8>"$work/.lock"
flock 8

require_go
go_build_env

bash "$root/scripts/install-docker.sh"

# -- 1. binaries ---------------------------------------------------------------------------------
k8s_bin="$(K8S_TOOLS="kubelet kubeadm kube-scheduler kube-proxy" nice -n 10 \
    bash "$root/scripts/install-k8s-tools.sh")"
k8s_version="$("$k8s_bin/kubeadm" version -o short)"
tag="${ODRADEK_KIND_NODE_TAG:-odradek-kind-node:$k8s_version}"

# go install MODULE@VERSION into $bin, unless the stamp says it is there already.
go_install() {
    local name=$1 module=$2 flags=${3:-}
    go_tool_fresh "$bin" "$name" "$module $flags" ||
        go_tool_install "$bin" "$name" "$module" "$module $flags" "$flags"
}
go_install coredns "$COREDNS_MODULE"
go_install local-path-provisioner "$LOCAL_PATH_MODULE" "-X main.VERSION=${LOCAL_PATH_MODULE#*@}"

pause_stamp="$(cat "$images_dir/pause.c" <(echo "$PAUSE_VERSION") | sha256sum | cut -d' ' -f1)"
if [[ ! -x "$bin/pause" || "$(cat "$bin/.pause.stamp" 2>/dev/null)" != "$pause_stamp" ]]; then
    log "building pause (gcc -static)"
    gcc -static -Os -s -Wall -Wextra -DPAUSE_VERSION="\"$PAUSE_VERSION\"" \
        -o "$bin/pause.partial" "$images_dir/pause.c" ||
        die "gcc -static failed (Debian: apt-get install gcc libc6-dev)"
    mv -f "$bin/pause.partial" "$bin/pause"
    echo "$pause_stamp" >"$bin/.pause.stamp"
fi

# -- 2. images -----------------------------------------------------------------------------------
image_label() { docker image inspect -f "{{index .Config.Labels \"$label\"}}" "$1" 2>/dev/null || true; }

# build_image TAG DOCKERFILE [--build-arg ...] -- FILE...: docker build of a context holding FILEs,
# skipped when TAG carries the hash of the Dockerfile, the arguments and the files.
build_image() {
    local image=$1 dockerfile=$2
    shift 2
    local args=()
    while (($#)) && [[ $1 != -- ]]; do args+=("$1"); shift; done
    shift
    local want
    want="$(
        {
            sha256sum "$dockerfile"
            printf '%s\n' "${args[@]}"
            for f in "$@"; do sha256sum "$f"; done
            # Base images by content: a rebuilt base rebuilds what is on it.
            for a in "${args[@]}"; do
                if [[ $a == BASE=* ]]; then docker image inspect -f '{{.Id}}' "${a#BASE=}"; fi
            done
        } | sed "s#$root/##; s#$bin/##" | sha256sum | cut -d' ' -f1
    )"
    [[ "$(image_label "$image")" == "$want" ]] && return
    log "docker build $image"
    local ctx="$work/context"
    rm -rf "$ctx"
    mkdir -p "$ctx"
    cp -p "$@" "$ctx/"
    local build_args=()
    for a in "${args[@]}"; do build_args+=(--build-arg "$a"); done
    local build_log
    build_log="$work/build-$(basename "$dockerfile" .Dockerfile).log"
    : >"$build_log"
    docker_build "$build_log" "${build_args[@]}" --label "$label=$want" -t "$image" \
        -f "$dockerfile" "$ctx"
    rm -rf "$ctx"
}

net_base="$(bash "$root/scripts/build-base-image.sh" net)"
static_base=odradek-kind-static:1
build_image "$static_base" "$images_dir/static.Dockerfile" -- "$images_dir/passwd" "$images_dir/group"

etcd_version="$("$k8s_bin/etcd" --version | sed -nE 's/^etcd Version: ([0-9.]+)$/\1/p')"
coredns_version="${COREDNS_MODULE#*@}"

# Each preloaded image: the name kubeadm (or the storage manifest) asks for, and its local tag.
declare -A local_tag=(
    ["registry.k8s.io/kube-apiserver:$k8s_version"]="odradek-kind-kube-apiserver:$k8s_version"
    ["registry.k8s.io/kube-controller-manager:$k8s_version"]="odradek-kind-kube-controller-manager:$k8s_version"
    ["registry.k8s.io/kube-scheduler:$k8s_version"]="odradek-kind-kube-scheduler:$k8s_version"
    ["registry.k8s.io/kube-proxy:$k8s_version"]="odradek-kind-kube-proxy:$k8s_version"
    ["registry.k8s.io/etcd:$etcd_version-0"]="odradek-kind-etcd:$etcd_version"
    ["registry.k8s.io/coredns/coredns:$coredns_version"]="odradek-kind-coredns:$coredns_version"
    ["registry.k8s.io/pause:$PAUSE_VERSION"]="odradek-kind-pause:$PAUSE_VERSION"
    ["docker.io/library/$LOCAL_PATH_IMAGE"]="$LOCAL_PATH_IMAGE"
)
# kubeadm must ask for exactly what is built (a newer kubeadm pinning another etcd or CoreDNS
# means a version above needs to follow it).
while read -r wanted; do
    [[ -n "${local_tag[$wanted]:-}" ]] ||
        die "kubeadm $k8s_version wants $wanted, which this script does not build" \
            "(built: ${!local_tag[*]})"
done < <("$k8s_bin/kubeadm" config images list --kubernetes-version "$k8s_version")

for c in kube-apiserver kube-controller-manager kube-scheduler; do
    build_image "odradek-kind-$c:$k8s_version" "$images_dir/component.Dockerfile" \
        "BASE=$static_base" "BINARY=$c" -- "$k8s_bin/$c"
done
build_image "odradek-kind-etcd:$etcd_version" "$images_dir/component.Dockerfile" \
    "BASE=$static_base" BINARY=etcd -- "$k8s_bin/etcd"
build_image "odradek-kind-kube-proxy:$k8s_version" "$images_dir/kube-proxy.Dockerfile" \
    "BASE=$net_base" -- "$k8s_bin/kube-proxy" "$images_dir/kube-proxy-start"
build_image "odradek-kind-coredns:$coredns_version" "$images_dir/coredns.Dockerfile" \
    "BASE=$static_base" -- "$bin/coredns"
build_image "odradek-kind-pause:$PAUSE_VERSION" "$images_dir/pause.Dockerfile" -- "$bin/pause"
build_image "$LOCAL_PATH_IMAGE" "$images_dir/local-path-provisioner.Dockerfile" \
    "BASE=$net_base" -- "$bin/local-path-provisioner"

# -- 3. the node base ----------------------------------------------------------------------------
rootfs="$(bash "$root/scripts/build-base-image.sh" kindnode)"
node_files=()
while IFS= read -r -d '' f; do node_files+=("$f"); done \
    < <(find "$root/e2e/kind/node/files" -type f -print0 | sort -z)
node_base=odradek-kind-base:bookworm
want="$(
    {
        docker image inspect -f '{{.Id}}' "$rootfs"
        cd "$root/e2e/kind/node" && tar -cf - --sort=name --mtime=@0 --owner=0 --group=0 \
            --mode='u+rw' Dockerfile files | sha256sum
    } | sha256sum | cut -d' ' -f1
)"
if [[ "$(image_label "$node_base")" != "$want" ]]; then
    log "docker build $node_base"
    : >"$work/build-node-base.log"
    docker_build "$work/build-node-base.log" --build-arg "ROOTFS=$rootfs" --label "$label=$want" \
        -t "$node_base" "$root/e2e/kind/node"
fi

# -- 4. the node image ---------------------------------------------------------------------------
want="$(
    {
        docker image inspect -f '{{.Id}}' "$node_base"
        for b in kubeadm kubelet kubectl; do sha256sum <"$k8s_bin/$b"; done
        for name in $(printf '%s\n' "${!local_tag[@]}" | sort); do
            echo "$name $(docker image inspect -f '{{.Id}}' "${local_tag[$name]}")"
        done
        sha256sum <"${BASH_SOURCE[0]}"
    } | sha256sum | cut -d' ' -f1
)"
if [[ "$(image_label "$tag")" == "$want" ]]; then
    docker image prune -f --filter label=io.odradek.local-build=1 >/dev/null
    echo "$tag"
    exit 0
fi

log "assembling $tag"
builder="odradek-kind-build-$$"
docker rm -f "$builder" >/dev/null 2>&1 || true
trap 'docker rm -f "$builder" >/dev/null 2>&1 || true' EXIT
docker run -d --name "$builder" --entrypoint sleep --security-opt seccomp=unconfined \
    "$node_base" infinity >/dev/null
in_node() { docker exec -i "$builder" "$@"; }
for b in kubeadm kubelet kubectl; do
    docker cp "$k8s_bin/$b" "$builder:/usr/bin/$b"
    in_node chown root:root "/usr/bin/$b"
    in_node chmod 0755 "/usr/bin/$b"
done
echo "$k8s_version" | in_node tee /kind/version >/dev/null

# containerd in the build container writes the images to /var/lib/containerd of the image: the
# content only (--no-unpack; kubelet's first use unpacks). Image GC never drops them: kind's
# kubelet configuration sets imageGCHighThresholdPercent to 100.
in_node bash -c 'nohup containerd >/var/log/containerd-build.log 2>&1 &'
for _ in $(seq 1 30); do
    in_node test -S /run/containerd/containerd.sock && in_node ctr version >/dev/null 2>&1 && break
    sleep 1
done
in_node ctr version >/dev/null || die "containerd did not start in the build container"
ctr_k8s=(ctr --namespace=k8s.io)
sources=()
for name in "${!local_tag[@]}"; do sources+=("${local_tag[$name]}"); done
docker save "${sources[@]}" |
    in_node "${ctr_k8s[@]}" images import --no-unpack --all-platforms - >/dev/null
# docker save names an image repo:tag, which containerd reads as docker.io/library/repo:tag.
for name in "${!local_tag[@]}"; do
    src="docker.io/library/${local_tag[$name]}"
    [[ "$src" == "$name" ]] && continue
    in_node "${ctr_k8s[@]}" images tag --force "$src" "$name" >/dev/null
    in_node "${ctr_k8s[@]}" images rm "$src" >/dev/null
done
imported="$(in_node "${ctr_k8s[@]}" images list -q | sort)"
for name in "${!local_tag[@]}"; do
    grep -qxF "$name" <<<"$imported" || die "$name is missing from the node's containerd"
done
in_node pkill containerd
for _ in $(seq 1 30); do in_node pgrep -x containerd >/dev/null || break; sleep 1; done
in_node rm -rf /run/containerd /var/log/containerd-build.log

docker commit \
    --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' \
    --change 'CMD []' \
    --change "LABEL $label=$want" \
    --change 'LABEL io.odradek.local-build=1' \
    "$builder" "$tag" >/dev/null
docker image prune -f --filter label=io.odradek.local-build=1 >/dev/null
log "$tag built; preloaded: $(tr '\n' ' ' <<<"$imported")"
echo "$tag"
