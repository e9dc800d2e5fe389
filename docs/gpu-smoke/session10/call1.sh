#!/usr/bin/env bash
# GPU call 1 (session 10, 1 x H200): warm workers on CUDA after the process-group change (session 9's call 4 saw a
# 56 s ft_launcher restart with them, before the change); launch -> first step warm and cold; every in-process
# fault kind at world size 1, with the launcher log kept this time.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONWARNINGS=ignore
start=$(date +%s); t() { echo "== $1 at $(( $(date +%s) - start )) s"; }
python3 - <<'PY'
import yaml
d = yaml.safe_load(open("project.yaml"))
d.setdefault("job", {})["prefork_workers"] = False
yaml.safe_dump(d, open("/tmp/cold.yaml", "w"))
PY
# 1. One fault of each restart path, warm then cold.
for run in warm: cold:--config=/tmp/cold.yaml; do
  name=${run%%:*}; extra=${run#*:}
  timeout -k 5 100 python3 -m training.local --run-dir /tmp/pf-$name --fresh --nproc 1 --steps 40 $extra \
    --faults "exception@15:0,sigkill@30:0" > $OUT/pf-$name.txt 2>&1; echo "$name rc=$?"
  tail -1 $OUT/pf-$name.txt | cut -c1-250
  python3 -m training.telemetry.report /tmp/pf-$name > $OUT/pf-$name.report.txt 2>&1
  grep -A4 "^Faults" $OUT/pf-$name.report.txt
  cp /tmp/pf-$name/launcher.log $OUT/pf-$name.launcher.log 2>/dev/null
done
t prefork
# 2. Launch -> first step, warm and cold.
python3 -m benchmarks.startup --repeats 2 --out /tmp/bs-warm > $OUT/startup-warm.txt 2>&1; tail -12 $OUT/startup-warm.txt
python3 -m benchmarks.startup --repeats 2 --cold --out /tmp/bs-cold > $OUT/startup-cold.txt 2>&1; tail -12 $OUT/startup-cold.txt
t startup
# 3. In-process faults at world size 1, then a hang and a SIGKILL (warm workers, the default).
timeout -k 5 200 python3 -m training.local --run-dir /tmp/ws1 --fresh --nproc 1 --steps 130 \
  --faults "exception@20:0,oom@35:0,exception@50:0,oom@65:0,exception@80:0,hang@95:0,sigkill@110:0" > /tmp/ws1.txt 2>&1
echo "ws1 rc=$?"; python3 -m training.telemetry.report /tmp/ws1 2>&1 | tee $OUT/ws1.report.txt | grep -A12 "^Faults"
t ws1
tar czf $OUT/call1.tgz -C /tmp --exclude='*.distcp' --exclude=data --exclude=checkpoints pf-warm pf-cold ws1 bs-warm bs-cold 2>/dev/null
