#!/usr/bin/env bash
# Session 31 (NVRx 0.7.0, torch 2.11): session 29's two runs (docs/gpu-smoke/session29/verify.sh: the same expected
# final states, 4d926b730ec466af... on CUDA and d72fac2c12bc0cea... on the host's CPUs), now with the template
# forking what multiprocessing's spawn starts in a worker (training.common.prefork.route_spawns): on CUDA that is
# NVRx's checkpoint writer and its write-results manager. Neither run may say "cold start" (a spawn the template did
# not fork), and the template's own unit tests must pass on torch 2.11.
bash docs/gpu-smoke/session29/verify.sh
echo "cold starts in the runs' output: $(cat $OUT/gpu-hang.stdout.txt $OUT/cpu-hang.stdout.txt | grep -c 'cold start')"
grep -h "first save\|save_s\|checkpoint_s" $OUT/gpu-hang.stdout.txt | head -5
if python3 -c "import pytest" 2>/dev/null; then
  CUDA_VISIBLE_DEVICES= timeout 120 python3 -m pytest -q -p no:cacheprovider tests/unit/training/common/test_prefork.py 2>&1 | tail -2
fi
