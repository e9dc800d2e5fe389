#!/usr/bin/env bash
# GPU call 1 of session 18 (1 x H200, the only kind lent; NVRx 0.7.0): ft_launcher forked from the worker template
# (commit c8276b2, training/common/import_identity.py). A sticky exception (faults.max_repeats 1) ends rank 0 with the
# unrecoverable exit; its ShutdownWorkload request must reach ft_launcher's IPC socket (NVRx 0.7.0 names it after the
# importing pid and its rendezvous module copies it), and ft_launcher's log lines must name its own pid. Then the
# 4-fault run of session 17 again, against the fault-free one: the same final state.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONWARNINGS=ignore
python3 -c "import torch, importlib.metadata as m; print('torch', torch.__version__, 'gpus', torch.cuda.device_count(), \
'nvrx', m.version('nvidia-resiliency-ext'))" | tee $OUT/versions.txt
printf 'faults:\n  max_repeats: 1\n' > /tmp/sticky.yaml
timeout -k 5 180 python3 -m training.local --run-dir /tmp/sticky --fresh --nproc 1 --steps 12 \
  --faults "exception@3:0!" --config /tmp/sticky.yaml > $OUT/sticky.txt 2>&1; echo "sticky rc=$?"
tail -2 $OUT/sticky.txt | cut -c1-300
cp /tmp/sticky/launcher.log $OUT/sticky.launcher.log
echo "ShutdownWorkload received: $(grep -c 'WorkloadAction.ShutdownWorkload' /tmp/sticky/launcher.log)"
echo "shutdown request failed: $(grep -c 'shutdown request failed' /tmp/sticky/launcher.log)"
grep -o "Process [0-9]* hosts the TCP store\|\[ft_launcher[0-9]*@[^]]*\]" /tmp/sticky/launcher.log | sort | uniq -c | head -5
for run in clean: faulted:exception@20:0,oom@45:0,hang@70:0,sigkill@95:0; do
  name=${run%%:*}; faults=${run#*:}
  timeout -k 5 200 python3 -m training.local --run-dir /tmp/$name --fresh --nproc 1 --steps 120 --faults "$faults" \
    > $OUT/$name.txt 2>&1; echo "$name rc=$?"
  python3 -m training.telemetry.report /tmp/$name > $OUT/$name.report.txt 2>&1
  grep -A6 "^Faults" $OUT/$name.report.txt | cut -c1-160
  python3 -c "import json; s = json.load(open('/tmp/$name/summary.json')); print('$name', s['final_step'], s['final_state_sha256'], s['restarts_by_layer'])"
done
