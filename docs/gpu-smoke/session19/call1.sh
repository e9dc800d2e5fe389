#!/usr/bin/env bash
# GPU call 1 of session 19 (1 x H200, the only kind lent; NVRx 0.7.0): a worker's start from /proc (commit fe9c6aa,
# training/common/process_start.py) instead of psutil's create_time, which adds the start to /proc/stat's boot time
# in whole seconds. Prints both on this host, then the start-up phases with warm and cold workers again: the
# `imports` and `launcher` rows of sessions 6-10 carried the boot-time error (their sum did not).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONWARNINGS=ignore
python3 -c "import torch, importlib.metadata as m; print('torch', torch.__version__, 'gpus', torch.cuda.device_count(), \
'nvrx', m.version('nvidia-resiliency-ext'))" | tee $OUT/versions.txt
grep btime /proc/stat | tee $OUT/btime.txt
python3 -c "
import time, psutil
from training.common.process_start import process_start_ts
print(f'now - start: /proc {time.time() - process_start_ts():.3f} s, psutil {time.time() - psutil.Process().create_time():.3f} s')
" | tee $OUT/start_skew.txt
timeout -k 5 280 python3 -m benchmarks.startup --repeats 2 --out /tmp/bench-warm > $OUT/startup_warm.txt 2>&1
echo "warm rc=$?"; tail -14 $OUT/startup_warm.txt
timeout -k 5 200 python3 -m benchmarks.startup --repeats 2 --cold --out /tmp/bench-cold > $OUT/startup_cold.txt 2>&1
echo "cold rc=$?"; tail -14 $OUT/startup_cold.txt
