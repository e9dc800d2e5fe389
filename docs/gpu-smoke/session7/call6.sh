#!/usr/bin/env bash
# GPU call 6 (session 7): first-copy diagnosis; ft-launcher mode after the SIGTERM fix; GPU memory across in-process
# restarts with a busy writer (issue 14 item 9).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONWARNINGS=ignore
start=$(date +%s)
nvidia-smi --query-gpu=name,memory.total --format=csv
for m in cold prewarm; do timeout 60 python3 .gpu/firstcopy.py $m; done 2>&1 | tee $OUT/firstcopy.txt
echo "firstcopy done $(( $(date +%s) - start )) s"
timeout 90 python3 -m training.local --run-dir /tmp/ftl --fresh --mode ft-launcher --nproc 2 --steps 40 --faults sigkill@20:1 > /tmp/ftl.txt 2>&1
echo "ftl rc=$? $(( $(date +%s) - start )) s"
grep -E "FAULT|RESTART|== OK|FAILED" /tmp/ftl.txt | cut -c1-200
grep -E "Unable to shutdown|not taken within|Stopping workers" /tmp/ftl/launcher.log | cut -c1-200
python3 -m training.telemetry.report /tmp/ftl > $OUT/ftl.report.txt 2>&1
python3 - <<'PY'
import yaml
d = yaml.safe_load(open("project.yaml"))
d["model"]["size"] = "1b"
d["train"]["seq_len"] = 2048
d["train"]["micro_batch_size"] = 4
d["checkpoint"]["interval_steps"] = 20
yaml.safe_dump(d, open("/tmp/leak.yaml", "w"))
PY
timeout 300 python3 -m training.local --run-dir /tmp/leak --fresh --config /tmp/leak.yaml --nproc 2 --steps 100 \
  --faults "exception@25:0,exception@50:1,exception@75:0" > /tmp/leak.txt 2>&1
echo "leak rc=$? $(( $(date +%s) - start )) s"
grep -E "FAULT|RESTART|== OK|FAILED|reusing|writer" /tmp/leak.txt | cut -c1-200 | head -40
python3 - <<'PY'
import json, glob
for f in sorted(glob.glob("/tmp/leak/events*.jsonl")) or sorted(glob.glob("/tmp/leak/**/events*.jsonl", recursive=True)):
    for line in open(f):
        e = json.loads(line)
        if e.get("event") in ("start",) or e.get("event","").startswith("ckpt_staged") or e.get("event") == "ckpt_committed":
            print(f.split("/")[-1], {k: e.get(k) for k in ("event","rank","step","restart","iteration","cuda_allocated_mb","cuda_reserved_mb","stall_s","t")})
PY
python3 -m training.telemetry.report /tmp/leak > $OUT/leak.report.txt 2>&1
cp /tmp/ftl.txt /tmp/leak.txt $OUT/
tar czf $OUT/call6.tgz --exclude='*.distcp' --exclude=data --exclude='*.png' --exclude=checkpoints /tmp/ftl /tmp/leak 2>/dev/null
echo "total $(( $(date +%s) - start )) s"
