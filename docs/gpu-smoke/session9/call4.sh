#!/usr/bin/env bash
# GPU call 4 (session 9, 1 x H200, the last ~5 minutes of device time): warm workers (training.prefork) on CUDA.
# The template imports torch without touching CUDA; each forked worker initialises CUDA itself. One run with a
# fault of each restart path (in-process exception, ft_launcher after SIGKILL), warm workers on, then off.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONWARNINGS=ignore
python3 - <<'PY'
import yaml
d = yaml.safe_load(open("project.yaml"))
d.setdefault("job", {})["prefork_workers"] = False
yaml.safe_dump(d, open("/tmp/cold.yaml", "w"))
PY
for run in warm: cold:--config=/tmp/cold.yaml; do
  name=${run%%:*}; extra=${run#*:}
  timeout -k 5 80 python3 -m training.local --run-dir /tmp/pf-$name --fresh --nproc 1 --steps 40 $extra \
    --faults "exception@15:0,sigkill@30:0" > $OUT/pf-$name.txt 2>&1; echo "$name rc=$?"
  tail -1 $OUT/pf-$name.txt | cut -c1-250; grep -c "cold start" /tmp/pf-$name/launcher.log
  python3 -m training.telemetry.report /tmp/pf-$name > $OUT/pf-$name.report.txt 2>&1
  grep -A4 "^Faults" $OUT/pf-$name.report.txt
  grep -h '"event":"phase"' /tmp/pf-$name/events.jsonl | python3 -c "
import json, sys
print([(e['phase'], e['s']) for e in map(json.loads, sys.stdin) if e.get('iteration') == 0 and e.get('restart') == 0])"
done
