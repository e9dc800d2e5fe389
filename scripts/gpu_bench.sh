#!/usr/bin/env bash
# GPU benchmarks (CUDA machine with NVRx 0.7.0): recovery time per layer, checkpoint efficiency (1B model, an
# interval long enough for the write to finish before the next save: 125 steps for `ckpt`, issue 16's 300 for
# `ckpt300`), the stall of each NVRx staging mode, hang detection at 1 and 2 GPUs (and the NVRx monitor
# reproduction), the start-up phases (launch -> first step), and the trainer's GPU memory across in-process restarts
# with a busy checkpoint writer (`restarts`), and the 1B model with the project's defaults (`scale`: the checkpoint
# benchmark with a save every 100 steps and the memory tier's auto interval, then a 400-step run with an exception, a
# hang and a SIGKILL, after a probe of the detached abort (a new NCCL group beside the old one's abort);
# SCALE_PARTS=abort,bench,run and SCALE_VARIANTS=none,async,async+mem choose what runs, so the parts can go in separate
# calls of a time-limited machine). Every benchmark uses one worker per GPU.
#   scripts/gpu_bench.sh OUT_DIR [recovery|ckpt|ckpt300|staging|hang|startup|restarts|scale|all]
# Then OUT_DIR/benchmarks.json is docs/benchmarks.json with this machine's entry (key $BENCH_MACHINE, default
# h200xN) updated from what ran (benchmarks/record.py): copy it over docs/benchmarks.json.
set -uo pipefail
out="${1:?usage: gpu_bench.sh OUT_DIR [recovery|ckpt|ckpt300|staging|hang|startup|restarts|scale|all]}"; what="${2:-all}"
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
if [[ "$what" == scale || "$what" == all ]]; then
  parts="${SCALE_PARTS:-abort,bench,run}"
  if [[ ",$parts," == *,abort,* ]]; then
    python3 -m benchmarks.nccl_abort --trials 3 --detach 2>&1 | tee "$out/scale-abort.txt" || rc=1
  fi
  if [[ ",$parts," == *,bench,* ]]; then
    # an earlier faulted run's checkpoints (35 GB) leave the bench too little disk on a 64 GB machine
    [[ -d /tmp/scale-1b/checkpoints ]] && echo "removing /tmp/scale-1b/checkpoints" && rm -rf /tmp/scale-1b/checkpoints
    python3 -m benchmarks.checkpoint_staging --size 1b --seq-len 2048 --micro-batch 4 --steps 410 --interval 100 \
      --variants "${SCALE_VARIANTS:-none,async,async+mem}" --timeout 240 --out /tmp/bench-scale 2>&1 \
      | grep -Ev '^frame #|^Exception raised from|sendBytes failed|should dump' | tee "$out/scale-bench.txt" || rc=1
    cp /tmp/bench-scale/results.json "$out/scale-bench.json" 2>/dev/null
    for d in /tmp/bench-scale/*/; do  # each variant's events (step times, the tier's mem_prepare), plain names
      [[ -f "$d/events.jsonl" ]] && cp "$d/events.jsonl" "$out/scale-bench-$(basename "$d" | tr '+:' '--').events.jsonl"
    done
  fi
  if [[ ",$parts," == *,run,* ]]; then
    timeout -k 10 "${SCALE_RUN_TIMEOUT:-420}" python3 -m training.local --env scale-1b --run-dir /tmp/scale-1b --fresh \
      --nproc 1 --steps 400 --faults "exception@100:0,hang@200:0,sigkill@300:0" 2>&1 | tee "$out/scale-run.txt" || rc=1
    python3 -m training.telemetry.report /tmp/scale-1b > "$out/scale-run.report.txt" 2>&1 || rc=1
    grep -h "budget\|memory\|restored" /tmp/scale-1b/launcher.log | sort | uniq -c | sort -rn | head -20 \
      > "$out/scale-run.memory.txt"
  fi
fi
record=(--machine "${BENCH_MACHINE:-h200x$ngpu}" --out "$out/benchmarks.json")
[[ -f /tmp/bench-ckpt300/results.json ]] && record+=(--ckpt-dir /tmp/bench-ckpt300)
[[ -f /tmp/bench-recovery/results.json ]] && record+=(--recovery-dir /tmp/bench-recovery)
[[ -f /tmp/bench-startup/results.json ]] && record+=(--startup-dir /tmp/bench-startup)
[[ -f /tmp/bench-scale/results.json ]] && record+=(--scale-ckpt-dir /tmp/bench-scale)
[[ -f /tmp/scale-1b/events.jsonl ]] && record+=(--scale-run-dir /tmp/scale-1b)
cp docs/benchmarks.json "$out/benchmarks.json" 2>/dev/null
python3 -m benchmarks.record "${record[@]}" || rc=1
exit $rc
