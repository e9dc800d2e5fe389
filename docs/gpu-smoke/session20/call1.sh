#!/usr/bin/env bash
# GPU call 1 of session 20 (1 x H200, the only kind lent; NVRx 0.7.0, CPU workers): NVRx's initial ranks as ints
# (commit e9bb6af, training/resilience/inprocess.py fix_initial_ranks) on the production NVRx version.
# 1. The sibling monitor's termination barrier for a lost rank, replayed on NVRx 0.7.0's own store classes, without
#    and with the fix. 2. The default mode's 5-fault cluster schedule (two lost nodes) with NVRx 0.7.0: do the
#    survivors of the lost nodes leave the Wrapper without the ValueError? Manifests synthesized on the CPU machine:
# (Step 2 did not run: this host has no `ip`, which the local cluster's pod network needs; rc=2 with
# "the local multi-node runner needs ip (util-linux, iproute2)". Only step 1's output is kept: call1-barrier.txt.)
#   python -m training.local --run-dir /tmp/g-ipft --fresh --nodes 2 --nproc 1 --steps 40 --node-replace-s 5 \
#     --faults FAULTS --mode inprocess-ft --nvrx-version 0.7.0 --synth-only   (then .cluster/manifests -> .gpu/g-ipft)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONWARNINGS=ignore
export CUDA_VISIBLE_DEVICES=  # CPU workers (gloo), as on the CPU machines
python3 -c "import torch, importlib.metadata as m; print('torch', torch.__version__, 'nvrx', m.version('nvidia-resiliency-ext'))" \
  | tee $OUT/versions.txt
python3 - <<'PY' 2>&1 | tee $OUT/barrier.txt
import datetime, tempfile
from nvidia_resiliency_ext.inprocess import store
from training.resilience.inprocess import fix_initial_ranks

def replay(label):
    base = store.FileStore(tempfile.mkdtemp() + "/store", 2)
    iteration = store.PrefixStore(3, base)
    iteration.set_initial_rank(1, 1)
    ranks = iteration.get_initial_ranks([1])
    try:
        iteration.base_store.termination_barrier(ranks=ranks, rendezvous_count=2, timeout=datetime.timedelta(0))
        base.termination_barrier(ranks=[0], rendezvous_count=2, timeout=datetime.timedelta(0))
        print(label, "initial ranks", ranks, "-> barrier complete")
    except ValueError as exc:
        print(label, "initial ranks", ranks, "-> ValueError:", exc)

replay("NVRx as installed:")
fix_initial_ranks()
replay("with fix_initial_ranks:")
PY
faults=exception@5:1,node-loss@12:1,sigkill@19:0,node-loss@26:0,evict@33:1
timeout -k 5 200 python3 -m training.local --run-dir /tmp/g-ipft --fresh --nodes 2 --nproc 1 --steps 40 \
  --node-replace-s 5 --faults "$faults" --mode inprocess-ft --manifests .gpu/g-ipft > /tmp/g-ipft.txt 2>&1
echo "cluster rc=$?"; grep -E "^== (OK|FAILED|Job)" /tmp/g-ipft.txt | cut -c1-260
grep -h "exiting with code\|invalid literal" /tmp/g-ipft/pods/*.log | cut -c1-220 | sort | uniq -c | tee $OUT/exits.txt
python3 -m training.telemetry.report /tmp/g-ipft > $OUT/g-ipft.report.txt 2>&1; grep -A7 "^Faults" $OUT/g-ipft.report.txt | cut -c1-140
cp /tmp/g-ipft.txt $OUT/g-ipft.stdout.txt
