#!/usr/bin/env bash
# Session 24, on 2 x H200 (`bash docs/gpu-smoke/session24/heartbeat-ab.sh`): session 22's prepared heartbeat lead as
# an A/B in one call. Issue 13's cross-pod run (inprocess-ft, 2 pods x 1 GPU, NVRx 0.7.0, NCCL, 140 steps,
# node-loss@40:1,exception@70:1,node-loss@100:0, --node-replace-s 5), alternating the committed project.yaml (the
# in-process heartbeat timeout 6 s locally, 15 s on CUDA) and session 22's heartbeat-6s.yaml (2.4 s, 6 s on CUDA),
# twice each, then the same Job fault-free once (the state every run must end with). Sessions 21's calls 7/9 (15 s):
# the lost node of index 1 recovered in 21.62 / 20.45 s, 16.15 / 15.19 s of it detection.
# Manifests synthesized on the CPU machine with this session's code (this host has no Node.js):
#   python -m training.local --run-dir R --fresh --nodes 2 --nproc 1 --steps 140 --node-replace-s 5 --faults F \
#     --mode inprocess-ft --nvrx-version 0.7.0 --synth-only --host-gpus 2 [--config heartbeat-6s.yaml]
#   (-> .whl/manifests/{faulted,clean,hb-faulted,hb-clean})
source docs/gpu-smoke/session21/env.sh || exit  # the wheels, `ip`, NVLink multicast off
python3 -c "import torch, importlib.metadata as m; print('torch', torch.__version__, 'nvrx', m.version('nvidia-resiliency-ext'), 'nccl', torch.cuda.nccl.version(), 'gpus', torch.cuda.device_count())" 2>&1 | tee $OUT/host.txt
faults="node-loss@40:1,exception@70:1,node-loss@100:0"
hb="--config docs/gpu-smoke/session22/heartbeat-6s.yaml"
for run in hb-faulted-1 faulted-1 hb-faulted-2 faulted-2 clean; do
  manifests=${run%-[0-9]}; f=$faults; args=""
  [ $run = clean ] && f=""
  case $run in hb-*) args=$hb;; esac
  timeout -k 5 200 python3 -m training.local --run-dir /tmp/c24-$run --fresh --nodes 2 --nproc 1 --steps 140 \
    --node-replace-s 5 --faults "$f" --mode inprocess-ft --nvrx-version 0.7.0 --manifests .whl/manifests/$manifests \
    $args > $OUT/$run.stdout.txt 2>&1
  echo "$run rc=$?"; grep -E "^== (OK|FAILED|Job)" $OUT/$run.stdout.txt | cut -c1-300
  for f in job.json summary.json; do [ -f /tmp/c24-$run/$f ] && cp /tmp/c24-$run/$f $OUT/$run.$f; done
  if [ $run != clean ]; then
    python3 -m training.telemetry.report /tmp/c24-$run > $OUT/$run.report.txt 2>&1
    grep -A5 "^Faults" $OUT/$run.report.txt | cut -c1-160
  fi
done 2>&1 | tee $OUT/runs.txt
ls -la $OUT
