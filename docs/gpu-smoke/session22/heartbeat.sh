#!/usr/bin/env bash
# PREPARED in session 22 (no 2-GPU machine then); run in session 24 as an A/B: docs/gpu-smoke/session24/heartbeat-ab.sh.
# Session 22, on 2 x H200 (`bash docs/gpu-smoke/session22/heartbeat.sh`): session 21's cross-pod run (inprocess-ft,
# 2 pods x 1 GPU, NVRx 0.7.0, NCCL, node-loss@40:1,exception@70:1,node-loss@100:0, --node-replace-s 5) with the local
# in-process heartbeat timeout at 6 s on CUDA instead of 15 s (heartbeat-6s.yaml), then the same Job fault-free.
# Session 21's calls 7 and 9 (15 s): lost node at index 1 recovered in 21.62 / 20.45 s (detection 16.15 s).
# Manifests synthesized on the CPU machine (this host has no Node.js), as session 21's were:
#   python -m training.local --run-dir R --fresh --nodes 2 --nproc 1 --steps 140 --node-replace-s 5 --faults F \
#     --mode inprocess-ft --nvrx-version 0.7.0 --synth-only --host-gpus 2 \
#     --config docs/gpu-smoke/session22/heartbeat-6s.yaml                     (-> .whl/manifests/hb-{faulted,clean})
CROSS_POD_TAG=c22 CROSS_POD_MANIFESTS=hb- CROSS_POD_ARGS="--config docs/gpu-smoke/session22/heartbeat-6s.yaml" \
  bash docs/gpu-smoke/session21/cross-pod.sh
