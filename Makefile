# The README's two commands are `make run` (the main job on the embedded defaults) and
# `make test`. Both create the virtual environment in .venv and install the project first.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: install chromium postgresql test-services run test test-connect test-faults \
	test-first-lane test-second-lane test-own-stacks test-local test-quick lint broker spark-server \
	dev up bench clean

install: $(STAMP)

$(STAMP): pyproject.toml lakehouse_tools/jars.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' || \
		{ echo "Python 3.11 is required (found: $(PYTHON)); set PYTHON=/path/to/python3.11"; exit 1; }
	@command -v java >/dev/null || { echo "Java 17 is required by Spark: install a JDK 17"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	$(BIN)/lakehouse jars
	$(BIN)/lakehouse spark-archive
	touch $(STAMP)

# The UI test drives a headless Chromium: Debian's package where apt is, else Playwright's build.
chromium:
	if command -v apt-get >/dev/null; then \
		$(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	else \
		$(BIN)/playwright install chromium; \
	fi

# Dagster's production storage in the tests: Debian's PostgreSQL server, started by the tests
# themselves as a plain process (lakehouse_tools/postgres.py), not as a system service.
postgresql:
	$(SUDO) apt-get update -qq
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql

run: install
	$(BIN)/lakehouse demo

# The suite in two lanes on the two cores, chosen by markers (docs/testing.md). One: the tests
# that use the session's services (Spark Connect, the broker, PostgreSQL, the S3 endpoint).
# Beside it: the tests that start their own stack, then those marked local_spark once more on a
# local Spark application, then the tests of a system besides Spark and Kafka (`external`) with
# the ones that need no service. --output-sync prints each lane's output whole, once it ends.
NOT_OWN_STACK := not faults and not own_stack

test: install test-services
	$(MAKE) --no-print-directory --output-sync=target -j2 test-first-lane test-second-lane

test-first-lane: install
	$(BIN)/python -m pytest -m 'services and not external and $(NOT_OWN_STACK)'

test-second-lane: test-own-stacks
	$(MAKE) --no-print-directory test-local
	$(BIN)/python -m pytest -m '(external or not services) and $(NOT_OWN_STACK)'

# Before a commit: the tests that need no service (pure transforms, rules, declarations,
# definitions, sensors' decisions), in under a minute.
test-quick: install
	$(BIN)/python -m pytest -m 'not services and $(NOT_OWN_STACK)'

# Every test that is a client of the session's Spark Connect server.
test-connect: install
	$(BIN)/python -m pytest

test-own-stacks: install test-services
	$(BIN)/python -m pytest -m 'faults or own_stack'

# The production shape under killed processes (lakehouse_assets_tests/test_faults.py).
test-faults: install test-services
	$(BIN)/python -m pytest -m faults

test-local: install
	LAKEHOUSE_TEST_SPARK=local $(BIN)/python -m pytest -m local_spark

# What the tests need from the machine: Chromium (the UI tests) and PostgreSQL's server.
test-services:
	@command -v chromium >/dev/null || $(MAKE) --no-print-directory chromium
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || $(MAKE) --no-print-directory postgresql

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/pyright

broker: install
	$(BIN)/lakehouse broker

spark-server: install
	$(BIN)/lakehouse spark-server

dev: install
	mkdir -p .dagster && cp dagster.yaml .dagster/dagster.yaml
	DAGSTER_HOME=$(CURDIR)/.dagster $(BIN)/lakehouse dev

# The production shape: PostgreSQL, the broker, the Spark Connect server, dagster-daemon and
# dagster-webserver, each its own process (lakehouse_tools/stack.py); Ctrl-C stops it.
up: install
	$(BIN)/lakehouse up

bench: install
	$(BIN)/python benchmarks/bronze_ingest.py

clean:
	rm -rf $(VENV) lake .pytest_cache .ruff_cache
