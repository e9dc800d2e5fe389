#!/usr/bin/env bash
# Session 29 (1 x H200, the only kind lent; NVRx 0.7.0, torch 2.11): the gradient clip on local shards (d6382bb) and
# the kept staging copy of the CPU async path (3377418) against session 28's recorded runs of the same arguments:
# the CUDA run (one worker: a mesh of one, the clip's no-reduction branch; NVRx's async path) and the host's CPUs
# (two gloo workers: the clip's all-reduce, torch 2.11's dcp.async_save with the kept copy) must end with session
# 28's final state sha256 (4d926b730ec466af..., d72fac2c12bc0cea...). Then the unit tests of both on torch 2.11.
source docs/gpu-smoke/session21/env.sh || exit  # the wheels, NVLink multicast off
run() {  # name, then training.local's arguments
  local name=$1; shift
  timeout -k 5 200 python3 -m training.local --run-dir /tmp/h-$name --fresh "$@" > $OUT/$name.stdout.txt 2>&1
  echo "$name rc=$? $(grep -E '^== (OK|FAILED)' $OUT/$name.stdout.txt | cut -c1-260)"
  python3 -c "import json,sys; print('$name', json.load(open('/tmp/h-$name/summary.json'))['final_state_sha256'])"
}
run gpu-hang --nproc 1 --steps 70 --faults "exception@20:0,hang@35:0,sigkill@50:0"
CUDA_VISIBLE_DEVICES= run cpu-hang --nproc 2 --steps 40 --faults "hang@12:1,exception@20:0,hang@28:0"
if python3 -c "import pytest" 2>/dev/null; then
  CUDA_VISIBLE_DEVICES= timeout 180 python3 -m pytest -q -p no:cacheprovider tests/unit/training/parallel/test_distributed.py \
    tests/unit/training/checkpoint/test_backends.py 2>&1 | tail -3
else
  echo "no pytest on this host: the unit tests not run here"
fi
