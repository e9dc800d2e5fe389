#!/usr/bin/env bash
# GPU call 2 (session 9, 1 x H200): the 1B async checkpoint at a 100-step interval (a write longer than the
# interval at one writer), with checkpoint.write_threads 1 and 4; every fault kind at world size 1 (tiny model);
# the local 2-pod x 2-worker cluster (CPU workers, gloo) on NVRx 0.7.0, the version the image ships.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONWARNINGS=ignore
start=$(date +%s); t() { echo "== $1 at $(( $(date +%s) - start )) s"; }
python3 - <<'PY'
import yaml
d = yaml.safe_load(open("project.yaml"))
d["checkpoint"]["write_threads"] = 4
yaml.safe_dump(d, open("/tmp/wt4.yaml", "w"))
PY
# 1. The 2x2 cluster on CPU workers with NVRx 0.7.0 (its rendezvous differs from 0.4.1's on the CPU machines).
for run in faulted:node-loss@40:1,exception@70:2,node-loss@100:0 clean:; do
  name=${run%%:*}; faults=${run#*:}
  CUDA_VISIBLE_DEVICES= timeout -k 5 150 python3 -m training.local --run-dir /tmp/c22-$name --fresh --nodes 2 --nproc 2 \
    --steps 140 --node-replace-s 5 --faults "$faults" > /tmp/c22-$name.txt 2>&1; echo "$name rc=$?"
  grep -E "== |FAULT|RESTART|Complete|Failed" /tmp/c22-$name.txt | cut -c1-200 | tail -12
  python3 -m training.telemetry.report /tmp/c22-$name > $OUT/c22-$name.report.txt 2>&1
done 2>&1 | tee $OUT/cluster.txt
t cluster
# 2. Every fault kind at world size 1 (tiny model, memory tier on).
timeout -k 5 150 python3 -m training.local --run-dir /tmp/ws1 --fresh --nproc 1 --steps 100 \
  --faults "exception@20:0,oom@40:0,hang@60:0,sigkill@80:0" > /tmp/ws1.txt 2>&1; echo "ws1 rc=$?"
python3 -m training.telemetry.report /tmp/ws1 2>&1 | tee $OUT/ws1.report.txt | tail -25
t ws1
# 3. 1B async at a 100-step interval, one writer and four.
python3 -m benchmarks.checkpoint_staging --size 1b --seq-len 2048 --micro-batch 4 --steps 310 --interval 100 \
  --variants none,async --timeout 150 --out /tmp/bench-i100 > $OUT/i100.txt 2>&1
t i100-wt1
python3 -m benchmarks.checkpoint_staging --size 1b --seq-len 2048 --micro-batch 4 --steps 310 --interval 100 \
  --variants async --timeout 150 --config /tmp/wt4.yaml --out /tmp/bench-i100-wt4 > $OUT/i100-wt4.txt 2>&1
grep -v "^-- \|^\[" $OUT/i100.txt | tail -5; grep -v "^-- \|^\[" $OUT/i100-wt4.txt | tail -4
for d in /tmp/bench-i100/async /tmp/bench-i100-wt4/async; do echo "$d"
  grep -h -E '"event":"(ckpt_staged|ckpt_committed)"' $d/events.jsonl | python3 -c "
import json, sys
for l in sys.stdin:
    e = json.loads(l); print({k: e.get(k) for k in ('event', 'step', 'stall_s', 'plan_s', 'handoff_s', 'write_s') if k in e})"
  ls $d/checkpoints/* | head -12
done
t done
tar czf $OUT/call2.tgz -C /tmp --exclude='*.distcp' --exclude=data --exclude=checkpoints c22-faulted c22-clean ws1 bench-i100 bench-i100-wt4 2>/dev/null
