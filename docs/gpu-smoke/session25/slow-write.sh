#!/usr/bin/env bash
# Session 25 call 2 (1 x H200, the only kind lent; NVRx 0.7.0): the last write slower than the CUDA-scaled local
# timeouts (CheckpointManager.drain). NVRx's async path (FileSystemWriterAsync, its persistent writer) on CUDA, the
# write held 40 s by TRAINING_CKPT_WRITE_DELAY_S; every mode with NVRx must complete with no restart. Then, on the
# host's CPUs with NVRx 0.7.0, two gloo workers (torch's async path) with a write every 5 steps held 20 s: the
# back-pressure before the last save and the last write.
source docs/gpu-smoke/session21/env.sh || exit  # the wheels, `ip`, NVLink multicast off
run() {  # name, then training.local's arguments
  local name=$1; shift
  timeout -k 5 280 python3 -m training.local --run-dir /tmp/s-$name --fresh "$@" > $OUT/$name.stdout.txt 2>&1
  echo "$name rc=$? $(grep -E '^== (OK|FAILED)' $OUT/$name.stdout.txt | cut -c1-240)"
  python3 -c "
import json
ev=[json.loads(l) for l in open('/tmp/s-$name/events.jsonl')]
t=[e['ts'] for e in ev if e['event']=='step']; c=[(e['step'],round(e['ts']-t[-1],1)) for e in ev if e['event']=='ckpt_committed']
print('  committed (step, s after the last step):', c, '; restarts:', sum(e['event']=='restart_begin' for e in ev))"
}
export TRAINING_CKPT_WRITE_DELAY_S=40
for mode in inprocess-ft ft-launcher inprocess; do run gpu-$mode --nproc 1 --steps 8 --mode $mode; done
printf 'checkpoint:\n  interval_steps: 5\n' > /tmp/every5.yaml
export TRAINING_CKPT_WRITE_DELAY_S=20
CUDA_VISIBLE_DEVICES= run cpu-inprocess-ft --nproc 2 --steps 8 --config /tmp/every5.yaml
