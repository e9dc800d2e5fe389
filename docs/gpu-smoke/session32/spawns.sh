#!/usr/bin/env bash
# Session 32, call 2 (1 x H100, NVRx 0.7.0, torch 2.11): session 31's verify.sh counted "cold start" only in the runs'
# stdout, where a stand-in's stderr does not land. This repeats its CUDA run while sampling `ps` once a second, and
# keeps the launcher's log: NVRx's writer and results manager must start as `prefork ... spawned` stand-ins (forked
# by the template: training.common.prefork.route_spawns), never as `multiprocessing.spawn` interpreters.
source docs/gpu-smoke/session21/env.sh || exit 1
(timeout -k 5 200 python3 -m training.local --run-dir /tmp/h-gpu2 --fresh --nproc 1 --steps 70 \
   --faults "exception@20:0,hang@35:0,sigkill@50:0" > $OUT/gpu2.stdout.txt 2>&1; echo rc=$? > $OUT/rc.txt) &
for i in $(seq 1 60); do
  ps -eo pid,ppid,args >> $OUT/ps.txt; echo ---- >> $OUT/ps.txt
  [ -f $OUT/rc.txt ] && break
  sleep 1
done
wait
cat $OUT/rc.txt; tail -1 $OUT/gpu2.stdout.txt | cut -c1-250
cp /tmp/h-gpu2/launcher.log $OUT/
echo "cold start lines in launcher.log: $(grep -c 'cold start' /tmp/h-gpu2/launcher.log)"
python3 -c "import json; print(json.load(open('/tmp/h-gpu2/summary.json'))['final_state_sha256'])"
nvidia-smi --query-gpu=name --format=csv,noheader
