#!/usr/bin/env bash
# Session 21 call 8 (2 x H200, NVRx 0.7.0, NCCL): cross-pod.sh's faulted Job in two more modes that recover a lost
# node: k8s-only (torchrun, no NVRx: every fault ends the pods, NCCL holds a lost node's survivor until its timeout)
# and ft-launcher. Each must end with the fault-free state of cross-pod.sh's call 7 (6aa4b052b5d60dad...: the modes
# compute the same steps). Manifests: python -m training.local --run-dir R --fresh --nodes 2 --nproc 1 --steps 140
#   --node-replace-s 5 --faults F --mode M --nvrx-version 0.7.0 --synth-only --host-gpus 2   (-> .whl/manifests/M)
source docs/gpu-smoke/session21/env.sh || exit  # the wheels, `ip`, NVLink multicast off
for mode in k8s-only ft-launcher; do
  timeout -k 5 210 python3 -m training.local --run-dir /tmp/m-$mode --fresh --nodes 2 --nproc 1 --steps 140 \
    --node-replace-s 5 --faults "node-loss@40:1,exception@70:1,node-loss@100:0" --mode $mode --nvrx-version 0.7.0 \
    --manifests .whl/manifests/$mode > $OUT/$mode.stdout.txt 2>&1
  echo "$mode rc=$?"; grep -E "^== (OK|FAILED|Job)" $OUT/$mode.stdout.txt | cut -c1-300
  python3 -m training.telemetry.report /tmp/m-$mode > $OUT/$mode.report.txt 2>&1
  grep -A5 "^Faults" $OUT/$mode.report.txt | cut -c1-150
done
