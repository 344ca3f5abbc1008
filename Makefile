# Ariane: the two commands a newcomer runs are `make run` and `make test`.
# Everything they need is installed here, into .venv, from the package registries.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.bench-installed

.PHONY: all run test lint typecheck imports unit e2e bench clean protos chart-metrics

all: test

$(STAMP): pyproject.toml
	@echo "==> creating $(VENV) and installing ariane[dev,clients,spark]"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,clients,spark]'
	touch $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples e2e
	$(BIN)/ruff format --check src tests bench examples e2e

typecheck: $(STAMP)
	$(BIN)/mypy

imports: $(STAMP)
	$(BIN)/lint-imports

# tests/ in PYTEST_WORKERS pytest-xdist workers (much of a test's time is spent waiting on the
# brokers and clients it starts, so more workers than the 2 cores pay, until the CPU is saturated:
# README: Tests), one test file per worker at a time (module-scoped clusters start once), the
# longest files first (tests/durations.py: by the seconds in tests/durations.json, overridden by
# what the last run recorded in .ariane/test-durations.json), so no long file starts last; then the
# `solo` tests, which assert wall-clock bounds, alone. Each run prints its 20 slowest tests.
# Toxiproxy for the chaos tests' partitions is built first (cached), outside the tests' time.
PYTEST_WORKERS ?= 3
unit: $(STAMP)
	bash e2e/chaos/toxiproxy.sh >/dev/null
	ARIANE_TEST_DURATIONS=.ariane/test-durations.json \
	  $(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder -m "not solo"
	$(BIN)/pytest -m solo

# A real Kubernetes control plane (e2e/testenv/build.sh: built with Go from the Go module proxy,
# cached under ~/.cache/ariane or $$TESTENV_CACHE; a cold build prints progress), then the tests
# that run against it. Without Go those tests are skipped, loudly. build-node.sh installs the
# Debian packages of the real test node (containerd, runc, CNI, buildah, ...) and builds kubelet,
# kube-proxy and CoreDNS; build-image.sh builds the image from the Dockerfile (cached by content);
# build-spark.sh the spark-operator and the Spark images of examples/spark (cached by content);
# build-k8s-sd.sh builds Prometheus with Kubernetes discovery (Debian's has none; cached).
e2e: $(STAMP)
	@if command -v go >/dev/null; then \
	  bash e2e/testenv/build.sh && bash e2e/testenv/build-node.sh && bash e2e/testenv/build-image.sh \
	  && bash e2e/testenv/build-spark.sh \
	  && sh tests/prometheus/build-k8s-sd.sh >/dev/null && TESTENV_REQUIRED=1 $(BIN)/pytest e2e; \
	else \
	  echo "WARNING: no Go toolchain: Kubernetes e2e tests skipped (README: Test environment)"; \
	  $(BIN)/pytest e2e; \
	fi

test: lint typecheck imports unit e2e

# The main job: NYC's 2013 flights through a local cluster and back (examples/flights).
run: $(STAMP)
	$(BIN)/python -m examples.flights.pipeline

# Long chaos runs (e2e/chaos): 100 overlapping faults (processes, Toxiproxy partitions, delay and
# loss, clock jumps, power loss on FUSE layers, bit flips and truncation of store files; niced)
# on a name server + master/slave group, SYNC_MASTER + SYNC_FLUSH (must lose
# nothing) then ASYNC_MASTER + ASYNC_FLUSH (reports what it lost); JSON reports and OpenChaos
# histories in e2e/chaos/results/. Toxiproxy is built once from the Go module proxy
# (e2e/chaos/toxiproxy.sh). `make test` runs short ones (tests/test_chaos.py).
.PHONY: chaos
chaos: $(STAMP)
	nice -n 10 $(BIN)/python -m e2e.chaos --faults 100 --seed 13 --out e2e/chaos/results/sync-master-sync-flush.json \
	  --history e2e/chaos/results/sync-master-sync-flush.history
	-nice -n 10 $(BIN)/python -m e2e.chaos --faults 100 --seed 13 --role ASYNC_MASTER --flush ASYNC_FLUSH \
	  --out e2e/chaos/results/async-master-async-flush.json \
	  --history e2e/chaos/results/async-master-async-flush.history

# Regenerate src/ariane/grpcwire/gen from src/ariane/grpcwire/protos (commit the result;
# tests/test_protos.py fails while the committed code is stale).
protos: $(STAMP)
	$(BIN)/python -m ariane.grpcwire.protogen

# Regenerate the chart's alert rules and Grafana dashboard (charts/ariane/files) from
# ariane.metrics.alerts and ariane.metrics.dashboard (tests/test_chart_metrics.py fails while stale).
chart-metrics: $(STAMP)
	$(BIN)/python -m ariane.metrics.chartgen charts/ariane/files

# The benchmarks' own tools on top of the dev install: the `bench` extra (py-spy, for the broker's
# flame graphs: `python -m bench.broker_cpu --py-spy .venv/bin/py-spy`).
.PHONY: bench-tools
bench-tools: $(BENCH_STAMP)
$(BENCH_STAMP): pyproject.toml $(STAMP)
	$(BIN)/pip install --quiet -e '.[bench]'
	touch $(BENCH_STAMP)

# Ariane vs Apache RocketMQ 5.5.1 (bench/peers/rocketmq: Java 17 + Maven Central on first use),
# official Python client and (java rows) the classic Java client, A/B/A/B; about 20 min when quiet
# before the java rows (bench/README.md); results in bench/results/compare-<stamp>.*
bench: $(BENCH_STAMP)
	$(BIN)/python -m bench.compare

.PHONY: bench-store
bench-store: $(STAMP)
	$(BIN)/python -m bench.store_append

clean:
	rm -rf $(VENV) .ariane

# The client benchmark (shipped in the package, ariane.benchmark): ariane.client (batched, one
# per call) vs the official Python client, 1 KiB messages, against a fresh `ariane dev` cluster;
# run from the repository root, so results go to bench/results/client-<date>.*
.PHONY: bench-client
bench-client: $(STAMP)
	$(BIN)/ariane bench produce
	$(BIN)/ariane bench consume
