#!/usr/bin/env bash
# Issue 13's cross-pod run on 2 x H200 (NVRx 0.7.0, NCCL), session 21 calls 2, 3, 4, 7 and 9 (`bash cross-pod.sh`);
# outputs in call{2,4,7,9}-*. Calls 2-4 ran it as it was before a fix each found (calls 2-3 without the `devices` line):
# - call 2: both Jobs complete with one state, but on the CPU: every pod said `no CUDA` (this host's driver libraries
#   are in /usr/local/nvidia/lib64, a mount of its own, found through an LD_LIBRARY_PATH a pod's fresh environment
#   lacks). Call 3 gave GPU pods the path: still the CPU (a pod's root, an overlay of the host's root file system,
#   does not hold that mount). Since then the directory is mounted too (training/cluster/pods.py driver_mounts).
# - call 4: on the GPUs, the fault-free state reached, but both Jobs had an in-process restart nobody injected: one
#   rank's first save handed its tensors to the writer 2.3 s after its peer's, which timed out in the checkpoint
#   group's gloo collective at the local 3 s, not scaled on CUDA like the other local timeouts. Now it is (7.5 s).
# - calls 7 and 9: no restart but the injected ones (the table in docs/benchmarks.md, GPU session 21).
# The training Job's manifests as two local pods of one GPU each (training.local --nodes 2 --nproc 1: pods as network namespaces, pod i sees GPU i),
# the default mode, a node lost at index 1, an exception, the node of index 0 lost; then the same Job fault-free.
# This host has no iproute2 and no Node.js: `ip` (and its libraries) comes from the CPU machine in .whl/iproute, and
# the manifests were synthesized there as this host would (its 2 GPUs: the scaled local timeouts; NVRx 0.7.0's flags):
#   python -m training.local --run-dir R --fresh --nodes 2 --nproc 1 --steps 140 --node-replace-s 5 \
#     --faults F --mode inprocess-ft --nvrx-version 0.7.0 --synth-only --host-gpus 2   (-> .whl/manifests/{faulted,clean})
# (made for each call by a script that set the runner's GPU count to 2; `--host-gpus 2`, added after call 7, writes
# the same files as that script did for call 7: diff -r found no difference)
# Reused with other manifests (session 22's heartbeat.sh): CROSS_POD_TAG names the run directories (/tmp/<tag>-<run>),
# CROSS_POD_MANIFESTS prefixes the manifest directories, CROSS_POD_ARGS adds arguments; unset, the run above.
source docs/gpu-smoke/session21/env.sh || exit  # the wheels, `ip`, NVLink multicast off
tag=${CROSS_POD_TAG:-c21}
{ python3 -c "import torch, importlib.metadata as m; print('torch', torch.__version__, 'nvrx', m.version('nvidia-resiliency-ext'), 'nccl', torch.cuda.nccl.version(), 'gpus', torch.cuda.device_count())"
  ip -V; id -u; for t in unshare nsenter mount chroot; do command -v $t || echo "missing $t"; done
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"; python3 -c "from training.common.gpus import driver_library_dir; print('driver dir', driver_library_dir())"; } 2>&1 | tee $OUT/host.txt
faults="node-loss@40:1,exception@70:1,node-loss@100:0"
for run in faulted clean; do
  f=$faults; [ $run = clean ] && f=""
  timeout -k 5 240 python3 -m training.local --run-dir /tmp/$tag-$run --fresh --nodes 2 --nproc 1 --steps 140 \
    --node-replace-s 5 --faults "$f" --mode inprocess-ft --nvrx-version 0.7.0 \
    --manifests .whl/manifests/${CROSS_POD_MANIFESTS:-}$run ${CROSS_POD_ARGS:-} > $OUT/$run.stdout.txt 2>&1
  echo "$run rc=$?"; grep -E "^== (OK|FAILED|Job)" $OUT/$run.stdout.txt | cut -c1-300
  [ -f /tmp/$tag-$run/job.json ] && cp /tmp/$tag-$run/job.json $OUT/$run.job.json
  [ -f /tmp/$tag-$run/summary.json ] && cp /tmp/$tag-$run/summary.json $OUT/$run.summary.json
  python3 -c "import json,sys; ev=[json.loads(l) for l in open('/tmp/$tag-$run/events.jsonl')]; print('$run devices', sorted({(e.get('device'), e.get('world_size')) for e in ev if e['event']=='start'}))"
done
python3 -m training.telemetry.report /tmp/$tag-faulted > $OUT/faulted.report.txt 2>&1
grep -A6 "^Faults" $OUT/faulted.report.txt | cut -c1-150
grep -h "NCCL\|nccl\|exiting with code\|Timed out\|timeout" /tmp/$tag-faulted/pods/*.log | cut -c1-220 | sort | uniq -c | sort -rn | head -30 > $OUT/faulted.pod-lines.txt
tar czf $OUT/faulted-pods.tgz -C /tmp/$tag-faulted pods events.jsonl 2>/dev/null; ls -la $OUT
