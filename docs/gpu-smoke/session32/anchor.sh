#!/usr/bin/env bash
# Session 32, call 3 (1 x H100 80GB HBM3, the anchor's GPU model; NVRx 0.7.0, torch 2.11): session 10's world-size-1
# schedule (every in-process fault kind, then a hang and a SIGKILL) with today's code, its report's per-fault
# recovery times (fault -> first new step after the restore), and launch -> first step with warm workers.
source docs/gpu-smoke/session21/env.sh || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader
timeout -k 5 240 python3 -m training.local --run-dir /tmp/ws1 --fresh --nproc 1 --steps 130 \
  --faults "exception@20:0,oom@35:0,exception@50:0,oom@65:0,exception@80:0,hang@95:0,sigkill@110:0" > $OUT/ws1.txt 2>&1
echo "ws1 rc=$?"; tail -1 $OUT/ws1.txt | cut -c1-260
python3 -m training.telemetry.report /tmp/ws1 > $OUT/ws1.report.txt 2>&1
grep -A16 "^Faults" $OUT/ws1.report.txt
cp /tmp/ws1/launcher.log $OUT/ws1.launcher.log
timeout -k 5 240 python3 -m benchmarks.startup --repeats 2 --out /tmp/bs-warm > $OUT/startup-warm.txt 2>&1
echo "startup rc=$?"; tail -12 $OUT/startup-warm.txt
