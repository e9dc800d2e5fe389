# Entry points. Everything runs from the project's own pinned .venv and node_modules.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
export PATH := $(CURDIR)/.venv/bin:$(CURDIR)/node_modules/.bin:$(PATH)
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export CDK_DISABLE_CLI_TELEMETRY := true
export CDK_DISABLE_VERSION_CHECK := true
export PYTHONUNBUFFERED := 1
# Offline: without credentials the CDK CLI would first probe the EC2 metadata service (~15 s).
export AWS_EC2_METADATA_DISABLED := true
# Setup installs without compiling bytecode (uv's default); let Python cache bytecode of what is actually imported.
export PYTHONDONTWRITEBYTECODE :=

# Configuration environment (an `environments:` key of project.yaml) and recovery mode for `make submit`.
ENV ?= default
MODE ?= inprocess-ft
DEMO_DIR ?= runs/demo
# pytest-xdist workers for `make test`: the integration tests partly wait on real timeouts and restarts. Two workers
# leave the 2-core machine about 22% idle (both run waiting files at once in the suite's second half). With three or
# more, the last worker takes the files that mostly wait first and the others the rest (tests/helpers/xdist_scopes.py):
# 375 s -> 313 s (78% -> 96% busy; recorded in f17df89, 2026-12-05). That load found two races in the product, each
# fixed with its own test: a hang's in-process restart lost inside NVRx's progress watchdog (6429743) and a SIGTERM
# that reached a worker's stand-in before the template named the worker (5864711); a plain third worker had failed a
# fault-matrix cell under load too (2026-12-04), which the split above prevents. Three is the default since df31418
# (2026-12-05); `make test TEST_WORKERS=2` is the earlier default. One file per worker at
# a time, except tests/unit/stacks and tests/integration/stacks, which share the session's syntheses: one unit
# (tests/helpers/stack_synth.py).
TEST_WORKERS ?= 3

.PHONY: setup synth demo test lint submit check-image lock-image preflight bench clean

setup:
	@scripts/setup.sh

synth: setup
	@scripts/synth.sh $(ENV)

demo: synth
	@echo "== demo 1/2: fault-injected training on local CPU workers -> $(DEMO_DIR) =="
	python -m training.local --run-dir $(DEMO_DIR) --env $(ENV) --fresh
	python -m training.telemetry.report $(DEMO_DIR)
	@echo "== demo 2/2: the training Job's manifests on a local cluster of 2 pods x 2 workers: a node lost, an exception =="
	python -m training.local --run-dir $(DEMO_DIR)-cluster --env $(ENV) --fresh --nodes 2 --nproc 2 --steps 80 \
	  --faults "node-loss@25:1,exception@55:2"
	python -m training.telemetry.report $(DEMO_DIR)-cluster

test: setup
	ruff check .
	ruff format --check .
	python -m pytest -n $(TEST_WORKERS) --dist loadfile

lint: setup
	ruff check .
	ruff format --check .

submit: setup
	@scripts/submit.sh $(ENV) $(MODE)

# The training image without Docker: is every locked wheel downloadable for its platform (CPython 3.12, glibc 2.39)?
# Needs https://pypi.org and ~2.6 GB of downloads into a temporary directory (73 wheels); not part of `make test`.
check-image: setup
	PIP_CONFIG_FILE=/dev/null python -m scripts.check_image --env $(ENV)

# Checks of the deployed platform before a training run (docs/deploy.md); skips cleanly without AWS or a cluster.
preflight: setup
	python -m scripts.preflight --env $(ENV)

# Re-resolve image/requirements.txt after changing image.* or the runtime pins (needs https://pypi.org).
lock-image: setup
	PIP_CONFIG_FILE=/dev/null python -m scripts.lock_image --env $(ENV)

clean:
	rm -rf cdk.out dist runs .pytest_cache .ruff_cache
