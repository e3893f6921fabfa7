# The README's two commands are `make run` (the main job on the embedded defaults) and
# `make test`. Both create the virtual environment in .venv and install the project first.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install run test lint broker dev bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' || \
		{ echo "Python 3.11 is required (found: $(PYTHON)); set PYTHON=/path/to/python3.11"; exit 1; }
	@command -v java >/dev/null || { echo "Java 17 is required by Spark: install a JDK 17"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: install
	$(BIN)/lakehouse demo

test: install
	$(BIN)/python -m pytest

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/pyright

broker: install
	$(BIN)/lakehouse broker

dev: install
	mkdir -p .dagster && cp dagster.yaml .dagster/dagster.yaml
	DAGSTER_HOME=$(CURDIR)/.dagster $(BIN)/dagster dev -w workspace.yaml

bench: install
	$(BIN)/python benchmarks/bronze_ingest.py

clean:
	rm -rf $(VENV) lake .pytest_cache .ruff_cache
