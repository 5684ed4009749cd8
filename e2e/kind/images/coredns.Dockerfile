# CoreDNS for the cluster DNS addon kubeadm installs (its Deployment gives only args: -conf ...).
# It runs as root: kubeadm's pod spec adds NET_BIND_SERVICE for port 53, which only root gets.
ARG BASE=odradek-kind-static:1
FROM ${BASE}
COPY coredns /coredns
EXPOSE 53 53/udp
ENTRYPOINT ["/coredns"]
