# kube-proxy with the iptables tools it runs (Debian's iptables and conntrack on odradek-net).
# /usr/local/bin/kube-proxy picks the node's iptables backend before it starts the binary.
ARG BASE=odradek-net:bookworm
FROM ${BASE}
COPY kube-proxy /usr/local/libexec/kube-proxy
COPY kube-proxy-start /usr/local/bin/kube-proxy
