#!/usr/bin/env bash
# GPU call 5 of session 21 (1 x H200: the 2-GPU kind was no longer lent when call 4 was made): do the local cluster's
# GPU pods see CUDA now? Calls 2 and 3 (2 x H200) ran every pod on the CPU (`no CUDA`): this host family keeps its
# driver libraries in /usr/local/nvidia/lib64, a mount of its own that a pod's root (an overlay of the host's root file
# system) does not hold, found through an LD_LIBRARY_PATH that a pod's fresh environment lacks. Since then a GPU pod
# gets the directory mounted read-only and on its library path (training/cluster/pods.py driver_mounts,
# container_env), as the NVIDIA container toolkit does. One pod of one GPU, the default mode: an exception, then the
# node lost (the replacement restores from the checkpoint: there is no peer), and the same Job fault-free.
# Manifests synthesized on the CPU machine as this host would (cuda_device_count() == 1, NVRx 0.7.0's flags; what
# `--synth-only --host-gpus 1` does since this session):
#   FAKE_CUDA=1 python synth_cuda.py --run-dir R --fresh --nodes 1 --nproc 1 --steps 140 --node-replace-s 5 \
#     --faults F --mode inprocess-ft --nvrx-version 0.7.0 --synth-only   (-> .whl/manifests/{faulted1,clean1})
source docs/gpu-smoke/session21/env.sh || exit  # the wheels, `ip`, NVLink multicast off
{ python3 -c "import torch, importlib.metadata as m; print('torch', torch.__version__, 'nvrx', m.version('nvidia-resiliency-ext'), 'gpus', torch.cuda.device_count())"
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"; python3 -c "from training.common.gpus import driver_library_dir; print('driver dir', driver_library_dir())"
  findmnt -T /usr/local/nvidia/lib64 | tail -1; } 2>&1 | tee $OUT/host.txt
faults="exception@40:0,node-loss@70:0"
for run in faulted1 clean1; do
  f=$faults; [ $run = clean1 ] && f=""
  timeout -k 5 200 python3 -m training.local --run-dir /tmp/c21-$run --fresh --nodes 1 --nproc 1 --steps 140 \
    --node-replace-s 5 --faults "$f" --mode inprocess-ft --nvrx-version 0.7.0 --manifests .whl/manifests/$run \
    > $OUT/$run.stdout.txt 2>&1
  echo "$run rc=$?"; grep -E "^== (OK|FAILED|Job)" $OUT/$run.stdout.txt | cut -c1-300
  python3 -c "import json; ev=[json.loads(l) for l in open('/tmp/c21-$run/events.jsonl')]; print('$run devices', sorted({(e.get('device'), e.get('world_size')) for e in ev if e['event']=='start'}))"
done
python3 -m training.telemetry.report /tmp/c21-faulted1 > $OUT/faulted1.report.txt 2>&1
grep -A5 "^Faults" $OUT/faulted1.report.txt | cut -c1-150
grep -h "no CUDA\|CPU fallback\|NVML" /tmp/c21-faulted1/pods/*.log | cut -c1-200 | sort | uniq -c | head
