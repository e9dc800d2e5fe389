#!/usr/bin/env bash
# GPU benchmarks (CUDA machine with NVRx 0.7.0): recovery time per layer, checkpoint efficiency (1B model, an
# interval long enough for the write to finish before the next save: 125 steps for `ckpt`, issue 16's 300 for
# `ckpt300`), the stall of each NVRx staging mode, hang detection at 1 and 2 GPUs (and the NVRx monitor
# reproduction), the start-up phases (launch -> first step), and the trainer's GPU memory across in-process restarts
# with a busy checkpoint writer (`restarts`). Every benchmark uses one worker per GPU.
#   scripts/gpu_bench.sh OUT_DIR [recovery|ckpt|ckpt300|staging|hang|startup|restarts|all]
# Then OUT_DIR/benchmarks.json is docs/benchmarks.json with this machine's entry (key $BENCH_MACHINE, default
# h200xN) updated from what ran (benchmarks/record.py): copy it over docs/benchmarks.json.
set -uo pipefail
out="${1:?usage: gpu_bench.sh OUT_DIR [recovery|ckpt|ckpt300|staging|hang|startup|restarts|all]}"; what="${2:-all}"
mkdir -p "$out"
ngpu=$(python3 -c "import torch; print(torch.cuda.device_count())")
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONWARNINGS=ignore
rc=0
if [[ "$what" == recovery || "$what" == all ]]; then
  python3 -m benchmarks.recovery --modes inprocess,ft-launcher --steps 90 --out /tmp/bench-recovery \
    2>&1 | tee "$out/recovery.txt" || rc=1
  cp /tmp/bench-recovery/results.json "$out/recovery.json" 2>/dev/null
fi
if [[ "$what" == ckpt || "$what" == all ]]; then
  python3 -m benchmarks.checkpoint_staging --size 1b --seq-len 2048 --micro-batch 4 --steps 260 --interval 125 \
    --variants none,sync,async --timeout 150 --out /tmp/bench-ckpt 2>&1 | tee "$out/ckpt.txt" || rc=1
  cp /tmp/bench-ckpt/results.json "$out/ckpt.json" 2>/dev/null
fi
if [[ "$what" == ckpt300 || "$what" == all ]]; then
  python3 -m benchmarks.checkpoint_staging --size 1b --seq-len 2048 --micro-batch 4 --steps 610 --interval 300 \
    --variants none,async --timeout 290 --out /tmp/bench-ckpt300 2>&1 | tee "$out/ckpt300.txt" || rc=1
  cp /tmp/bench-ckpt300/results.json "$out/ckpt300.json" 2>/dev/null
fi
if [[ "$what" == staging || "$what" == all ]]; then
  python3 -m benchmarks.checkpoint_staging --size 1b --seq-len 2048 --micro-batch 4 --steps 30 --interval 10 \
    --variants none,sync,async:cuda-ipc,async:cuda-ipc-cached,async:cpu-shm,async:cpu-shm-cached --timeout 120 \
    --out /tmp/bench-staging 2>&1 | tee "$out/staging.txt" || rc=1
  cp /tmp/bench-staging/results.json "$out/staging.json" 2>/dev/null
fi
if [[ "$what" == hang || "$what" == all ]]; then
  python3 -m benchmarks.hang --world-sizes 1,2 --repeats 3 --out /tmp/bench-hang 2>&1 | tee "$out/hang.txt" || rc=1
  cp /tmp/bench-hang/results.json "$out/hang.json" 2>/dev/null
  python3 scripts/nvrx_monitor_repro.py --soft 2 --cap 20 --repeats 3 2>&1 | tee "$out/nvrx_monitor_repro.txt" || rc=1
fi
if [[ "$what" == startup || "$what" == all ]]; then
  python3 -m benchmarks.startup --repeats 3 --out /tmp/bench-startup 2>&1 | tee "$out/startup.txt" || rc=1
  cp /tmp/bench-startup/results.json "$out/startup.json" 2>/dev/null
fi
if [[ "$what" == restarts || "$what" == all ]]; then
  python3 -m benchmarks.restart_memory --out /tmp/bench-restart-memory 2>&1 | tee "$out/restart_memory.txt" || rc=1
  cp /tmp/bench-restart-memory/results.json "$out/restart_memory.json" 2>/dev/null
fi
record=(--machine "${BENCH_MACHINE:-h200x$ngpu}" --out "$out/benchmarks.json")
[[ -f /tmp/bench-ckpt300/results.json ]] && record+=(--ckpt-dir /tmp/bench-ckpt300)
[[ -f /tmp/bench-recovery/results.json ]] && record+=(--recovery-dir /tmp/bench-recovery)
[[ -f /tmp/bench-startup/results.json ]] && record+=(--startup-dir /tmp/bench-startup)
cp docs/benchmarks.json "$out/benchmarks.json" 2>/dev/null
python3 -m benchmarks.record "${record[@]}" || rc=1
exit $rc
