#!/usr/bin/env bash
# GPU call 5 (session 10, 1 x H200, the last ~9 minutes of device time): issue 16's headline benchmark at the final
# code, the 1B async checkpoint at a 300-step interval against no checkpoints (session 9: 97.6%, stalls 0.45/0.64 s).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONWARNINGS=ignore
python3 -m benchmarks.checkpoint_staging --size 1b --seq-len 2048 --micro-batch 4 --steps 610 --interval 300 \
  --variants none,async --timeout 240 --out /tmp/bench-ckpt300 > $OUT/ckpt300.txt 2>&1
echo "rc=$?"; grep -v "^-- \|^\[" $OUT/ckpt300.txt | tail -6
grep -h -E '"event":"(ckpt_staged|ckpt_committed)"' /tmp/bench-ckpt300/async/events.jsonl | python3 -c "
import json, sys
for l in sys.stdin:
    e = json.loads(l); print({k: e.get(k) for k in ('event', 'step', 'stall_s', 'plan_s', 'handoff_s', 'write_s', 'bytes') if k in e})"
tar czf $OUT/call5.tgz -C /tmp --exclude='*.distcp' --exclude=data --exclude=checkpoints bench-ckpt300 2>/dev/null
