#!/usr/bin/env bash
# GPU call 1 of session 17 (1 x H200, the only kind lent; NVRx 0.7.0): the fused AdamW update and the foreach
# gradient-norm clip (commit e90899b) on CUDA with FSDP2's DTensors: a fault-free run and a run with one fault of each
# in-pod kind must end with the same final state sha256, every fault recovered by its layer.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONWARNINGS=ignore
start=$(date +%s); t() { echo "== $1 at $(( $(date +%s) - start )) s"; }
python3 -c "import torch, importlib.metadata as m; print('torch', torch.__version__, 'gpus', torch.cuda.device_count(), \
'nvrx', m.version('nvidia-resiliency-ext'))" | tee $OUT/versions.txt
for run in clean: faulted:exception@20:0,oom@45:0,hang@70:0,sigkill@95:0; do
  name=${run%%:*}; faults=${run#*:}
  timeout -k 5 240 python3 -m training.local --run-dir /tmp/$name --fresh --nproc 1 --steps 120 --faults "$faults" \
    > $OUT/$name.txt 2>&1; echo "$name rc=$?"
  tail -2 $OUT/$name.txt | cut -c1-300
  python3 -m training.telemetry.report /tmp/$name > $OUT/$name.report.txt 2>&1
  grep -A6 "^Faults" $OUT/$name.report.txt | cut -c1-160
  python3 -c "import json; s = json.load(open('/tmp/$name/summary.json')); print('$name', s['final_step'], s['final_state_sha256'])"
  t $name
done
grep -h "fused\|Error\|error" /tmp/faulted/launcher.log | sort | uniq -c | sort -rn | head -8
tar czf $OUT/call1.tgz -C /tmp --exclude='*.distcp' --exclude=data --exclude=checkpoints clean faulted 2>/dev/null
