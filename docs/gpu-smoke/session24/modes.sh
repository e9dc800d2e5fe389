#!/usr/bin/env bash
# Session 24 call 2 (2 x H200, NVRx 0.7.0, NCCL): the cross-pod faulted Job (heartbeat-ab.sh's, the committed config)
# in the five other modes, this session's code (session 21's call 8 ran two of them). Each must end with the
# fault-free state 6aa4b052b5d60dad... (call 1's; every mode computes the same steps). Manifests:
#   python -m training.local --run-dir R --fresh --nodes 2 --nproc 1 --steps 140 --node-replace-s 5 --faults F \
#     --mode M --nvrx-version 0.7.0 --synth-only --host-gpus 2   (-> .whl/manifests/M)
source docs/gpu-smoke/session21/env.sh || exit  # the wheels, `ip`, NVLink multicast off
for mode in k8s-only sync-ckpt async-ckpt inprocess ft-launcher; do
  timeout -k 5 150 python3 -m training.local --run-dir /tmp/m-$mode --fresh --nodes 2 --nproc 1 --steps 140 \
    --node-replace-s 5 --faults "node-loss@40:1,exception@70:1,node-loss@100:0" --mode $mode --nvrx-version 0.7.0 \
    --manifests .whl/manifests/$mode > $OUT/$mode.stdout.txt 2>&1
  echo "$mode rc=$?"; grep -E "^== (OK|FAILED|Job)" $OUT/$mode.stdout.txt | cut -c1-300
  python3 -m training.telemetry.report /tmp/m-$mode > $OUT/$mode.report.txt 2>&1
  grep -A5 "^Faults" $OUT/$mode.report.txt | cut -c1-150
done 2>&1 | tee $OUT/runs.txt
