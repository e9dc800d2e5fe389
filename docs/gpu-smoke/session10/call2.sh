#!/usr/bin/env bash
# GPU call 2 (session 10, 1 x H200): the NVRx writer kept across in-process restarts even with a write in flight
# (commit 577c704). The tiny world-size-1 run of call 1 again (every save there came right after a restart and paid a
# fresh writer: hand-over 4.2-6.2 s), then the 1B model with a write in flight at every fault.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONWARNINGS=ignore
start=$(date +%s); t() { echo "== $1 at $(( $(date +%s) - start )) s"; }
stages() {  # each save's stall and its parts, each commit's write time
  grep -h -E '"event":"(ckpt_staged|ckpt_committed)"' $1/events.jsonl | python3 -c "
import json, sys
for l in sys.stdin:
    e = json.loads(l); print({k: e.get(k) for k in ('event', 'step', 'restart', 'iteration', 'stall_s', 'plan_s', 'handoff_s', 'stale_wait_s', 'write_s') if k in e})"
  grep -h -o "reusing the NVRx writer.*\|NVRx writer: .*" $1/launcher.log 2>/dev/null | cut -c1-160 | head -12
}
# 1. Every fault kind at world size 1, tiny model (the schedule of call 1).
timeout -k 5 200 python3 -m training.local --run-dir /tmp/ws1 --fresh --nproc 1 --steps 130 \
  --faults "exception@20:0,oom@35:0,exception@50:0,oom@65:0,exception@80:0,hang@95:0,sigkill@110:0" > $OUT/ws1.txt 2>&1
echo "ws1 rc=$?"; tail -1 $OUT/ws1.txt | cut -c1-250
python3 -m training.telemetry.report /tmp/ws1 > $OUT/ws1.report.txt 2>&1; grep -A11 "^Faults" $OUT/ws1.report.txt
grep -A6 "^Checkpoints" $OUT/ws1.report.txt; stages /tmp/ws1
t ws1
# 2. 1B, a storage save every 20 steps (a write, ~12 s, is in flight at every fault), three in-process restarts.
timeout -k 5 330 python3 -m benchmarks.restart_memory --size 1b --nproc 1 --steps 100 --interval 20 \
  --faults "exception@25:0,exception@50:0,exception@75:0" --timeout 300 --out /tmp/rm1b > $OUT/rm1b.txt 2>&1
echo "rm1b rc=$?"; grep -v "^\[" $OUT/rm1b.txt | tail -22
d=$(dirname $(ls -d /tmp/rm1b/*/events.jsonl /tmp/rm1b/events.jsonl 2>/dev/null | head -1)); echo "run dir $d"
python3 -m training.telemetry.report $d --no-plan > $OUT/rm1b.report.txt 2>&1; grep -A6 "^Checkpoints" $OUT/rm1b.report.txt
stages $d; tail -2 $d/summary.json 2>/dev/null | cut -c1-300
t rm1b
tar czf $OUT/call2.tgz -C /tmp --exclude='*.distcp' --exclude=data --exclude=checkpoints ws1 rm1b 2>/dev/null
