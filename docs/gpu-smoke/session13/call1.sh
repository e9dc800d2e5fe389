#!/usr/bin/env bash
# GPU call 1 of session 13 (session 12's call2.sh, which found no machine; 1 x H200 host, CPU workers, NVRx 0.7.0):
# issue 13's done-when schedule in the five other modes (docs/recovery-layers.md: every mode recovers a node loss),
# warm workers and launchers, the rendezvous' cheap method names (deca4d7).
# Manifests synthesized on the CPU machine and carried in .gpu/ (as call1.sh says), one set per mode:
#   python -m training.local --run-dir /tmp/g-MODE --fresh --nodes 2 --nproc 2 --steps 140 --node-replace-s 5 \
#     --faults FAULTS --mode MODE --nvrx-version 0.7.0 --synth-only      (then copied to .gpu/g-MODE)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PWD/.gpu/bin:$PATH
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONWARNINGS=ignore
export CUDA_VISIBLE_DEVICES=  # CPU workers (gloo), as on the CPU machines
start=$(date +%s); t() { echo "== $1 at $(( $(date +%s) - start )) s"; }
python3 -c "
import importlib
from training.common import prefork, rendezvous_names
for m in prefork.WARM_MODULES: importlib.import_module(m)
print('cheapened on NVRx 0.7.0:', rendezvous_names.cheapen(load=True))"
faults=node-loss@40:1,exception@70:2,node-loss@100:0
for mode in ft-launcher inprocess async-ckpt sync-ckpt k8s-only; do
  timeout -k 5 100 python3 -m training.local --run-dir /tmp/g-$mode --fresh --nodes 2 --nproc 2 --steps 140 \
    --node-replace-s 5 --faults "$faults" --mode $mode --manifests .gpu/g-$mode > /tmp/g-$mode.txt 2>&1
  echo "$mode rc=$?"; grep -E "^== (OK|FAILED|Job)" /tmp/g-$mode.txt | cut -c1-260; cp /tmp/g-$mode.txt /tmp/g-$mode/stdout.txt
  grep -h "cold start\|refusing" /tmp/g-$mode/pods/*.log | sort | uniq -c | head -3
  python3 -m training.telemetry.report /tmp/g-$mode > /tmp/g-$mode/report.txt 2>&1
  grep -A5 "^Faults" /tmp/g-$mode/report.txt | cut -c1-130
  t $mode
done
for mode in ft-launcher inprocess async-ckpt sync-ckpt k8s-only; do cp /tmp/g-$mode/report.txt $OUT/g-$mode.report.txt; done
tar czf $OUT/call2.tgz -C /tmp --exclude='*.distcp' --exclude=data --exclude=checkpoints \
  g-ft-launcher g-inprocess g-async-ckpt g-sync-ckpt g-k8s-only 2>/dev/null
