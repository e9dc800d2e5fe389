#!/usr/bin/env bash
# `make submit MODE=<variant>`: synthesize the manifests with the deployed training image, apply the ConfigMap,
# run the dataset-preparation Job and wait for it to complete, then apply the headless Service and the chosen
# variant's training Job with kubectl.
#
# Usage: scripts/submit.sh ENV MODE
#   ENV   an environment of project.yaml (default, prod, ...)
#   MODE  sync-ckpt | async-ckpt | inprocess | ft-launcher | inprocess-ft | k8s-only
# Needs: AWS credentials for the account/region of ENV, a kubeconfig for the cluster
#        (aws eks update-kubeconfig --name <cluster.name>), and the CDK stacks deployed.
# Optional: TRAINING_IMAGE_URI (skips the stack lookup), STACK_NAME (stack holding the
#           `TrainingImageUri` output; default: the first stack in the region that has it),
#           SUBMIT_PREPARE_DATA=0 (skip the dataset-preparation Job: its shards are already on FSx; the training
#           reads train.data_dir, or the Job's output directory when that is unset),
#           SUBMIT_FOLLOW=0 (apply and return; by default submit follows the Job to its end: pod phases and
#           waiting reasons, FailedScheduling events, every pod's supervisor lines, the podFailurePolicy message,
#           then Complete (exit 0) or Failed with the reason (exit 1): scripts/follow_job.py).
set -euo pipefail
cd "$(dirname "$0")/.."

env_name="${1:?usage: scripts/submit.sh ENV MODE}"
mode="${2:?usage: scripts/submit.sh ENV MODE}"
export PROJECT_ENV="$env_name"

# region, namespace, job, prep, deadline, placeholder: one Python start (an unknown MODE or a bad config ends here)
settings=$(python -m scripts.submit_settings "$mode")
eval "$settings"

for tool in aws kubectl; do
  command -v "$tool" >/dev/null || { echo "submit: '$tool' is not on PATH" >&2; exit 2; }
done

if [[ -z "${TRAINING_IMAGE_URI:-}" ]]; then
  echo "== submit [$env_name/$mode]: reading TrainingImageUri from CloudFormation ($region) =="
  if [[ -n "${STACK_NAME:-}" ]]; then
    query="Stacks[0].Outputs[?OutputKey=='TrainingImageUri'].OutputValue | [0]"
    TRAINING_IMAGE_URI=$(aws cloudformation describe-stacks --region "$region" --stack-name "$STACK_NAME" \
      --query "$query" --output text)
  else
    query="Stacks[].Outputs[?OutputKey=='TrainingImageUri'].OutputValue[] | [0]"
    TRAINING_IMAGE_URI=$(aws cloudformation describe-stacks --region "$region" --query "$query" --output text)
  fi
fi
if [[ -z "$TRAINING_IMAGE_URI" || "$TRAINING_IMAGE_URI" == "None" ]]; then
  echo "submit: no TrainingImageUri stack output found in $region; deploy the stacks or set TRAINING_IMAGE_URI" >&2
  exit 1
fi
export TRAINING_IMAGE_URI
echo "   image: $TRAINING_IMAGE_URI"

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "== submit [$env_name/$mode]: cdk8s synth -> $out =="
cdk8s synth --no-check-upgrade -o "$out" >/dev/null
python -m scripts.validate_k8s --dist "$out"

job_file="$out/train-$mode.k8s.yaml"
config_file="$out/training-config.k8s.yaml"
prep_file="$out/dataset-prep.k8s.yaml"
prepull_file="$out/image-prepull.k8s.yaml"
files=("$config_file" "$prep_file" "$out/training-service.k8s.yaml" "$prepull_file" "$job_file")
for f in "${files[@]}"; do
  [[ -f "$f" ]] || { echo "submit: $f was not synthesized" >&2; exit 1; }
done
if grep -qF "$placeholder" "${files[@]}"; then
  echo "submit: refusing to apply manifests with the placeholder image ($placeholder)" >&2
  exit 1
fi

if kubectl -n "$namespace" get job "$job" >/dev/null 2>&1; then
  echo "submit: Job $namespace/$job already exists (Job specs are immutable); delete it first:" >&2
  echo "  kubectl -n $namespace delete job $job" >&2
  exit 1
fi

echo "== submit [$env_name/$mode]: kubectl apply $(basename "$config_file") $(basename "$prepull_file") =="
kubectl apply -f "$config_file"
# The training image onto every GPU node, the spares included, while the dataset Job runs (charts/image_prepull.py).
kubectl apply -f "$prepull_file"

if [[ "${SUBMIT_PREPARE_DATA:-1}" == 1 ]]; then
  state=$(kubectl -n "$namespace" get job "$prep" \
    -o jsonpath='{range .status.conditions[?(@.status=="True")]}{.type}{" "}{end}' 2>/dev/null || echo absent)
  case "$state" in
    *Complete*) echo "== submit: dataset Job $namespace/$prep already completed; training reads its output ==" ;;
    *Failed*)
      echo "submit: dataset Job $namespace/$prep failed earlier; see kubectl -n $namespace logs job/$prep," >&2
      echo "  then: kubectl -n $namespace delete job $prep   (and submit again)" >&2
      exit 1 ;;
    *)
      echo "== submit [$env_name/$mode]: dataset Job $prep (up to ${deadline} s) =="
      if [[ "$state" == absent ]]; then kubectl apply -f "$prep_file"; fi
      if ! python -m scripts.wait_job --namespace "$namespace" --job "$prep" --timeout "$((deadline + 120))"; then
        kubectl -n "$namespace" logs "job/$prep" --tail=30 >&2 || true
        echo "submit: the dataset Job did not complete; the training Job was not applied" >&2
        exit 1
      fi ;;
  esac
else
  echo "== submit: SUBMIT_PREPARE_DATA=0: no dataset Job; training reads the shards already on FSx =="
fi

echo "== submit [$env_name/$mode]: kubectl apply $(basename "$out/training-service.k8s.yaml") $(basename "$job_file") =="
kubectl apply -f "$out/training-service.k8s.yaml"
kubectl apply -f "$job_file"
if [[ "${SUBMIT_FOLLOW:-1}" != 1 ]]; then
  echo "Submitted. Follow it with: python -m scripts.follow_job --namespace $namespace --job $job"
  exit 0
fi
echo "== submit [$env_name/$mode]: following Job $namespace/$job to its end (Ctrl-C stops following, not the Job) =="
exec python -m scripts.follow_job --namespace "$namespace" --job "$job"
