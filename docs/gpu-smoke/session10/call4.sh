#!/usr/bin/env bash
# GPU call 4 (session 10, 1 x H200): the write-results manager warmed from a trainer thread (side queue), not in
# the writer. The tiny world-size-1 runs of call 3 again, faulted and clean.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONWARNINGS=ignore
start=$(date +%s); t() { echo "== $1 at $(( $(date +%s) - start )) s"; }
stages() {
  grep -h -E '"event":"(ckpt_staged|ckpt_committed)"' $1/events.jsonl | python3 -c "
import json, sys
for l in sys.stdin:
    e = json.loads(l); print({k: e.get(k) for k in ('event', 'step', 'restart', 'iteration', 'stall_s', 'plan_s', 'handoff_s', 'stale_wait_s', 'write_s') if k in e})"
  grep -h -o "reusing the NVRx writer.*\|NVRx writer: .*" $1/launcher.log 2>/dev/null | cut -c1-160 | head -12
}
for run in faulted:exception@20:0,oom@35:0,exception@50:0,oom@65:0,exception@80:0,hang@95:0,sigkill@110:0 clean:; do
  name=${run%%:*}; faults=${run#*:}
  timeout -k 5 200 python3 -m training.local --run-dir /tmp/ws1-$name --fresh --nproc 1 --steps 130 --faults "$faults" \
    > $OUT/ws1-$name.txt 2>&1; echo "$name rc=$?"; tail -1 $OUT/ws1-$name.txt | cut -c1-250
  python3 -m training.telemetry.report /tmp/ws1-$name --no-plan > $OUT/ws1-$name.report.txt 2>&1
  grep -A11 "^Faults" $OUT/ws1-$name.report.txt | grep -v "^$"; grep -A5 "^Checkpoints" $OUT/ws1-$name.report.txt
  stages /tmp/ws1-$name
done
t tiny
tar czf $OUT/call4.tgz -C /tmp --exclude='*.distcp' --exclude=data --exclude=checkpoints ws1-faulted ws1-clean 2>/dev/null
