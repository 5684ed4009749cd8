#!/usr/bin/env bash
# Build a Debian bookworm base image locally, for machines where no image can be pulled: mmdebstrap
# makes a root filesystem tarball, `docker import` turns it into an image.
#
#   build-base-image.sh [python|jre|net|kindnode]
#     python (default)  odradek-base:bookworm  python3, python3-venv: the Odradek image's BASE_IMAGE
#     jre               odradek-jre:bookworm   a Java runtime, for the local ZooKeeper image
#     net               odradek-net:bookworm   iptables and conntrack: kube-proxy and the storage
#                                              provisioner of the e2e kind node (scripts/build-kind-images.sh)
#     kindnode          odradek-kindnode-rootfs:bookworm  systemd, containerd, runc, CNI plugins:
#                                              what e2e/kind/node/Dockerfile makes a kind node of
#
# Cached twice over: the tarball under $ODRADEK_CACHE/images/ is named by the hash of its recipe
# (suite, mirror, packages), and the image carries that hash as a label. A second run with an
# unchanged recipe finds the labelled image and only prints its tag; with the image gone (a fresh
# docker) it imports the cached tarball again without downloading anything.
#
#   ODRADEK_CACHE   cache directory (default: $HOME/.cache/odradek)
#   DEBIAN_MIRROR   (default: http://deb.debian.org/debian)
#
# Prints the image tag on stdout; progress goes to stderr. Needs root (mmdebstrap's root mode,
# apt-get when mmdebstrap is missing) and a working docker (scripts/install-docker.sh).
set -euo pipefail

flavour="${1:-python}"
cache="${ODRADEK_CACHE:-${HOME}/.cache/odradek}"
images="$cache/images"
suite=bookworm
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"

# Every package is from Debian main. ca-certificates for TLS to brokers and the Kubernetes API;
# tini as an optional init (`--init`-like) for whoever wants one; the rest is what each image runs.
extra_hook=""
case "$flavour" in
python)
    tag="odradek-base:$suite"
    packages="ca-certificates,tini,python3,python3-venv"
    ;;
jre)
    tag="odradek-jre:$suite"
    packages="ca-certificates,tini,openjdk-17-jre-headless"
    # openjdk's postinst registers man pages with update-alternatives, which fails when
    # /usr/share/man/man1 is missing (the dpkg filter below leaves it out).
    extra_hook='mkdir -p "$1/usr/share/man/man1"'
    ;;
net)
    tag="odradek-net:$suite"
    packages="ca-certificates,iptables,conntrack"
    ;;
kindnode)
    # What a kind node runs: systemd as PID 1, containerd and runc (the CRI), the reference CNI
    # plugins, and the tools kubelet, kubeadm, kube-proxy and kind call inside the node.
    tag="odradek-kindnode-rootfs:$suite"
    packages="ca-certificates,systemd,systemd-sysv,dbus,containerd,runc,containernetworking-plugins"
    packages+=",iptables,nftables,conntrack,iproute2,ethtool,util-linux,mount,kmod,libseccomp2"
    packages+=",bash,jq,procps,pigz,socat,ebtables"
    ;;
*)
    echo "usage: $0 [python|jre|net|kindnode]" >&2
    exit 2
    ;;
esac

# The recipe: everything that changes the tarball's content. Bump `rev` when the mmdebstrap command
# line below changes in a way the other fields do not show.
rev=1
recipe="rev=$rev suite=$suite mirror=$mirror variant=minbase packages=$packages"
[[ -z "$extra_hook" ]] || recipe+=" hook=$extra_hook"
hash="$(printf '%s' "$recipe" | sha256sum | cut -c1-16)"
label=io.odradek.base.recipe
tarball="$images/${tag%%:*}-$suite-$hash.tar"

# One builder at a time per image (parallel sessions share the cache and the daemon).
mkdir -p "$images"
exec 9>"$images/.${tag%%:*}.lock"
flock 9

current="$(docker image inspect -f "{{index .Config.Labels \"$label\"}}" "$tag" 2>/dev/null || true)"
if [[ "$current" == "$hash" ]]; then
    echo "$tag"
    exit 0
fi

if [[ ! -s "$tarball" ]]; then
    if ! command -v mmdebstrap >/dev/null; then
        echo "build-base-image: installing mmdebstrap (apt)" >&2
        (apt-get update -qq || true) >/dev/null 2>&1
        mkdir -p "$images"
        if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mmdebstrap \
            >"$images/apt-mmdebstrap.log" 2>&1; then
            tail -n 20 "$images/apt-mmdebstrap.log" >&2
            echo "build-base-image: apt-get install mmdebstrap failed" >&2
            exit 1
        fi
    fi
    mkdir -p "$images"
    echo "build-base-image: mmdebstrap $suite ($packages) into $tarball" >&2
    partial="$tarball.partial"
    rm -f "$partial"
    # minbase: only Essential packages and apt, plus ours. The hooks keep the image small and
    # free of state that belongs to the build machine: apt lists and archives, docs, man pages.
    # The Debian security suite is included so the base is patched as of the build.
    hooks=()
    [[ -z "$extra_hook" ]] || hooks=(--essential-hook="$extra_hook")
    # Its output goes to a log, shown when it fails (apt's and dpkg's errors are in there).
    mmdebstrap_log="$images/mmdebstrap-${tag%%:*}.log"
    if ! mmdebstrap --variant=minbase --mode=root --format=tar \
        --include="$packages" \
        --dpkgopt='path-exclude=/usr/share/man/*' \
        --dpkgopt='path-exclude=/usr/share/doc/*' \
        --dpkgopt='path-include=/usr/share/doc/*/copyright' \
        --dpkgopt='path-exclude=/usr/share/locale/*' \
        "${hooks[@]}" \
        --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
        --customize-hook='rm -f "$1"/etc/hostname "$1"/etc/resolv.conf' \
        "$suite" "$partial" \
        "deb $mirror $suite main" \
        "deb $mirror $suite-updates main" \
        "deb ${mirror%/debian}/debian-security $suite-security main" >"$mmdebstrap_log" 2>&1; then
        tail -n 40 "$mmdebstrap_log" >&2
        echo "build-base-image: mmdebstrap failed; full log in $mmdebstrap_log" >&2
        rm -f "$partial"
        exit 1
    fi
    mv "$partial" "$tarball"
    # Tarballs of older recipes of this image are never used again.
    find "$images" -maxdepth 1 -name "${tag%%:*}-$suite-*.tar" ! -path "$tarball" -delete
fi

echo "build-base-image: docker import $tarball as $tag" >&2
docker import \
    --change "LABEL $label=$hash" \
    --change 'ENV LANG=C.UTF-8' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["/bin/bash"]' \
    "$tarball" "$tag" >/dev/null
echo "$tag"
