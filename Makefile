# FusionFleet: `make demo` runs the main job end to end on a local stack; `make test` runs every test.
# Both set up what they need: the project's virtual environment (Python >= 3.11) and LocalStack's
# own environment (Python 3.13, pinned; LocalStack's moto fork must not meet the real moto).

PYTHON ?= python3
PYTHON313 ?= python3.13
VENV := .venv
LSVENV := .venv-localstack
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: all setup venv localstack-env test lint unit e2e demo bench bench-quality bench-scale bench-sim chaos soak up down status clean

all: test

setup: venv localstack-env

venv: $(VENV)/.installed
$(VENV)/.installed: pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || \
		{ echo "FusionFleet needs Python >= 3.11 as '$(PYTHON)' (set PYTHON=/path/to/python3.11)"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

localstack-env: $(LSVENV)/.installed
$(LSVENV)/.installed: infra/localstack/requirements.txt
	@$(PYTHON313) -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 13) else 1)' 2>/dev/null || \
		{ echo "LocalStack 2026.3.0 needs Python 3.13 as '$(PYTHON313)' (install it, or set PYTHON313=/path/to/python3.13)"; exit 1; }
	test -x $(LSVENV)/bin/python || $(PYTHON313) -m venv $(LSVENV)
	$(LSVENV)/bin/python -m pip install --quiet -r infra/localstack/requirements.txt
	touch $@

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy fusionfleet fleetctl functions gpu_worker infra benchmarks tests scripts

unit: venv
	$(PY) -m pytest tests/unit tests/integration $(PYTEST_ARGS)

e2e: venv localstack-env
	$(PY) -m pytest tests/e2e $(PYTEST_ARGS)

test: venv localstack-env lint
	$(PY) -m pytest tests $(PYTEST_ARGS)

demo: venv localstack-env
	$(PY) scripts/demo.py

bench: venv localstack-env
	$(PY) -m benchmarks.pipeline

bench-quality: venv
	$(PY) -m benchmarks.quality

bench-scale: venv localstack-env
	$(PY) -m benchmarks.scaling

bench-sim: venv
	$(PY) -m benchmarks.fleetsim

up: venv localstack-env
	$(VENV)/bin/fusionfleet local up

down: venv
	$(VENV)/bin/fusionfleet local down

status: venv
	$(VENV)/bin/fusionfleet local status

clean: down
	rm -rf .fusionfleet .pytest_cache .mypy_cache .ruff_cache

chaos: venv localstack-env
	$(PY) -m benchmarks.chaos

soak: venv localstack-env
	$(PY) -m benchmarks.chaos --soak
