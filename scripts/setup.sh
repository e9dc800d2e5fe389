#!/usr/bin/env bash
# Idempotent project setup: .venv (Python 3.11) from the pinned requirements, with `npm ci` alongside.
# pip installs only uv (pinned in requirements-setup.txt); uv installs the rest: 8 s where pip took 51 s on a
# fresh 2-core machine (docs/benchmarks.md). Neither compiles bytecode: scripts/warm_bytecode.py writes that of what
# the suite imports, and the rest is cached on first use (the Makefile allows it). uv does not read pip's
# configuration, so the find-links of pip's (where a machine keeps torch's CPU wheel) are passed on to it.
# Re-running is cheap: a stamp file records the hash of every pin file, and nothing is
# reinstalled while the pins are unchanged.
set -euo pipefail
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 PYTHONWARNINGS="ignore::FutureWarning"
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
STAMP=.setup-stamp
PINS=(requirements-setup.txt requirements.txt requirements-dev.txt package.json package-lock.json)
want=$(cat "${PINS[@]}" | sha256sum | cut -d' ' -f1)

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

echo "[setup] 2/3 npm ci (aws-cdk and cdk8s-cli CLIs, pinned in package-lock.json), in the background"
npm_log=$(mktemp)
npm ci --no-audit --no-fund --loglevel=error >"$npm_log" 2>&1 &
npm_pid=$!

echo "[setup] 3/3 uv, then uv pip install -r requirements.txt -r requirements-dev.txt"
.venv/bin/python -m pip install --disable-pip-version-check --progress-bar off --no-compile -q \
  -r requirements-setup.txt 2>&1 | grep -v -E "^WARNING: Location '.*' is ignored" || true
[[ -x .venv/bin/uv ]] || { echo "[setup] ERROR: uv did not install (requirements-setup.txt)" >&2; exit 1; }
find_links=()
for location in $(.venv/bin/python -m pip config get global.find-links 2>/dev/null || true) ${PIP_FIND_LINKS:-}; do
  [[ -d "$location" && " ${find_links[*]} " != *" $location "* ]] && find_links+=(--find-links "$location")
done
(( ${#find_links[@]} )) && echo "[setup]   pip's find-links, passed on to uv: ${find_links[*]}"
uv_log=$(mktemp)
if ! .venv/bin/uv pip install --python .venv/bin/python "${find_links[@]}" \
    -r requirements.txt -r requirements-dev.txt >"$uv_log" 2>&1; then
  cat "$uv_log" >&2
  echo "[setup] ERROR: uv pip install failed (output above)" >&2
  exit 1
fi
{ grep -E "^(Resolved|Installed|Checked|Audited|warning)" "$uv_log" || true; } | sed 's/^/[setup]   /'
rm -f "$uv_log"
# The bytecode of what the suite imports, written once here (two parts, one per core) rather than by every process
# that first imports it: scripts/warm_bytecode.py. It also checks that the installed packages import.
PYTHONDONTWRITEBYTECODE= .venv/bin/python -m scripts.warm_bytecode platform & platform_pid=$!
PYTHONDONTWRITEBYTECODE= .venv/bin/python -m scripts.warm_bytecode training & training_pid=$!
for pid in "$platform_pid" "$training_pid"; do
  wait "$pid" || { echo "[setup] ERROR: Python packages failed to import after install (output above)" >&2; exit 1; }
done

if ! wait "$npm_pid"; then
  cat "$npm_log" >&2
  echo "[setup] ERROR: npm ci failed (output above)" >&2
  exit 1
fi
rm -f "$npm_log"
echo "$want" > "$STAMP"
echo "[setup] done in $(( $(date +%s) - start )) s"
