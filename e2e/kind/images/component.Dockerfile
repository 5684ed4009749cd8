# One Kubernetes component on odradek-kind-static (or another BASE): its binary on PATH, as the
# manifests kubeadm writes call it (`command: [kube-apiserver, ...]`, `etcd ...`).
ARG BASE=odradek-kind-static:1
FROM ${BASE}
ARG BINARY
COPY ${BINARY} /usr/local/bin/${BINARY}
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
