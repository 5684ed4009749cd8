# One image for the Odradek broker and the Odradek operator.
#
#   docker build -t odradek .                                   # public base, wheels from PyPI
#   scripts/build-image.sh                                      # local base, offline (see below)
#
# Running it:
#   broker    docker run -p 9092:9092 odradek broker --override broker.id=0 \
#                 --override listeners=PLAINTEXT://:9092 \
#                 --override advertised.listeners=PLAINTEXT://localhost:9092
#             (the default command is `broker` with log.dirs under /var/lib/odradek)
#   operator  docker run --entrypoint odradek-operator odradek [--help]
#   Kubernetes: the broker container sets `args: [broker, --config, ...]` (or `--override ...`);
#   the operator container sets `command: [odradek-operator]` and its own args. Both executables
#   are on PATH (/opt/odradek/bin).
#
# The process runs as uid/gid 1000 (`odradek`), numerically so that runAsNonRoot can check it; its
# home and data directory /var/lib/odradek is where a volume (PVC) belongs. The broker handles
# SIGTERM itself (controlled shutdown, exit 0), so it runs as PID 1 without an init.
#
# BASE_IMAGE is any Debian-like image with `python3` (>= 3.11, with the venv module) on PATH: the
# public python:3.11-slim-bookworm (/usr/local/bin/python3) by default; scripts/build-image.sh passes
# odradek-base:bookworm, made locally by scripts/build-base-image.sh (Debian's /usr/bin/python3).
#
# The build context decides where packages come from:
#   - the repository (a plain `docker build .`): the dependencies listed in pyproject.toml and then
#     the project itself are installed from PyPI inside the build;
#   - a directory made by scripts/build-image.sh: pyproject.toml, `wheels/` with every dependency's
#     wheel and `dist/` with the odradek wheel, all built on the host (with its pip cache):
#     installed with --no-index, so the build needs no network at all.
# Either way the dependencies form their own layer, so a change to the sources alone reinstalls
# only odradek.
ARG BASE_IMAGE=python:3.11-slim-bookworm

FROM ${BASE_IMAGE} AS build
# The venv's interpreter links to the base image's python3; the runtime stage below starts from
# the same base, so the link holds there too.
RUN python3 -m venv /opt/odradek
# `wheel[s]` matches nothing in the repository, and the wheels directory in a prepared context.
COPY pyproject.toml wheel[s] /src/deps/
RUN set -eu; \
    python3 -c 'import sys, tomllib; \
print("\n".join(tomllib.load(open(sys.argv[1], "rb"))["project"]["dependencies"]))' \
        /src/deps/pyproject.toml >/src/deps/requirements.txt; \
    if ls /src/deps/*.whl >/dev/null 2>&1; then \
        /opt/odradek/bin/pip install --no-cache-dir --no-index --find-links /src/deps \
            -r /src/deps/requirements.txt; \
    else \
        /opt/odradek/bin/pip install --no-cache-dir -r /src/deps/requirements.txt; \
    fi
COPY . /src/project
RUN set -eu; \
    if [ -d /src/project/dist ]; then \
        /opt/odradek/bin/pip install --no-cache-dir --no-index --no-deps /src/project/dist/odradek-*.whl; \
    else \
        /opt/odradek/bin/pip install --no-cache-dir --no-deps /src/project; \
    fi; \
    /opt/odradek/bin/pip check; \
    # Fail the build, not the first pod, when an entry point cannot import.
    /opt/odradek/bin/odradek --help >/dev/null; \
    /opt/odradek/bin/odradek-operator --help >/dev/null

FROM ${BASE_IMAGE}
# A plain passwd/group entry instead of useradd: minimal bases may lack the passwd package.
RUN set -eu; \
    if ! getent passwd 1000 >/dev/null; then \
        echo 'odradek:x:1000:1000:Odradek:/var/lib/odradek:/usr/sbin/nologin' >>/etc/passwd; \
        echo 'odradek:x:1000:' >>/etc/group; \
    fi; \
    mkdir -p /var/lib/odradek; \
    chown 1000:1000 /var/lib/odradek; \
    chmod 0750 /var/lib/odradek
COPY --from=build /opt/odradek /opt/odradek
ENV PATH=/opt/odradek/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8 \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/var/lib/odradek
USER 1000:1000
WORKDIR /var/lib/odradek
EXPOSE 9092
ENTRYPOINT ["odradek"]
CMD ["broker", "--override", "log.dirs=/var/lib/odradek/kafka-logs"]
