# odradek-kind-static: the root of the Kubernetes component images that need nothing but their
# static Go binary (kube-apiserver, kube-controller-manager, kube-scheduler, etcd, CoreDNS).
FROM scratch
COPY passwd group /etc/
# Go's os.TempDir; the processes run as root, so the directory's mode does not matter.
WORKDIR /tmp
WORKDIR /
