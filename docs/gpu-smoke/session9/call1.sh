#!/usr/bin/env bash
# GPU call 1 (session 9, 1 x H200: the only kind lent): the CUDA probe on a GPU host; NVRx's save-plan cache
# (enable_cache) checked end to end (a storage restore from a save whose plan was reused, same final state as a
# fault-free run); launch -> first step; the 1B async checkpoint at issue 16's 300-step interval.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONWARNINGS=ignore
start=$(date +%s); t() { echo "== $1 at $(( $(date +%s) - start )) s"; }
python3 -c "import torch, importlib.metadata as m; from training.common.gpus import cuda_device_count; \
print('torch', torch.__version__, 'gpus', torch.cuda.device_count(), 'probe', cuda_device_count(), \
torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'cpu', 'nvrx', m.version('nvidia-resiliency-ext'))" | tee $OUT/versions.txt
python3 - <<'PY'
import yaml
d = yaml.safe_load(open("project.yaml"))
d["checkpoint"]["interval_steps"] = 10
d["checkpoint"]["memory_interval_steps"] = 0  # storage only: the restore must read a save whose plan was cached
yaml.safe_dump(d, open("/tmp/plancache.yaml", "w"))
PY
for run in faulted:exception@45:0 clean:; do
  name=${run%%:*}; faults=${run#*:}
  timeout -k 5 90 python3 -m training.local --run-dir /tmp/pc-$name --fresh --config /tmp/plancache.yaml --nproc 1 \
    --steps 60 --faults "$faults" > /tmp/pc-$name.txt 2>&1; echo "$name rc=$?"
  grep -h -E '"event":"(ckpt_staged|restore)"' /tmp/pc-$name/events.jsonl | python3 -c "
import json, sys
for l in sys.stdin:
    e = json.loads(l); print({k: e.get(k) for k in ('event', 'step', 'stall_s', 'plan_s', 'handoff_s', 'tier', 'from_step') if k in e})"
  python3 -c "import json; print('$name sha', json.load(open('/tmp/pc-$name/summary.json'))['final_state_sha256'])"
done 2>&1 | tee $OUT/plancache.txt
t plancache
python3 -m benchmarks.startup --repeats 2 --out /tmp/bench-startup 2>&1 | tee $OUT/startup.txt | grep -v "^\[" | tail -15
t startup
python3 -m benchmarks.checkpoint_staging --size 1b --seq-len 2048 --micro-batch 4 --steps 610 --interval 300 \
  --variants none,async --timeout 200 --out /tmp/bench-ckpt300 > $OUT/ckpt300.txt 2>&1
grep -v "^-- \|^\[" $OUT/ckpt300.txt | tail -12; grep -h ckpt_staged /tmp/bench-ckpt300/*/events.jsonl | cut -c1-300
t ckpt300
cp docs/benchmarks.json $OUT/benchmarks.json
BENCH=h200x1; python3 -m benchmarks.record --machine h200x1 --device "1 x NVIDIA H200 (NCCL, bf16)" \
  --ckpt-dir /tmp/bench-ckpt300 --startup-dir /tmp/bench-startup --out $OUT/benchmarks.json
tar czf $OUT/call1.tgz -C /tmp --exclude='*.distcp' --exclude=data pc-faulted pc-clean bench-startup bench-ckpt300 2>/dev/null
t done
