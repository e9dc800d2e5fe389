#!/usr/bin/env bash
# GPU call 11 (session 7): the first save with the writer warmed (pinned buffers, IPC, write-results queue, imports).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONWARNINGS=ignore
timeout 200 python3 -m benchmarks.checkpoint_staging --size 1b --seq-len 2048 --micro-batch 4 --steps 120 --interval 60 \
    --variants async --timeout 150 --out /tmp/bench-first > /tmp/first.txt 2>&1
echo "first rc=$?"
grep -v "^-- " /tmp/first.txt | tail -5; grep -h ckpt_staged /tmp/bench-first/*/events.jsonl | cut -c150-400
grep -h "pins\|NVRx writer:" /tmp/first.txt | head
cp /tmp/first.txt $OUT/
