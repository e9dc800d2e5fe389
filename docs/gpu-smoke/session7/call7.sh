#!/usr/bin/env bash
# GPU call 7 (session 7): disk bandwidth, import time, GPU memory across in-process restarts with a busy writer
# (issue 14 item 9), and the first save's stall with the writer's host-memory warm-up (issue 16).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONWARNINGS=ignore
start=$(date +%s)
df -h /tmp | tail -1
dd if=/dev/zero of=/tmp/ddtest bs=1M count=8192 oflag=direct 2>&1 | tail -1
dd if=/dev/zero of=/tmp/ddtest bs=1M count=8192 conv=fdatasync 2>&1 | tail -1
rm -f /tmp/ddtest
python3 -X importtime -c "import training.train" 2> /tmp/imp.txt; sort -t'|' -k2 -n -r /tmp/imp.txt | head -25 > $OUT/importtime.txt
python3 -c "import time; t=time.perf_counter(); import torch; print('import torch', round(time.perf_counter()-t,2)); t=time.perf_counter(); import nvidia_resiliency_ext.inprocess, nvidia_resiliency_ext.fault_tolerance; print('import nvrx', round(time.perf_counter()-t,2)); t=time.perf_counter(); import training.train; print('import training.train', round(time.perf_counter()-t,2))"
head -12 $OUT/importtime.txt
echo "diag done $(( $(date +%s) - start )) s"
python3 - <<'PY'
import yaml
d = yaml.safe_load(open("project.yaml"))
d["model"]["size"] = "1b"
d["train"]["seq_len"] = 2048
d["train"]["micro_batch_size"] = 4
d["checkpoint"]["interval_steps"] = 20
d.setdefault("inprocess", {}).update(soft_timeout_s=40, hard_timeout_s=60, barrier_timeout_s=120)
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
        print({k: e.get(k) for k in ("event","rank","step","iteration","cuda_allocated_mb","cuda_reserved_mb","stall_s","tier","from_step") if e.get(k) is not None})
PY
nvidia-smi --query-compute-apps=pid,used_memory --format=csv
python3 -m training.telemetry.report /tmp/leak > $OUT/leak.report.txt 2>&1
timeout 200 python3 -m benchmarks.checkpoint_staging --size 1b --seq-len 2048 --micro-batch 4 --steps 120 --interval 60 \
    --variants async --timeout 150 --out /tmp/bench-first > /tmp/first.txt 2>&1
echo "first rc=$? $(( $(date +%s) - start )) s"
grep -v "^-- " /tmp/first.txt | tail -12
grep -h "pins" /tmp/bench-first/*/launcher.log /tmp/bench-first/*/*.log 2>/dev/null | head -3
cp /tmp/leak.txt /tmp/first.txt $OUT/
tar czf $OUT/call7.tgz --exclude='*.distcp' --exclude=data --exclude='*.png' --exclude=checkpoints /tmp/leak /tmp/bench-first 2>/dev/null
echo "total $(( $(date +%s) - start )) s"
