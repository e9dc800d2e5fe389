#!/usr/bin/env bash
# GPU call 12 (session 7): in-process recovery of the 1B model with the meta-device rebuild from a memory snapshot.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONWARNINGS=ignore
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
timeout 200 python3 -m training.local --run-dir /tmp/leak --fresh --config /tmp/leak.yaml --nproc 2 --steps 70 \
  --faults "exception@25:0,exception@50:1" > /tmp/leak.txt 2>&1
echo "leak rc=$?"
grep -E "== OK|FAILED" /tmp/leak.txt | cut -c1-250
python3 - <<'PY'
import json
for line in open("/tmp/leak/events.jsonl"):
    e = json.loads(line)
    if e.get("rank") == 0 and (e.get("event") in ("start", "restore") or (e.get("event") == "phase" and e.get("phase") in ("model", "restore", "first_step"))):
        print({k: e.get(k) for k in ("event","iteration","phase","s","meta","cuda_allocated_mb","tier","from_step") if e.get(k) is not None})
PY
python3 -m training.telemetry.report /tmp/leak 2>&1 | sed -n '/Faults/,/Restarts/p'
cp /tmp/leak.txt $OUT/call12-leak.txt; python3 -m training.telemetry.report /tmp/leak > $OUT/call12-leak.report.txt 2>&1
