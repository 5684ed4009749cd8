# Odradek — developer entry points (`make help` lists them). Everything installs from the
# project's own files; the venv and tool caches make a second run fast.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
DATA   ?= $(CURDIR)/data
PORT   ?= 9092
PYTEST_ARGS ?=

.DEFAULT_GOAL := help
.PHONY: help install system-deps run test unit integration bench bench-quick bench-deps lint format clean

help: ## list the targets
	@awk 'BEGIN { FS = ":[^#]*## " } /^[a-zA-Z0-9_-]+:[^#]*## / { printf "  make %-15s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

# The test and bench extras in one pip call, and no module compiled up front (PySpark alone is
# 470 MB; Python compiles what is imported, once): 20 s instead of 40 in a fresh clone with
# pip's cache warm. Quiet unless something is wrong: pip at -q, and setuptools' note that every
# editable install gets (about folders named like the package, which this repository does not
# have) filtered out.
$(STAMP): pyproject.toml setup.py broker/records/_keyindex.c
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { \
	  echo "make: Odradek needs Python 3.11 or newer, and $(PYTHON) is $$($(PYTHON) -V 2>/dev/null || echo 'not found') (choose another with make PYTHON=python3.11 ...)" >&2; exit 1; }
	@test -x $(PY) || $(PYTHON) -c 'import ensurepip' 2>/dev/null || { \
	  echo "make: $(PYTHON) cannot create a virtualenv, its venv module has no ensurepip (Debian and Ubuntu: apt-get install python3-venv)" >&2; exit 1; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || { rm -rf $(VENV); exit 1; }
	@command -v cc >/dev/null 2>&1 && $(PYTHON) -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' || \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    echo "installing gcc and python3-dev (apt) for the log cleaner's C loop"; \
	    (apt-get update -qq || true) && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc python3-dev >/dev/null || true; \
	  else echo "make: no C compiler or no Python headers: the log cleaner's map pass will run in Python alone" >&2; fi
	@echo "Installing Odradek and its test and bench dependencies into $(VENV)"
	@PYTHONWARNINGS="ignore:Editable installation" $(PY) -m pip install -q --disable-pip-version-check --upgrade pip setuptools wheel
	@PYTHONWARNINGS="ignore:Editable installation" $(PY) -m pip install -q --disable-pip-version-check --no-compile -e '.[test,bench]'
	@touch $(STAMP)

install: $(STAMP) ## create .venv and install Odradek into it (again when pyproject.toml, setup.py or the C source change)
	@:

# Debian packages the test suite drives (kcat is one of the real clients under test; ip puts the
# README test in a network namespace of its own; mkfs.ext4 formats the disk the log dir failure
# test breaks), ZooKeeper and Apache Kafka's jars (its Java client and tools are clients under
# test too).
system-deps: install spark-connector ## kcat, ip and mkfs.ext4 (apt), ZooKeeper, Kafka's and Spark's connector jars (Maven Central)
	@missing=""; \
	command -v kcat >/dev/null 2>&1 || missing="$$missing kcat"; \
	command -v ip >/dev/null 2>&1 || missing="$$missing iproute2"; \
	command -v mkfs.ext4 >/dev/null 2>&1 || missing="$$missing e2fsprogs"; \
	if [ -n "$$missing" ]; then \
	  echo "installing$$missing (apt)"; \
	  (apt-get update -qq || true) && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; fi
	@bash scripts/install-zookeeper.sh >/dev/null
	@bash scripts/install-kafka.sh >/dev/null

# One broker on 127.0.0.1:$(PORT) with the embedded metadata store; data kept under $(DATA).
run: install ## start one broker on 127.0.0.1:9092 (PORT=, DATA= to change), data in ./data
	@echo "Starting one broker on 127.0.0.1:$(PORT), data in $(DATA)/kafka-logs; Ctrl-C stops it."
	@echo "To use the odradek command in another terminal:  . $(abspath $(VENV))/bin/activate"
	@exec $(VENV)/bin/odradek broker \
	  --override broker.id=0 \
	  --override listeners=PLAINTEXT://127.0.0.1:$(PORT) \
	  --override log.dirs=$(DATA)/kafka-logs

# The whole suite, the operator's tests against a real kube-apiserver included (the Kubernetes
# tools and helm build once from the Go module proxy into ~/.cache/odradek; Docker comes from
# Debian and its daemon is started when it is not running).
test: install system-deps chaos-deps k8s-tools helm docker ## ruff and every test (installs what they need first)
	$(VENV)/bin/ruff check broker operator tests bench scripts pipelines
	ODRADEK_OPERATOR_TESTS=1 $(VENV)/bin/pytest $(PYTEST_ARGS)

unit: install ## the unit tests only
	$(VENV)/bin/pytest tests/unit $(PYTEST_ARGS)

integration: install system-deps ## the integration tests only (real brokers and clients)
	$(VENV)/bin/pytest tests/integration $(PYTEST_ARGS)

# matplotlib (the chart) comes with the `bench` extra; BENCH_ARGS passes options to bench/run.py
# (`make bench BENCH_ARGS="--only cluster --repeats 3"`; `bench/run.py --list` names them).
BENCH_ARGS ?=
bench-deps: install system-deps ## what make bench needs: the system deps and matplotlib (the bench extra)
	@$(PY) -c 'import matplotlib' 2>/dev/null || PYTHONWARNINGS="ignore:Editable installation" $(PY) -m pip install -q --disable-pip-version-check --no-compile -e '.[test,bench]'

bench: bench-deps ## Odradek and Apache Kafka side by side, every scenario, 5 repeats (bench/README.md)
	$(PY) bench/run.py $(BENCH_ARGS)

bench-quick: bench-deps ## a smoke run of the benchmarks: every scenario but Spark, small, once
	$(PY) bench/run.py --quick $(BENCH_ARGS)

lint: install ## ruff check and ruff format --check
	$(VENV)/bin/ruff check broker operator tests bench scripts pipelines
	$(VENV)/bin/ruff format --check broker operator tests bench scripts pipelines

format: install ## ruff format and ruff check --fix
	$(VENV)/bin/ruff format broker operator tests bench scripts pipelines
	$(VENV)/bin/ruff check --fix broker operator tests bench scripts pipelines

clean: ## remove .venv, build output and ./data
	rm -rf $(VENV) build dist *.egg-info $(DATA)

# Kubernetes control plane for the operator tests: etcd, kube-apiserver, kube-controller-manager
# and kubectl built once from the Go module proxy (cached under ~/.cache/odradek).
.PHONY: k8s-tools test-operator
k8s-tools: ## etcd, kube-apiserver, kube-controller-manager, kubectl (Go module proxy)
	bash scripts/install-k8s-tools.sh

# Only the operator's tests (against a real API server and real brokers).
test-operator: install k8s-tools helm docker ## the operator's tests against a real API server
	ODRADEK_OPERATOR_TESTS=1 $(VENV)/bin/pytest tests/operator $(PYTEST_ARGS)

# Helm, built once from the Go module proxy (cached under ~/.cache/odradek/tools).
.PHONY: helm docker image
helm: ## helm, built from the Go module proxy
	bash scripts/install-helm.sh >/dev/null

# Docker engine from Debian's docker.io, started when it is not running.
docker: ## Docker from Debian's docker.io, its daemon started
	bash scripts/install-docker.sh

# The image (broker and operator) from a locally made Debian base: no registry needed.
image: install docker ## the odradek:dev image from a locally made Debian base
	bash scripts/build-image.sh

# -- e2e on kind ----------------------------------------------------------------------------------
# The whole user path on a one-node kind cluster (scripts/e2e.sh): tools and the node image built
# here when kind, helm and kubectl are not on PATH (cached under ~/.cache/odradek), the project's
# images loaded with `kind load docker-image`, the pytest suite in e2e/, the cluster deleted.
#   E2E_MODE=stock|build  E2E_NODE_IMAGE=...  E2E_KEEP_CLUSTER=1  E2E_PYTEST_ARGS='-k scaling'
.PHONY: e2e kind-node-image
e2e: install ## the whole user path on a one-node kind cluster (README: e2e on kind)
	bash scripts/e2e.sh

# The kind node image alone (odradek-kind-node:<kubernetes version>).
kind-node-image: ## the kind node image odradek-kind-node, built here (no registry needed)
	bash scripts/build-kind-node-image.sh

# Spark pipelines: the jars of Spark's Kafka connector, resolved once from Maven Central into
# ~/.cache/odradek (PySpark itself comes from the `spark` extra of pyproject.toml).
.PHONY: spark-connector
spark-connector: ## the jars of Spark's Kafka connector (Maven Central, cached)
	@bash scripts/install-spark-connector.sh >/dev/null

# The Jepsen-style fault suite (tests/chaos): every schedule against a fresh three-broker,
# three-ZooKeeper cluster in network namespaces, each for CHAOS_DURATION seconds of faults, then
# the checker. `make chaos SEED=... SCHEDULE=...` replays one run; `--list` in
# tests/chaos/runner.py names the schedules. Logs and histories go to build/chaos/.
.PHONY: chaos chaos-deps
SEED ?=
SCHEDULE ?= all
CHAOS_DURATION ?= 60
chaos-deps: ## Debian packages of the chaos suite (iproute2, iptables, util-linux, gcc)
	bash scripts/install-chaos-deps.sh

chaos: install system-deps chaos-deps ## the Jepsen-style fault suite (root; SEED=, SCHEDULE= replay one run)
	$(PY) tests/chaos/runner.py --schedule $(SCHEDULE) --duration $(CHAOS_DURATION) $(if $(SEED),--seed $(SEED))
