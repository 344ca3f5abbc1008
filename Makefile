# Ariane: the two commands a newcomer runs are `make run` and `make test`.
# Everything they need is installed here, into .venv, from the package registries.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: all run test lint typecheck imports unit bench clean protos

all: test

$(STAMP): pyproject.toml
	@echo "==> creating $(VENV) and installing ariane[dev,clients]"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,clients]'
	touch $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples
	$(BIN)/ruff format --check src tests bench examples

typecheck: $(STAMP)
	$(BIN)/mypy

imports: $(STAMP)
	$(BIN)/lint-imports

unit: $(STAMP)
	$(BIN)/pytest

test: lint typecheck imports unit

run: $(STAMP)
	$(BIN)/ariane run-example

# Regenerate src/ariane/remoting/gen from src/ariane/remoting/protos (commit the result;
# tests/test_protos.py fails while the committed code is stale).
protos: $(STAMP)
	$(BIN)/python -m ariane.remoting.protogen

bench: $(STAMP)
	$(BIN)/python -m bench.store_append

clean:
	rm -rf $(VENV) .ariane
