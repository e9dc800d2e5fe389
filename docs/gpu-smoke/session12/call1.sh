#!/usr/bin/env bash
# GPU call 1 (session 12, 1 x H200 host): the launcher forked from the worker template (commit b88a2db) on the
# image's NVRx 0.7.0 and Python 3.12. First the template's imports with CUDA visible (it must stay forkable), then
# issue 13's done-when run on the local 2-pod x 2-worker cluster with CPU workers, as session 9's call 3 (cold
# launcher, cold workers) did. Manifests synthesized on the CPU machine for NVRx 0.7.0 and carried in .gpu/:
#   python -m training.local --run-dir /tmp/g-NAME --fresh --nodes 2 --nproc 2 --steps 140 --node-replace-s 5 \
#     --faults FAULTS --nvrx-version 0.7.0 --synth-only      (then copied to .gpu/g-NAME)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PWD/.gpu/bin:$PATH
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONWARNINGS=ignore
start=$(date +%s); t() { echo "== $1 at $(( $(date +%s) - start )) s"; }
python3 -c "
import importlib, time, torch
from training.common import prefork
t = time.time()
for m in prefork.WARM_MODULES: importlib.import_module(m)
print('template imports', round(time.time() - t, 2), 's; cuda available', torch.cuda.is_available(), '; unforkable:', repr(prefork._unforkable()))"
t imports
export CUDA_VISIBLE_DEVICES=  # CPU workers (gloo), as on the CPU machines
for run in faulted:node-loss@40:1,exception@70:2,node-loss@100:0 clean: faulted2:node-loss@40:1,exception@70:2,node-loss@100:0; do
  name=${run%%:*}; faults=${run#*:}; synth=${name%2}
  timeout -k 5 150 python3 -m training.local --run-dir /tmp/g-$synth --fresh --nodes 2 --nproc 2 --steps 140 \
    --node-replace-s 5 --faults "$faults" --manifests .gpu/g-$synth > /tmp/g-$name.txt 2>&1; echo "$name rc=$?"
  grep -E "^== |Job " /tmp/g-$name.txt | cut -c1-300 | tail -3; cp /tmp/g-$name.txt /tmp/g-$synth/stdout.txt
  grep -h "cold start\|refusing" /tmp/g-$synth/pods/*.log | sort | uniq -c | head -5
  python3 -m training.telemetry.report /tmp/g-$synth > $OUT/g-$name.report.txt 2>&1
  grep -A8 "^Faults" $OUT/g-$name.report.txt; grep "^Restarts" $OUT/g-$name.report.txt
  tar czf $OUT/g-$name.tgz -C /tmp --exclude='*.distcp' --exclude=data --exclude=checkpoints g-$synth 2>/dev/null
  t $name
done
