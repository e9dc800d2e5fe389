#!/usr/bin/env bash
# GPU benchmarks (CUDA machine with NVRx 0.7.0): recovery time per layer, then checkpoint overhead.
#   scripts/gpu_bench.sh OUT_DIR [recovery|ckpt|all]
set -uo pipefail
out="${1:?usage: gpu_bench.sh OUT_DIR [recovery|ckpt|all]}"; what="${2:-all}"
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONWARNINGS=ignore
rc=0
if [[ "$what" == recovery || "$what" == all ]]; then
  python3 -m benchmarks.recovery --modes inprocess,ft-launcher --steps 90 --out /tmp/bench-recovery \
    2>&1 | tee "$out/recovery.txt" || rc=1
  cp /tmp/bench-recovery/results.json "$out/recovery.json" 2>/dev/null
fi
if [[ "$what" == ckpt || "$what" == all ]]; then
  python3 -m benchmarks.checkpoint_overhead --size 1b --seq-len 2048 --micro-batch 4 --steps 60 --interval 20 \
    --warmup 5 --out /tmp/bench-ckpt 2>&1 | tee "$out/ckpt.txt" || rc=1
  cp /tmp/bench-ckpt/results.json "$out/ckpt.json" 2>/dev/null
fi
exit $rc
