# FusionFleet: `make demo` runs the main job end to end on a local stack; `make test` runs every test.
# Both set up what they need: the project's virtual environment (Python >= 3.11) and LocalStack's
# own environment (Python 3.13, pinned; LocalStack's moto fork must not meet the real moto).

PYTHON ?= python3
# Found by infra/python/find-python (PATH, then pyenv, then pyenv's versions folder) unless named.
PYTHON313 ?= $(shell sh infra/python/find-python 3.13 2>/dev/null || echo python3.13)
PYTHON312 ?=
VENV := .venv
LSVENV := .venv-localstack
FFVENV := .venv-facefusion
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

# Static checks of the AWS stage, each in a virtual environment of its own (their pins would fight the
# project's): checkov (tests/static/test_checkov.py) and the SAM CLI (`sam validate --lint`, `sam build`;
# tests/static/test_sam_cli.py). Both install from PyPI and run offline.
CHECKOV_VERSION := 3.3.30
SAM_CLI_VERSION := 1.170.0
CKVENV := .venv-checkov
SAMVENV := .venv-sam
# parliament audits every IAM policy against AWS's service authorization data (tests/static/test_iam_audit.py);
# its own environment too: it pulls the newest boto3, which the project pins.
PARLIAMENT_VERSION := 1.6.4
PLVENV := .venv-parliament
# The IAM judge's evaluator, @cloud-copilot/iam-simulate (npm; infra/iam/package-lock.json pins it and
# AWS's authorization data it carries): every AWS call the local stack makes in the e2e tests is evaluated
# against the template's roles (tests/support/iam/). Needs Node 20 or newer. The same package.json pins
# asl-validator, the ecosystem's Amazon States Language validator (tests/static/test_asl_validator.py).
IAMDIR := infra/iam

.PHONY: static integration all setup venv localstack-env checkov-env sam-env parliament-env iam-env iam-calls aws-checks aws-check facefusion-env test lint unit e2e e2e-long demo bench bench-quality bench-unseen bench-faces bench-scale bench-throughput bench-fleet bench-occupancy bench-sim simulate bench-integrations bench-try bench-recovery bench-batch bench-api-scale bench-parity device-check chaos soak up down status clean

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

checkov-env: $(CKVENV)/.installed-$(CHECKOV_VERSION)
$(CKVENV)/.installed-$(CHECKOV_VERSION):
	test -x $(CKVENV)/bin/python || $(PYTHON) -m venv $(CKVENV)
	$(CKVENV)/bin/python -m pip install --quiet "checkov==$(CHECKOV_VERSION)"
	touch $@

sam-env: $(SAMVENV)/.installed-$(SAM_CLI_VERSION)
$(SAMVENV)/.installed-$(SAM_CLI_VERSION):
	test -x $(SAMVENV)/bin/python || $(PYTHON) -m venv $(SAMVENV)
	$(SAMVENV)/bin/python -m pip install --quiet "aws-sam-cli==$(SAM_CLI_VERSION)"
	touch $@

parliament-env: $(PLVENV)/.installed-$(PARLIAMENT_VERSION)
$(PLVENV)/.installed-$(PARLIAMENT_VERSION):
	test -x $(PLVENV)/bin/python || $(PYTHON) -m venv $(PLVENV)
	$(PLVENV)/bin/python -m pip install --quiet "parliament==$(PARLIAMENT_VERSION)"
	touch $@

iam-env: $(IAMDIR)/node_modules/.installed
$(IAMDIR)/node_modules/.installed: $(IAMDIR)/package-lock.json
	@command -v node >/dev/null || { echo "the IAM judge needs Node 20 or newer (apt-get install nodejs npm)"; exit 1; }
	cd $(IAMDIR) && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $@

# A short scenario set on its own stack (submit, cancel, retry and a doomed job through the CLI and the
# tenant API, merges, the watchdog's sweeps), every call recorded and judged; prints `N calls, M denied` last.
IAM_CALLS_DIR ?= .fusionfleet/iam-calls
iam-calls: venv localstack-env iam-env
	rm -rf $(IAM_CALLS_DIR) && mkdir -p $(IAM_CALLS_DIR)
	FUSIONFLEET_IAM_RECORD_DIR=$(abspath $(IAM_CALLS_DIR)) FUSIONFLEET_IAM_SCENARIOS=all \
		$(PY) -m pytest tests/e2e/test_iam_calls.py -p no:randomly $(PYTEST_ARGS)
	$(PY) -m tests.support.iam.judge $(IAM_CALLS_DIR)

# Everything checked about the AWS stage without AWS: cfn-lint on the raw and the SAM-transformed
# template for both stages, checkov, sam validate --lint and sam build, IAM against the code and against
# AWS's service authorization data (parliament).
aws-checks: venv checkov-env sam-env parliament-env iam-env
	$(PY) -m pytest tests/static/test_template.py tests/static/test_iam.py tests/static/test_iam_audit.py tests/static/test_hardening.py \
		tests/static/test_state_machine.py tests/static/test_packages.py tests/static/test_checkov.py \
		tests/static/test_api_requests.py tests/static/test_asl_validator.py \
		tests/static/test_sam_cli.py tests/static/test_environment_contract.py $(PYTEST_ARGS)

# Stage=prod created, deleted and created again under the same name on LocalStack's CloudFormation (about a
# minute; `make test` runs it too, with tests/e2e). Prints the resource types LocalStack skipped for want of
# a provider, also written to .fusionfleet/aws-check/localstack-skipped.json.
aws-check: venv localstack-env
	$(PY) -m pytest tests/e2e/test_aws_stage_deploys.py -rP $(PYTEST_ARGS)

# FaceFusion's own dependencies, for the harness that runs the facefusion engine on FaceFusion 3.8.1's
# source (FUSIONFLEET_FACEFUSION_SOURCE, else ../shared/third_party/facefusion-3.8.1) with stand-in
# models; never in .venv. `make test` builds it, so CI runs FaceFusion's own code.
facefusion-env: $(FFVENV)/.installed
$(FFVENV)/.installed: infra/facefusion/requirements.txt
	@test -x $(FFVENV)/bin/python || { \
		python312='$(PYTHON312)'; python312="$${python312:-$$(sh infra/python/find-python 3.12)}" || exit 1; \
		"$$python312" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' 2>/dev/null || \
			{ echo "FaceFusion 3.8.1's pins (scipy 1.18) need Python >= 3.12 as '$$python312' (set PYTHON312=/path/to/python3.12)"; exit 1; }; \
		echo "$$python312 -m venv $(FFVENV)"; "$$python312" -m venv $(FFVENV); }
	$(FFVENV)/bin/python -m pip install --quiet -r infra/facefusion/requirements.txt
	$(FFVENV)/bin/python -m pip check
	touch $@

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy fusionfleet fleetctl functions gpu_worker infra benchmarks tests scripts

# The tiers alone (each test carries its tier's marker: static, unit, integration, e2e; tests/conftest.py).
static: venv checkov-env sam-env parliament-env iam-env
	$(PY) -m pytest tests/static $(PYTEST_ARGS)

unit: venv
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

integration: venv iam-env
	$(PY) -m pytest tests/integration $(PYTEST_ARGS)

e2e: venv localstack-env iam-env
	$(PY) -m pytest tests/e2e $(PYTEST_ARGS)

# The suite's files side by side in TEST_PROCESSES processes (pytest-xdist; a file stays in one process, so
# its tests keep their order): an end-to-end test mostly waits on its stack, and each process starts its own
# local stack on its own ports. TEST_PROCESSES=0 runs everything in this one process.
TEST_PROCESSES ?= 3
test: venv localstack-env checkov-env sam-env parliament-env facefusion-env iam-env lint
	$(PY) -m pytest tests -m "not long" $(if $(filter-out 0,$(TEST_PROCESSES)),-n $(TEST_PROCESSES) --dist loadfile) $(PYTEST_ARGS)

# End-to-end tests of minutes each (a poison segment behind a backlog, segments waiting over two minutes):
# `make test` runs a shorter test of each property; these run the long form.
e2e-long: venv localstack-env iam-env
	$(PY) -m pytest tests/e2e -m long $(PYTEST_ARGS)

demo: venv localstack-env
	$(PY) scripts/demo.py

bench: venv localstack-env
	$(PY) -m benchmarks.pipeline

bench-quality: venv
	$(PY) -m benchmarks.quality

# The built-in engine on real photos of people it was never tuned on, alone (part of bench-quality too).
bench-unseen: venv
	$(PY) -m benchmarks.unseen_people

bench-faces: venv localstack-env
	$(PY) -m benchmarks.face_mapping

bench-scale: venv localstack-env
	$(PY) -m benchmarks.scaling

# The orchestration's own throughput: 16 and 32 workers with a sleep engine (benchmarks/throughput.py).
bench-throughput: venv localstack-env
	$(PY) -m benchmarks.throughput

# The farm's own overhead: a sleep engine at 1, 6 and 12 workers, end to end (benchmarks/fleet_overhead.py).
bench-fleet: venv localstack-env
	$(PY) -m benchmarks.fleet_overhead

# Does the engine wait? One worker, the sleep engine, 320×180 to 2160p (benchmarks/occupancy.py).
bench-occupancy: venv localstack-env
	$(PY) -m benchmarks.occupancy

# On a GPU machine: onnxruntime's CUDA provider, NVENC, NVDEC and the warm engine, no model downloaded
# (scripts/device_check.py; says what it skipped elsewhere). Under five minutes.
device-check: venv
	$(PY) scripts/device_check.py $(DEVICE_CHECK_ARGS)

bench-sim: venv
	$(PY) -m benchmarks.fleetsim

# The protocol's deterministic simulation (issue 43; docs/simulation.md): N schedules of the real slicer,
# admitter, CLI readers and render workers' message handling on simulated AWS; SEED=… replays a run. Its last line (JSON) is also written to
# benchmarks/results/simulate.json.
N ?= 1000
simulate: venv
	$(PY) -m tests.simulation -n $(N) $(if $(SEED),--seed $(SEED))

# Issue 34's goals on a local stack of its own: signed webhooks through a failing receiver, a one-job
# tenant, budgets on one and two workers, the true cost of a job (benchmarks/integrations.py).
bench-integrations: venv localstack-env
	$(PY) -m benchmarks.integrations

# A test render of 3 frames of a 30-minute clip on a warm local worker, under 30 s (benchmarks/trial.py).
bench-try: venv localstack-env
	$(PY) -m benchmarks.trial

# Kill → a segment running again, SIGTERM → a worker drained, on the local stack (benchmarks/recovery.py).
bench-recovery: venv localstack-env
	$(PY) -m benchmarks.recovery

# One face onto 50 targets as one batch, 6 workers, a sleep engine, a worker killed (benchmarks/batch.py).
bench-batch: venv localstack-env
	$(PY) -m benchmarks.batch

# The tenant API at scale (benchmarks/api_scale.py): GET /jobs of 500 jobs, the detail of a 2,000-segment
# job, on LocalStack; a few minutes on 2 cores (most of it writing the farm's records).
bench-api-scale: venv localstack-env
	$(PY) -m benchmarks.api_scale
# FaceFusion's own run against the farm's, case by case (benchmarks/parity_matrix.py): about an hour on 2 cores.
bench-parity: venv localstack-env facefusion-env
	$(PY) -m benchmarks.parity_matrix

up: venv localstack-env
	$(VENV)/bin/fusionfleet local up

down: venv
	$(VENV)/bin/fusionfleet local down

status: venv
	$(VENV)/bin/fusionfleet local status

clean: down
	rm -rf .fusionfleet .pytest_cache .mypy_cache .ruff_cache .aws-sam

chaos: venv localstack-env
	$(PY) -m benchmarks.chaos

soak: venv localstack-env
	$(PY) -m benchmarks.chaos --soak
