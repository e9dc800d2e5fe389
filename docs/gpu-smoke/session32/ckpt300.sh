#!/usr/bin/env bash
# Session 32, call 4 (1 x H100 80GB HBM3, the anchor's GPU model): session 10's call 5 again, the 1B model's async
# checkpoint at a 300-step interval against no checkpoints (1 x H200, session 10: 98.4%, stalls 0.46 / 0.44 s).
source docs/gpu-smoke/session21/env.sh || exit 1
timeout -k 5 560 python3 -m benchmarks.checkpoint_staging --size 1b --seq-len 2048 --micro-batch 4 --steps 610 \
  --interval 300 --variants ${VARIANTS:-none,async} --timeout 240 --out /tmp/bench-ckpt300 > $OUT/ckpt300.txt 2>&1
echo "rc=$?"; grep -v "^-- \|^\[" $OUT/ckpt300.txt | tail -6
grep -h -E '"event":"(ckpt_staged|ckpt_committed)"' /tmp/bench-ckpt300/async/events.jsonl | python3 -c "
import json, sys
for l in sys.stdin:
    e = json.loads(l); print({k: e.get(k) for k in ('event', 'step', 'stall_s', 'plan_s', 'handoff_s', 'write_s', 'bytes') if k in e})"
