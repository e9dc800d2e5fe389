#!/usr/bin/env bash
# Idempotent project setup: .venv (Python 3.11) from the pinned requirements, then `npm ci`.
# pip runs with --no-compile: bytecode of what is imported is cached on first use (the Makefile allows it).
# Re-running is cheap: a stamp file records the hash of every pin file, and nothing is
# reinstalled while the pins are unchanged.
set -euo pipefail
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 PYTHONWARNINGS="ignore::FutureWarning"
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
STAMP=.setup-stamp
want=$(cat requirements.txt requirements-dev.txt package.json package-lock.json | sha256sum | cut -d' ' -f1)

if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$want" && -x .venv/bin/python && -d node_modules ]]; then
  echo "[setup] pins unchanged; .venv and node_modules are up to date"
  exit 0
fi

start=$(date +%s)
if [[ ! -x .venv/bin/python ]]; then
  echo "[setup] 1/3 creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
else
  echo "[setup] 1/3 reusing .venv ($(.venv/bin/python --version))"
fi
echo "[setup] 2/3 pip install -r requirements.txt -r requirements-dev.txt (torch 2.13.0 CPU from the machine's local wheel)"
.venv/bin/python -m pip install --disable-pip-version-check --progress-bar off --no-compile \
  -r requirements.txt -r requirements-dev.txt 2>&1 \
  | grep -v -E "^WARNING: Location '.*' is ignored" \
  | grep -E "^(Collecting|Successfully|ERROR|error)" | sed 's/^/[setup]   /' || true
.venv/bin/python -c "import torch, aws_cdk, cdk8s, nvidia_resiliency_ext" \
  || { echo "[setup] ERROR: Python packages failed to import after install" >&2; exit 1; }
echo "[setup] 3/3 npm ci (aws-cdk and cdk8s-cli CLIs, pinned in package-lock.json)"
npm ci --no-audit --no-fund --loglevel=error
echo "$want" > "$STAMP"
echo "[setup] done in $(( $(date +%s) - start )) s"
