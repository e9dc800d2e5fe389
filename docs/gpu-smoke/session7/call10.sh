#!/usr/bin/env bash
# GPU call 10 (session 7): the leak fix (PreloadThenRelease + ipc_collect); the first save with the writer warmed (pinned memory + IPC).
# (issue 14 item 9), and the first save's stall with the writer's host-memory warm-up (issue 16).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONWARNINGS=ignore
start=$(date +%s)
df -h /tmp | tail -1
rm -f /tmp/ddtest
echo "diag done $(( $(date +%s) - start )) s"
python3 - <<'PY'
import yaml
d = yaml.safe_load(open("project.yaml"))
d["model"]["size"] = "1b"
d["train"]["seq_len"] = 2048
d["train"]["micro_batch_size"] = 4
d["checkpoint"]["interval_steps"] = 20
d["local"] = {"cuda_timeout_scale": 8, "inprocess": dict(soft_timeout_s=5, hard_timeout_s=8, heartbeat_interval_s=1,
    heartbeat_timeout_s=6, barrier_timeout_s=20, completion_timeout_s=20, gloo_timeout_s=7.5, monitor_thread_interval_s=0.5,
    monitor_process_interval_s=0.05, progress_watchdog_interval_s=0.5, step_timeout_floor_s=4.9, last_call_wait_s=0.1,
    termination_grace_s=2)}
yaml.safe_dump(d, open("/tmp/leak.yaml", "w"))
PY
timeout 240 python3 -m training.local --run-dir /tmp/leak --fresh --config /tmp/leak.yaml --nproc 2 --steps 100 \
  --faults "exception@25:0,exception@50:1,exception@75:0" > /tmp/leak.txt 2>&1
echo "leak rc=$? $(( $(date +%s) - start )) s"
grep -E "FAULT|RESTART|== OK|FAILED|reusing|pins" /tmp/leak.txt | cut -c1-220 | head -30
python3 - <<'PY'
import json
for line in open("/tmp/leak/events.jsonl"):
    e = json.loads(line)
    if e.get("event") in ("start", "ckpt_staged", "ckpt_committed", "restore"):
        print({k: e.get(k) for k in ("event","rank","step","iteration","cuda_allocated_mb","cuda_reserved_mb","stall_s","state_dict_s","plan_s","handoff_s","tier","from_step") if e.get(k) is not None})
PY
nvidia-smi --query-compute-apps=pid,used_memory --format=csv
python3 -m training.telemetry.report /tmp/leak > $OUT/leak.report.txt 2>&1
timeout 200 python3 -m benchmarks.checkpoint_staging --size 1b --seq-len 2048 --micro-batch 4 --steps 120 --interval 60 \
    --variants async --timeout 150 --out /tmp/bench-first > /tmp/first.txt 2>&1
echo "first rc=$? $(( $(date +%s) - start )) s"
grep -v "^-- " /tmp/first.txt | tail -6; grep -h ckpt_staged /tmp/bench-first/*/events.jsonl | cut -c1-400
grep -h "pins\|NVRx writer:" /tmp/first.txt /tmp/leak.txt | head -12
cp /tmp/leak.txt /tmp/first.txt $OUT/
tar czf $OUT/call10.tgz --exclude='*.distcp' --exclude=data --exclude='*.png' --exclude=checkpoints /tmp/leak /tmp/bench-first 2>/dev/null
echo "total $(( $(date +%s) - start )) s"
