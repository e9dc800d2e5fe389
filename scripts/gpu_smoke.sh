#!/usr/bin/env bash
# GPU smoke run (on a machine with CUDA GPUs, NVRx 0.7.0, NCCL): one fault of each kind, recovered.
#   scripts/gpu_smoke.sh OUT_DIR
# Run 1 (inprocess-ft): exception -> in-process, hang -> in-process, sigkill -> ft_launcher.
# Run 2 (inprocess-ft): comm (broken collective) -> in-process, oom (CUDA OutOfMemoryError) -> in-process.
# SMOKE_SPECS="name:faults ..." replaces these runs; SMOKE_STEPS (120) and SMOKE_RUN_TIMEOUT (300 s) bound each
# run; SMOKE_ARGS adds training.local arguments to every run (the training Job as local pods: "--nodes 2 --nproc 1
# --node-replace-s 5 --mode MODE --nvrx-version 0.7.0 --manifests DIR", docs/gpu-smoke.md). Each run leaves three
# files in OUT_DIR: NAME.log (progress), NAME.report.txt (goodput report) and NAME.tgz (launcher and NVRx monitor
# logs, events, report.json, what outlived the run in leftovers.txt).
set -uo pipefail
out="${1:?usage: gpu_smoke.sh OUT_DIR}"
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONWARNINGS=ignore
# A worker that makes no step progress for this long dumps its thread stacks into the launcher log.
export TRAINING_STALL_DUMP_S="${TRAINING_STALL_DUMP_S:-15}"
# One interpreter for the versions and the GPU count (an import of torch is 2 s on the CPU machines, more on a GPU's).
python3 -c "import torch, importlib.metadata as m; cuda = torch.cuda.is_available(); \
print('torch', torch.__version__, 'cuda', torch.version.cuda, 'nccl', torch.cuda.nccl.version() if cuda else None, \
'gpus', torch.cuda.device_count(), torch.cuda.get_device_name(0) if cuda else 'none', \
'nvrx', m.version('nvidia-resiliency-ext'))" \
  | tee "$out/versions.txt"
nproc=$(awk '{for (i = 1; i < NF; i++) if ($i == "gpus") print $(i + 1)}' "$out/versions.txt")
if [[ -z "$nproc" ]]; then
  echo "gpu_smoke.sh: could not read the GPU count (torch and NVRx installed?)" >&2
  exit 1
fi
if [[ "$nproc" -lt 1 ]]; then  # a dry run of this script on a machine without a GPU
  echo "gpu_smoke.sh: no CUDA GPU here; running the CPU fallback (gloo, 2 workers) instead" >&2
  nproc=2
fi
rc=0
specs=${SMOKE_SPECS:-"smoke1:exception@40:1,hang@70:0,sigkill@110:1 smoke2:comm@40:1,oom@80:0"}
for spec in $specs; do
  name=${spec%%:*}; faults=${spec#*:}
  # Bounded per run (not by wrapping this script in `timeout`, which loses the logs of the run it cuts off).
  timeout -k 10 "${SMOKE_RUN_TIMEOUT:-300}" python3 -m training.local --run-dir "/tmp/$name" --fresh --nproc "$nproc" \
    --steps "${SMOKE_STEPS:-120}" --faults "$faults" ${SMOKE_ARGS:-} 2>&1 | tee "$out/$name.log" || rc=1
  # What outlived the run (a failure that survives fresh workers points outside them): processes and GPU users.
  { ps -eo pid,ppid,etime,args | grep -E "training\.|nvidia_resiliency|multiprocessing" | grep -v grep
    if command -v nvidia-smi >/dev/null; then nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv; fi
  } > "/tmp/$name/leftovers.txt" 2>&1
  pkill -9 -f -- "training.train --run-dir /tmp/$name " 2>/dev/null  # a timed-out run's launcher and workers
  python3 -m training.telemetry.report "/tmp/$name" > "$out/$name.report.txt" 2>&1 || rc=1
  # Everything else of the run in one archive (the device tool returns at most 8 files): launcher and NVRx monitor
  # logs, events, reports, leftovers; no checkpoint data or corpus. GNU tar applies --exclude only before paths.
  tar czf "$out/$name.tgz" --exclude='*.distcp' --exclude=data --exclude='*.png' -C /tmp "$name" || rc=1
done
exit $rc
