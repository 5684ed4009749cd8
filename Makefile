# Odradek — developer entry points. Everything installs from the project's own files;
# the venv and tool caches make a second run fast.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
DATA   ?= $(CURDIR)/data
PYTEST_ARGS ?=

.PHONY: install system-deps run test unit integration bench lint format clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip setuptools wheel
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

# Debian packages the test suite drives (kcat is one of the real clients under test), ZooKeeper
# and Apache Kafka's jars (its Java client and tools are clients under test too).
system-deps:
	@command -v kcat >/dev/null 2>&1 || { \
	  echo "installing kcat (apt)"; \
	  (apt-get update -qq || true) && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat >/dev/null; }
	bash scripts/install-zookeeper.sh >/dev/null
	bash scripts/install-kafka.sh >/dev/null

# One broker on 127.0.0.1:9092 with the embedded metadata store; data kept under ./data.
run: install
	$(VENV)/bin/odradek broker \
	  --override broker.id=0 \
	  --override listeners=PLAINTEXT://127.0.0.1:9092 \
	  --override log.dirs=$(DATA)/kafka-logs

# The whole suite, the operator's tests against a real kube-apiserver included (the Kubernetes
# tools and helm build once from the Go module proxy into ~/.cache/odradek; Docker comes from
# Debian and its daemon is started when it is not running).
test: install system-deps k8s-tools helm docker
	$(VENV)/bin/ruff check broker operator tests bench scripts
	ODRADEK_OPERATOR_TESTS=1 $(VENV)/bin/pytest $(PYTEST_ARGS)

unit: install
	$(VENV)/bin/pytest tests/unit $(PYTEST_ARGS)

integration: install system-deps
	$(VENV)/bin/pytest tests/integration $(PYTEST_ARGS)

bench: install system-deps
	PYTHONPATH=bench $(PY) bench/run.py

lint: install
	$(VENV)/bin/ruff check broker operator tests bench scripts
	$(VENV)/bin/ruff format --check broker operator tests bench scripts

format: install
	$(VENV)/bin/ruff format broker operator tests bench scripts
	$(VENV)/bin/ruff check --fix broker operator tests bench scripts

clean:
	rm -rf $(VENV) build dist *.egg-info $(DATA)

# Kubernetes control plane for the operator tests: etcd, kube-apiserver, kube-controller-manager
# and kubectl built once from the Go module proxy (cached under ~/.cache/odradek).
.PHONY: k8s-tools test-operator
k8s-tools:
	bash scripts/install-k8s-tools.sh

# Only the operator's tests (against a real API server and real brokers).
test-operator: install k8s-tools helm docker
	ODRADEK_OPERATOR_TESTS=1 $(VENV)/bin/pytest tests/operator $(PYTEST_ARGS)

# Helm, built once from the Go module proxy (cached under ~/.cache/odradek/tools).
.PHONY: helm docker image
helm:
	bash scripts/install-helm.sh >/dev/null

# Docker engine from Debian's docker.io, started when it is not running.
docker:
	bash scripts/install-docker.sh

# The image (broker and operator) from a locally made Debian base: no registry needed.
image: install docker
	bash scripts/build-image.sh
