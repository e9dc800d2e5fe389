#!/usr/bin/env bash
# Written in session 26, when no device machine was lent; run in session 28 (results in ../session28/).
# OVERDUE_RUNS (default all): which of the runs below, by name, so one call's 10 minutes need not hold all three.
# For 1 x H200 (NVRx 0.7.0): the checkpoint section's bound on CUDA, NVRx's async path.
# 1. A 40 s write against the CUDA-scaled local section (30 s x 2.5 = 75 s; the rank waits 67.5 s): completes with
#    no restart (session 25's result, with the new bound).
# 2. A 25 s write against an 8 s local section (20 s on CUDA; the rank waits 18 s), every write: each attempt is the
#    rank's own storage fault (checkpoint_write, exit 21), never a SIGKILL; NVRx's unfinished write is abandoned
#    (its writer is stopped), so the run ends with exit 21 once faults.max_repeats is used up.
source docs/gpu-smoke/session21/env.sh || exit  # the wheels, `ip`, NVLink multicast off
run() {  # name, then training.local's arguments
  local name=$1; shift
  [[ -z ${OVERDUE_RUNS:-} || " $OVERDUE_RUNS " == *" $name "* ]] || return 0
  timeout -k 5 280 python3 -m training.local --run-dir /tmp/s-$name --fresh "$@" > $OUT/overdue-$name.stdout.txt 2>&1
  echo "$name rc=$? $(grep -E '^== (OK|FAILED)' $OUT/overdue-$name.stdout.txt | cut -c1-260)"
  python3 -c "
import json
ev=[json.loads(l) for l in open('/tmp/s-$name/events.jsonl')]
t=[e['ts'] for e in ev if e['event']=='step']; c=[(e['step'],round(e['ts']-t[-1],1)) for e in ev if e['event']=='ckpt_committed']
print('  committed (step, s after the last step):', c)
print('  restarts:', [(e['layer'], e['cause']) for e in ev if e['event']=='restart_begin'])
print('  exits:', [(e['reason'], e['code']) for e in ev if e['event']=='exit'])"
  grep -hE "did not finish within|given up|Section 'checkpoint' has been open" /tmp/s-$name/launcher.log | sort | uniq -c | head -5
}
export TRAINING_CKPT_WRITE_DELAY_S=40
run gpu-40s-inprocess-ft --nproc 1 --steps 8 --mode inprocess-ft
printf 'local:\n  ft:\n    section_timeouts_s: {setup: 60, step: 15, checkpoint: 8}\n' > /tmp/section8.yaml
export TRAINING_CKPT_WRITE_DELAY_S=25
for mode in inprocess-ft ft-launcher; do run gpu-25s-$mode --nproc 1 --steps 8 --mode $mode --config /tmp/section8.yaml; done
