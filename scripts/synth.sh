#!/usr/bin/env bash
# `make synth`: offline CDK synth (no lookups), cdk8s synth, then every validator.
set -euo pipefail
cd "$(dirname "$0")/.."
env_name="${1:-default}"
export PROJECT_ENV="$env_name"
echo "== synth [$env_name] 1/3: cdk synth --no-lookups -> cdk.out/ =="
rm -rf cdk.out
cdk synth --no-lookups --quiet -c env="$env_name" >/dev/null
echo "== synth [$env_name] 2/3: cdk8s synth -> dist/ =="
rm -rf dist
cdk8s synth --no-check-upgrade >/dev/null
echo "== synth [$env_name] 3/3: validators (cfn-lint, cdk-nag, validation report, Kubernetes schemas) =="
python -m scripts.validate --cdk-out cdk.out --dist dist --env "$env_name"
