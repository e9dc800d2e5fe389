#!/usr/bin/env bash
# GPU call 6 of session 21 (1 x H200): call 5's faulted one-pod Job again, keeping its events and pod logs. Call 5's
# report gave the node loss at step 73 a rollback of 72 steps (a restart from step 0) where the same Job on the CPU
# machine restores step 50 (rollback 23): which checkpoints had committed, and what did the replacement pod restore?
source docs/gpu-smoke/session21/env.sh || exit  # the wheels, `ip`, NVLink multicast off
timeout -k 5 200 python3 -m training.local --run-dir /tmp/c21-f1 --fresh --nodes 1 --nproc 1 --steps 140 \
  --node-replace-s 5 --faults "exception@40:0,node-loss@70:0" --mode inprocess-ft --nvrx-version 0.7.0 \
  --manifests .whl/manifests/faulted1 > $OUT/f1.stdout.txt 2>&1
echo "rc=$?"; grep -E "^== (OK|FAILED|Job)" $OUT/f1.stdout.txt | cut -c1-300
python3 - <<'PY' | tee $OUT/f1.timeline.txt
import json
for l in open("/tmp/c21-f1/events.jsonl"):
    e = json.loads(l)
    if e["event"] in ("launch", "restore", "ckpt_begin", "ckpt_staged", "ckpt_committed", "ckpt_failed", "fault_injected", "restart_end", "exit"):
        keep = ("step", "from_step", "tier", "reason", "resumed_step", "kind", "backend", "write_s", "code", "error")
        print(f"{e['ts'] % 1000:8.2f} {e['rank']:2d} {e['event']:15s}", {k: e[k] for k in keep if e.get(k) is not None})
PY
ls -la /tmp/c21-f1/checkpoints/ 2>&1 | tee $OUT/f1.claims.txt
find /tmp/c21-f1/checkpoints -maxdepth 2 | sort | head -40 | tee -a $OUT/f1.claims.txt
tar czf $OUT/f1-pods.tgz -C /tmp/c21-f1 pods events.jsonl
