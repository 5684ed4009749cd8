# Rancher's local-path-provisioner (the node's default StorageClass). Its helper pods, which make
# and remove the volume directories with sh, mkdir and rm, run this image too.
ARG BASE=odradek-net:bookworm
FROM ${BASE}
COPY local-path-provisioner /usr/local/bin/local-path-provisioner
ENTRYPOINT ["local-path-provisioner"]
